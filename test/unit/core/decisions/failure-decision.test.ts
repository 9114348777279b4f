import { describe, expect, it } from 'vitest';
import { decideFailure } from '../../../../shared/core/decisions/failure-decision.ts';
import {
  DeadlineError,
  InvalidEnvelopeError,
  LeaseLostError,
  LeaseRanOutError,
  OptimisticConflictError,
  PermanentJobError,
  StoreRefusedError,
  StoreUnavailableError,
  TransientJobError,
} from '../../../../shared/errors.ts';

const facts = (attempts: number, maxAttempts = 3, refunds = 0) => ({
  attempts,
  maxAttempts,
  refunds,
  maxRefunds: 2,
  backoffSeconds: (n: number) => n * 10,
});
/** The heartbeat's watchdog fired; `renewalFailed`: a renewal had been sent and did not get through. */
const ranOut = (renewalFailed: boolean) =>
  new LeaseRanOutError('k', 1, 'the lease ran out', undefined, { renewalFailed });
const outage = () => new StoreUnavailableError('complete', new Error('ServiceUnavailable'));

describe('Function: decideFailure', () => {
  it('treats a refusal that shows our own commit as done, and any other refusal as a lost lease', () => {
    expect(decideFailure(new LeaseLostError('k', 1, 'refused', undefined, true), facts(3)).kind).toBe(
      'completed-earlier',
    );
    // Even on the last attempt: a lost lease never dead-letters, the new owner decides.
    expect(decideFailure(new LeaseLostError('k', 1, 'refused'), facts(3)).kind).toBe('lease-lost');
  });

  it('dead-letters a write the store refuses on its first attempt, the limit first in reason and text', () => {
    // A long DynamoDB message must not push the limit's name past the text cap.
    const refused = new StoreRefusedError('too-many-items', 'complete', `DynamoDB: ${'v'.repeat(5000)}`);
    const decision = decideFailure(refused, facts(1, 5));
    expect(decision).toMatchObject({
      kind: 'dead-letter',
      cause: { reason: 'store-too-many-items', errorClass: 'StoreRefusedError' },
    });
    if (decision.kind !== 'dead-letter') return;
    expect(decision.cause.errorMessage.startsWith('StoreRefusedError: too-many-items: complete:')).toBe(true);
  });

  it('dead-letters a permanent error on any attempt, naming an invalid payload as such', () => {
    expect(decideFailure(new PermanentJobError('no such account'), facts(1))).toMatchObject({
      kind: 'dead-letter',
      cause: { reason: 'permanent-error', errorClass: 'PermanentJobError' },
    });
    expect(
      decideFailure(new InvalidEnvelopeError('bad-payload', 'amount: expected number'), facts(1)),
    ).toMatchObject({
      kind: 'dead-letter',
      cause: { reason: 'invalid-bad-payload' },
    });
  });

  it('retries a transient failure with the backoff of its attempt until the last attempt, then dead-letters', () => {
    expect(decideFailure(new TransientJobError('busy'), facts(2))).toEqual({
      kind: 'retry',
      delaySeconds: 20,
      refundAttempt: false,
      conflict: false,
      deadline: false,
      outage: false,
    });
    expect(decideFailure(new Error('boom'), facts(3))).toMatchObject({
      kind: 'dead-letter',
      cause: { reason: 'max-attempts', errorClass: 'Error' },
    });
  });

  it('never counts a store outage against the job, not even on the last attempt', () => {
    expect(decideFailure(outage(), facts(3))).toEqual({
      kind: 'retry',
      delaySeconds: 30,
      refundAttempt: true,
      conflict: false,
      deadline: false,
      outage: true,
    });
  });

  it('retries a deadline abort at once (no backoff), counting the attempt', () => {
    expect(decideFailure(new DeadlineError('invocation deadline near'), facts(1))).toEqual({
      kind: 'retry',
      delaySeconds: 0,
      refundAttempt: false,
      conflict: false,
      deadline: true,
      outage: false,
    });
  });

  // Defect 4 (issue 18): a job that blocked its own event loop past its lease was refunded on every
  // run-out, so it retried forever with attempts 0. Only a renewal that was tried and failed is the store's.
  it('counts a run-out with no failed renewal (the job starved its own heartbeat), dead-lettering on the last attempt', () => {
    expect(decideFailure(ranOut(false), facts(1))).toEqual({
      kind: 'retry',
      delaySeconds: 10,
      refundAttempt: false,
      conflict: false,
      deadline: false,
      outage: false,
    });
    expect(decideFailure(ranOut(false), facts(3))).toMatchObject({
      kind: 'dead-letter',
      cause: { reason: 'max-attempts', errorClass: 'LeaseRanOutError' },
    });
  });

  it('refunds a run-out whose renewal was tried and failed (a store outage), even on the last attempt', () => {
    expect(decideFailure(ranOut(true), facts(3))).toEqual({
      kind: 'retry',
      delaySeconds: 30,
      refundAttempt: true,
      conflict: false,
      deadline: false,
      outage: true,
    });
  });

  it('stops refunding once the item used up its refunds: the attempt counts, and the last one dead-letters', () => {
    // maxRefunds is 2: refunds 1 still refunds, refunds 2 counts the attempt.
    expect(decideFailure(outage(), facts(2, 3, 1))).toMatchObject({ kind: 'retry', refundAttempt: true });
    expect(decideFailure(outage(), facts(2, 3, 2))).toEqual({
      kind: 'retry',
      delaySeconds: 20,
      refundAttempt: false,
      conflict: false,
      deadline: false,
      outage: true,
    });
    expect(decideFailure(outage(), facts(3, 3, 2))).toMatchObject({
      kind: 'dead-letter',
      cause: { reason: 'max-attempts', errorClass: 'StoreUnavailableError' },
    });
    expect(decideFailure(ranOut(true), facts(3, 3, 2))).toMatchObject({ kind: 'dead-letter' });
  });

  describe('an optimistic conflict (issue 31 item 9)', () => {
    const conflict = () => new OptimisticConflictError('completion', 3, undefined, 'versionedPut to table t');
    const withConflicts = (attempts: number, conflicts: number) => ({
      ...facts(attempts),
      conflicts,
      maxConflicts: 4,
      conflictBackoffSeconds: (n: number) => n * 100,
    });

    it('gives the attempt back and waits the conflict backoff, even on the last attempt', () => {
      expect(decideFailure(conflict(), withConflicts(3, 0))).toEqual({
        kind: 'retry',
        delaySeconds: 100,
        refundAttempt: false,
        conflict: true,
        deadline: false,
        outage: false,
      });
      // The backoff grows with the conflicts, not with the attempts.
      expect(decideFailure(conflict(), withConflicts(1, 3))).toMatchObject({
        kind: 'retry',
        delaySeconds: 400,
      });
    });

    it('counts the attempt when the message can take no more give-backs (FIFO, no re-send)', () => {
      expect(decideFailure(conflict(), { ...withConflicts(2, 1), conflictGiveBack: false })).toMatchObject({
        kind: 'retry',
        delaySeconds: 20,
        conflict: false,
      });
      expect(decideFailure(conflict(), { ...withConflicts(3, 1), conflictGiveBack: false })).toMatchObject({
        kind: 'dead-letter',
        cause: { reason: 'max-attempts' },
      });
    });

    it('dead-letters max-conflicts once the item used up its conflicts', () => {
      expect(decideFailure(conflict(), withConflicts(1, 4))).toMatchObject({
        kind: 'dead-letter',
        cause: { reason: 'max-conflicts', errorClass: 'OptimisticConflictError' },
      });
    });

    it('counts the attempt when the row has no version attribute (no other writer: it never clears)', () => {
      const unversioned = new OptimisticConflictError(
        'step credit',
        3,
        undefined,
        'versionedPut to table ledger: found an item without a version attribute',
        { rowUnversioned: true },
      );
      expect(decideFailure(unversioned, withConflicts(1, 0))).toMatchObject({
        kind: 'retry',
        delaySeconds: 10,
        refundAttempt: false,
        conflict: false,
      });
      expect(decideFailure(unversioned, withConflicts(3, 0))).toMatchObject({
        kind: 'dead-letter',
        cause: { reason: 'max-attempts', errorClass: 'OptimisticConflictError' },
      });
    });
  });
});
