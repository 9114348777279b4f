import { marshall } from '@aws-sdk/util-dynamodb';
import { describe, expect, it } from 'vitest';
import { HISTORY_MAX, type HistoryEvent } from '../../../../shared/core/contract/job-history.ts';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import type { ClaimRequest, JobLease } from '../../../../shared/core/contract/job-store.ts';
import { redriveEvent } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { trimmedHistory } from '../../../../shared/core/protocol/history-writes.ts';
import { isOwnUndo, refusedRedrive } from '../../../../shared/core/protocol/redrive.ts';
import { laterRenewal } from '../../../../shared/core/protocol/renew.ts';
import { deadKeyToReset, refusedReset, resetClaim } from '../../../../shared/core/protocol/reset.ts';

// The readers the edges' files gained when the adapters' inline decisions moved into core/protocol/: each
// reads an answer or a refusal's item into what the adapter does next. The adapters' integration tests
// and the store contract run them on the emulator; these pin each branch.

const lease: JobLease = {
  dedupKey: 'k',
  owner: 'w1',
  token: 7,
  attempts: 1,
  messageId: 'm',
  version: 3,
  leaseUntil: 5_000,
};

function item(overrides: Partial<JobItem> = {}): JobItem {
  return {
    dedupKey: 'k',
    status: JobStatus.InProgress,
    owner: 'w1',
    leaseUntil: 5_000,
    token: 7,
    attempts: 1,
    version: 3,
    messageId: 'm',
    type: 't',
    createdAt: 'c',
    claimedAt: 1_000,
    updatedAt: 1_000,
    expiresAt: 99,
    ...overrides,
  } as JobItem;
}

const events = (n: number): HistoryEvent[] =>
  Array.from({ length: n }, (_, i) => ({ e: 'redrive', at: i, by: 'op' }) as HistoryEvent);

describe('Module: protocol readers', () => {
  it('laterRenewal: a refusal over a later lease end of this same lease is no loss; anything else is', () => {
    expect(laterRenewal(item({ leaseUntil: 9_000 }), lease, 8_000, undefined)).toBe(9_000);
    expect(laterRenewal(item({ leaseUntil: 8_000 }), lease, 8_000, undefined)).toBeUndefined();
    expect(laterRenewal(item({ leaseUntil: 9_000, token: 8 }), lease, 8_000, undefined)).toBeUndefined();
    const cause = { reason: 'r', errorMessage: '', errorClass: '' };
    expect(laterRenewal(item({ leaseUntil: 9_000 }), lease, 8_000, cause)).toBeUndefined();
  });

  it('refusedRedrive: its own landed reset, a moved item, a full history to trim, or nothing to do', () => {
    const event = redriveEvent(50, { by: 'op' });
    const own = item({ status: JobStatus.RetryWait, attempts: 0, version: 5, updatedAt: 50 });
    expect(refusedRedrive(own, event, 4, 50)).toBe(true);
    expect(refusedRedrive(item({ version: 6 }), event, 4, 50)).toBe(false);
    expect(refusedRedrive(undefined, event, undefined, 50)).toBe(false);
    expect(refusedRedrive(item({ history: events(3) }), event, undefined, 50)).toBe(false);
    const full = item({ history: events(HISTORY_MAX), version: 9 });
    expect(refusedRedrive(full, event, undefined, 50)).toEqual({
      replace: [...events(HISTORY_MAX), event].slice(-HISTORY_MAX),
      dropped: 1,
      readVersion: 9,
      read: events(HISTORY_MAX),
    });
    expect(refusedRedrive(full, event, undefined, 50)).toEqual(trimmedHistory(full, event));
  });

  it('isOwnUndo: undone after all only when the item is back at the next version, written at its time', () => {
    const before = item({ status: JobStatus.Dead });
    expect(isOwnUndo(item({ status: JobStatus.Dead, version: 6, updatedAt: 70 }), before, 5, 70)).toBe(true);
    expect(isOwnUndo(item({ status: JobStatus.Dead, version: 7, updatedAt: 70 }), before, 5, 70)).toBe(false);
    expect(isOwnUndo(item({ status: JobStatus.RetryWait, version: 6, updatedAt: 70 }), before, 5, 70)).toBe(
      false,
    );
    expect(isOwnUndo(undefined, before, 5, 70)).toBe(false);
  });

  it('deadKeyToReset: only a refused fresh send of the dead job’s type past deadKeyUntil resets it', () => {
    const req: ClaimRequest = {
      ...lease,
      type: 't',
      createdAt: 'c',
      now: 2_000,
      leaseMs: 1_000,
      messageId: 'm2',
    };
    const dead = item({ status: JobStatus.Dead, deadKeyUntil: 1_500, messageId: 'm1' });
    expect(deadKeyToReset({ claimed: false, existing: dead }, req)).toBe(dead);
    expect(deadKeyToReset({ claimed: false, existing: { ...dead, type: 'u' } }, req)).toBeUndefined();
    expect(
      deadKeyToReset({ claimed: false, existing: { ...dead, deadKeyUntil: 2_500 } }, req),
    ).toBeUndefined();
    expect(
      deadKeyToReset({ claimed: false, existing: dead }, { ...req, onlyIfMessageId: 'm1' }),
    ).toBeUndefined();
  });

  it('resetClaim: the lease it answers counts on from the dead item, its reset event in the history', () => {
    const req: ClaimRequest = {
      ...lease,
      type: 't',
      createdAt: 'c',
      now: 2_000,
      leaseMs: 1_000,
      messageId: 'm2',
    };
    const dead = item({ status: JobStatus.Dead, token: 9, version: 12, deadAt: 1_200, history: events(2) });
    const { update, answer } = resetClaim('jobs', req, dead, { leaseUntil: 3_000, expiresAt: 99 });
    expect(answer).toMatchObject({
      claimed: true,
      kind: 'fresh',
      wasDeadAt: 1_200,
      lease: { token: 10, version: 13, attempts: 1, leaseUntil: 3_000, messageId: 'm2' },
    });
    expect(answer.claimed && answer.lease.history?.at(-1)).toMatchObject({ e: 'reset', wasDeadAt: 1_200 });
    expect(update.ExpressionAttributeValues).toMatchObject({ ':newToken': 10, ':deadToken': 9 });
  });

  it('refusedReset: another copy’s reset, this very reset whose answer was lost (its wasDeadAt), or no item', () => {
    const req: ClaimRequest = {
      ...lease,
      type: 't',
      createdAt: 'c',
      now: 2_000,
      leaseMs: 1_000,
      messageId: 'm2',
    };
    const dead = item({ status: JobStatus.Dead, deadAt: 1_200 });
    const raw = (i: JobItem) => marshall(i, { removeUndefinedValues: true });
    const other = item({ owner: 'w2', messageId: 'm3', claimedAt: 2_000 });
    expect(refusedReset(raw(other), req, dead)).toMatchObject({ claimed: false, existing: { owner: 'w2' } });
    const own = item({ attempts: 1, messageId: 'm2', claimedAt: 2_000 });
    expect(refusedReset(raw(own), req, dead)).toMatchObject({
      claimed: true,
      kind: 'fresh',
      wasDeadAt: 1_200,
    });
    expect(refusedReset(undefined, req, dead)).toBe('gone');
  });
});
