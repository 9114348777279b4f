import { describe, expect, it } from 'vitest';
import type { JobStateItem } from '../../../shared/core/adapters/dynamodb-job-batch.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import type { DeadLetterSummary } from '../../../shared/ops/dlq-letters.ts';
import { letterMark } from '../../../shared/ops/job-letters.ts';
import { REDACT_THREW, showLetterPayload, showValue } from '../../../shared/ops/payload-view.ts';

const diedAt = Date.parse('2026-12-03T10:00:00.000Z');
const letter: DeadLetterSummary = {
  messageId: 'dl-1',
  dedupKey: 'k',
  type: 't',
  reason: 'max-attempts',
  attempts: 3,
  originalMessageId: 'm-1',
  deadAt: new Date(diedAt).toISOString(),
};
const item = (over: Partial<JobStateItem> = {}): JobStateItem => ({
  dedupKey: 'k',
  status: JobStatus.Dead,
  messageId: 'm-1',
  attempts: 3,
  type: 't',
  ...over,
});

describe('Function: letterMark', () => {
  it('leaves the letter of a job still dead of it unmarked', () => {
    expect(letterMark(letter, item())).toBeUndefined();
  });

  it('marks a letter whose job completed, was cancelled, or has no item', () => {
    expect(letterMark(letter, item({ status: JobStatus.Completed }))).toBe('completed');
    expect(letterMark(letter, item({ status: JobStatus.Cancelled }))).toBe('cancelled');
    expect(letterMark(letter, undefined)).toBe('no-job');
  });

  it('marks a letter whose job was reset since: by a redrive (waiting or running) or by a fresh send after its deadKeyTtl', () => {
    expect(letterMark(letter, item({ status: JobStatus.RetryWait, attempts: 0 }))).toBe('reset');
    expect(letterMark(letter, item({ status: JobStatus.InProgress, attempts: 1 }))).toBe('reset');
    const reset = { e: 'reset', at: diedAt + 60_000, wasDeadAt: diedAt } as const;
    expect(letterMark(letter, item({ messageId: 'm-2', history: [reset] as never }))).toBe('reset');
  });

  it('marks a letter of a job that died again under another message', () => {
    expect(letterMark(letter, item({ messageId: 'm-2' }))).toBe('died-again');
  });
});

describe('Function: showValue', () => {
  it('gives the size of the value as sent and says when the hook changed the text', () => {
    const shown = showValue({ card: '4111 1111 1111 1111', n: 1 }, (t) =>
      t.replace(/\d{4}( \d{4}){3}/, '[card]'),
    );
    expect(shown.text).toContain('[card]');
    expect(shown.text).not.toContain('4111');
    expect(shown.bytes).toBe(Buffer.byteLength('{"card":"4111 1111 1111 1111","n":1}'));
    expect(shown.redacted).toBe(true);
    expect(showValue({ n: 1 }, (t) => t).redacted).toBe(false);
  });

  it('withholds the text when the hook throws or returns no string', () => {
    const threw = showValue({ secret: 's' }, () => {
      throw new Error('boom');
    });
    expect(threw).toEqual({ text: REDACT_THREW, bytes: 14, redacted: true });
    expect(showValue({ secret: 's' }, () => 1 as unknown as string).text).toBe(REDACT_THREW);
  });
});

describe('Function: showLetterPayload', () => {
  const envelope = { v: 1, id: 'e-1', dedupKey: 'k', type: 't', createdAt: new Date(diedAt).toISOString() };

  it('shows an inline payload and says an offloaded one is in S3 when no bucket is given', async () => {
    const inline = await showLetterPayload(JSON.stringify({ ...envelope, payload: { a: 1 } }));
    expect(inline).toMatchObject({ source: 'inline', value: { a: 1 }, redacted: false });
    const ref = {
      bucket: 'my-bucket',
      key: 'payloads/2026-12-03/00000000-0000-4000-8000-000000000000.json',
      bytes: 10,
      sha256: 'a'.repeat(64),
    };
    const pointer = await showLetterPayload(JSON.stringify({ ...envelope, payloadRef: ref }));
    expect(pointer).toEqual({ problem: expect.stringContaining('--payload-bucket my-bucket'), ref });
  });

  it('says a body that is no envelope is none, without quoting it', async () => {
    const out = await showLetterPayload('{"secret-token": 1');
    expect(out).toEqual({ problem: expect.stringContaining('not a leaseq envelope') });
    expect(JSON.stringify(out)).not.toContain('secret-token');
  });
});
