import { type AttributeValue, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { describe, expect, it } from 'vitest';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import type { JobLease } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { refusedClaim } from '../../../../shared/core/protocol/claim.ts';
import { cancelledFastCommit, refusedFastCommit } from '../../../../shared/core/protocol/complete.ts';
import { cancelledFencedWrite, refusedFencedWrite } from '../../../../shared/core/protocol/fence.ts';
import { LeaseLostError, StoreUnavailableError } from '../../../../shared/errors.ts';

const lease: JobLease = {
  dedupKey: 'k',
  owner: 'w1',
  token: 7,
  attempts: 1,
  messageId: 'm',
  version: 3,
  leaseUntil: 5_000,
};

function raw(overrides: Partial<JobItem> = {}): Record<string, AttributeValue> {
  const item: JobItem = {
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
  };
  return marshall(item, { removeUndefinedValues: true });
}

function cancelled(...codes: string[]): TransactionCanceledException {
  return new TransactionCanceledException({
    message: 'cancelled',
    $metadata: {},
    CancellationReasons: codes.map((Code) => (Code === 'None' ? { Code } : { Code, Item: raw() })),
  });
}

const claim = { dedupKey: 'k', owner: 'w1', messageId: 'm', type: 't', createdAt: 'c', leaseMs: 4_000 };

describe('Module: dynamodb-refusals', () => {
  it('holds a claim refused by itself, and reports anyone else’s item', () => {
    const own = refusedClaim(raw({ attempts: 2 }), { ...claim, now: 1_000 });
    expect(own).toMatchObject({ claimed: true, kind: 'retry', lease: { token: 7, version: 3 } });
    const other = refusedClaim(raw({ owner: 'w2' }), { ...claim, now: 1_000 });
    expect(other).toMatchObject({ claimed: false, existing: { owner: 'w2' } });
  });

  it('a claim refused by itself (its answer lost) passes on the recorded dead-letter cause as `previous` (rev18 A)', () => {
    const own = refusedClaim(
      raw({
        attempts: 2,
        deadReason: 'permanent-error',
        lastError: 'closed',
        lastErrorClass: 'PermanentJobError',
      }),
      { ...claim, now: 1_000 },
    );
    expect(own).toMatchObject({
      claimed: true,
      previous: { deadReason: 'permanent-error', lastError: 'closed', lastErrorClass: 'PermanentJobError' },
    });
  });

  it('takes a fast commit refused by itself as done', () => {
    const req = { ...claim, now: 1_000, maxAttempts: 3 };
    expect(refusedFastCommit(raw({ status: JobStatus.Completed }), req)).toEqual({ ok: true });
    expect(refusedFastCommit(raw(), req)).toMatchObject({ ok: false, reason: 'refused' });
    expect(cancelledFastCommit(cancelled('ConditionalCheckFailed', 'None'))).toMatchObject({
      reason: 'refused',
    });
    expect(cancelledFastCommit(cancelled('None', 'ConditionalCheckFailed'))).toEqual({
      ok: false,
      reason: 'effect-conflict',
      index: 0,
    });
  });

  it('passes a fenced write refused by itself or accepted, and loses the lease otherwise', () => {
    const mine = { item: raw({ version: 4, updatedAt: 2_000 }), writtenAt: 2_000, cause: undefined };
    expect(() => refusedFencedWrite(lease, 'complete', mine)).not.toThrow();
    const taken = { item: raw({ owner: 'w2', token: 8 }), writtenAt: 2_000, cause: undefined };
    expect(() => refusedFencedWrite(lease, 'renew', taken, () => true)).not.toThrow();
    expect(() => refusedFencedWrite(lease, 'renew', taken)).toThrow(/token 8/);
    const gone = { item: undefined, writtenAt: 2_000, cause: undefined };
    expect(() => refusedFencedWrite(lease, 'release', gone)).toThrow(/item is gone/);
  });

  it('says when a refusal shows the job completed under this very lease', () => {
    const done = { item: raw({ status: JobStatus.Completed }), writtenAt: undefined, cause: undefined };
    try {
      refusedFencedWrite(lease, 'release', done);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(LeaseLostError);
      expect((error as LeaseLostError).completedByThisLease).toBe(true);
    }
  });

  it('tells a fence refusal, an effect conflict, a busy item and an outage apart in a transaction', () => {
    expect(() => cancelledFencedWrite(lease, 'complete', cancelled('ConditionalCheckFailed'))).toThrow(
      LeaseLostError,
    );
    expect(cancelledFencedWrite(lease, 'complete', cancelled('None', 'None', 'TransactionConflict'))).toEqual(
      { ok: false, reason: 'effect-conflict', index: 1, busy: true },
    );
    expect(cancelledFencedWrite(lease, 'complete', cancelled('TransactionConflict', 'None'))).toEqual({
      ok: false,
      reason: 'effect-conflict',
      index: -1,
    });
    expect(() => cancelledFencedWrite(lease, 'complete', cancelled('None', 'ThrottlingError'))).toThrow(
      StoreUnavailableError,
    );
  });
});
