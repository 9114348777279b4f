import { describe, expect, it } from 'vitest';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { refusedMessageTarget } from '../../../../shared/core/pipeline/refused-job.ts';

const NOW = 1_000_000;
const item = (over: Partial<JobItem> = {}): JobItem => ({
  dedupKey: 'k',
  status: JobStatus.RetryWait,
  leaseUntil: NOW - 1,
  token: 5,
  attempts: 1,
  version: 3,
  messageId: 'm-1',
  type: 't',
  ...over,
});
/** A message with id `id`, re-sent in place of `former`. */
const message = (id: string, former: readonly string[] = []) => ({
  isMessage: (messageId: string | undefined) => messageId === id || former.includes(messageId ?? ''),
});

describe('Function: refusedMessageTarget', () => {
  it('takes a job whose item waits for the message, by its id or one it was re-sent in place of', () => {
    expect(refusedMessageTarget(item(), message('m-1'), 't', NOW)).toEqual({
      kind: 'take',
      messageId: 'm-1',
    });
    expect(refusedMessageTarget(item(), message('m-9', ['m-1']), 't', NOW)).toEqual({
      kind: 'take',
      messageId: 'm-1',
    });
    const died = item({ status: JobStatus.InProgress, owner: 'w' });
    expect(refusedMessageTarget(died, message('m-1'), 't', NOW).kind).toBe('take');
  });

  it('hides the message while a lease or a backoff holds its job', () => {
    const held = item({ status: JobStatus.InProgress, owner: 'w', leaseUntil: NOW + 4000 });
    expect(refusedMessageTarget(held, message('m-1'), 't', NOW)).toEqual({ kind: 'wait', hideForMs: 4000 });
    const early = item({ leaseUntil: NOW + 500 });
    expect(refusedMessageTarget(early, message('m-1'), 't', NOW)).toEqual({ kind: 'wait', hideForMs: 500 });
  });

  it('calls the message a copy when no item waits for it', () => {
    const copy = (i: JobItem | undefined, m = message('m-1')) => refusedMessageTarget(i, m, 't', NOW).kind;
    expect(copy(undefined)).toBe('copy');
    expect(copy(item(), message('m-2'))).toBe('copy');
    expect(copy(item({ type: 'other' }))).toBe('copy');
    for (const status of [JobStatus.Completed, JobStatus.Dead, JobStatus.Cancelled]) {
      expect(copy(item({ status }))).toBe('copy');
    }
  });
});
