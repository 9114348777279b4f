import { describe, errorClass } from '../../error-text.ts';
import {
  DeadlineError,
  InvalidEnvelopeError,
  JobCancelledError,
  LeaseLostError,
  LeaseRanOutError,
  OptimisticConflictError,
  StoreRefusedError,
  StoreUnavailableError,
} from '../../errors.ts';
import { DEFAULTS } from '../contract/defaults.ts';

import type { DeadLetterCause } from '../contract/job-store.ts';

export type { DeadLetterCause } from '../contract/job-store.ts';

/** What a worker does after an attempt ended without a commit (docs/protocol.md, "The state machine", edges E7-E9, and "Store outages"). */
export type FailureDecision =
  /** A commit had gone through and only its answer was lost: the job is done, delete the message. */
  | { readonly kind: 'completed-earlier' }
  /** Another worker holds the job now: write nothing more and leave the message alone. */
  | { readonly kind: 'lease-lost' }
  /** The job was cancelled: write nothing more, delete the message (no retry, no dead letter). */
  | { readonly kind: 'cancelled' }
  /** Permanent error or the last attempt failed: letter, DEAD item, delete the original. */
  | { readonly kind: 'dead-letter'; readonly cause: DeadLetterCause }
  /**
   * Release the lease with a backoff and give the message back. `refundAttempt`: the attempt is not the
   * job's failure (a store outage) and the item has refunds left; `conflict`: the attempt ended in an
   * optimistic conflict (someone else's write), so it is taken back and counted in the item's
   * `conflicts` instead, with the conflict backoff; `outage`: the cause was the store's (refunded or
   * not); `deadline`: the invocation ran out of time, retry at once.
   */
  | {
      readonly kind: 'retry';
      readonly delaySeconds: number;
      readonly refundAttempt: boolean;
      readonly conflict: boolean;
      readonly deadline: boolean;
      readonly outage: boolean;
    };

export interface FailureFacts {
  /** This claim's attempt number (1 = first). */
  readonly attempts: number;
  readonly maxAttempts: number;
  /** Attempts the item had refunded before this one (its `refunds`). @default 0 */
  readonly refunds?: number;
  /** Refunds an item may have: past them an outage's attempt counts, so no job retries forever. @default DEFAULTS.maxRefunds */
  readonly maxRefunds?: number;
  /** Backoff before attempt `attempts + 1`, in whole seconds. */
  readonly backoffSeconds: (attempts: number) => number;
  /** Conflicts the item had given back before this attempt (its `conflicts`). @default 0 */
  readonly conflicts?: number;
  /** Conflicts an item may give back: past them the job is dead-lettered `max-conflicts`. @default DEFAULTS.maxConflicts */
  readonly maxConflicts?: number;
  /** Backoff after conflict number `n` (1 = first), in whole seconds. @default backoffSeconds */
  readonly conflictBackoffSeconds?: (conflicts: number) => number;
  /**
   * False when the message can take no more give-backs that are not attempts (a FIFO message, which
   * cannot be re-sent, past the receives at which a bounce would re-send it): a conflict then counts as
   * an attempt, so the queue's own redrive is never reached. @default true
   */
  readonly conflictGiveBack?: boolean;
  /** The text the dead letter and DEAD item carry for the error. @default describe (capped, not redacted) */
  readonly errorText?: (error: unknown) => string;
}

/**
 * Decides what a failed attempt leads to, from the error and the item's attempt, refund and conflict
 * counts. Pure. The order matters: a lost lease first (the worker may no longer write anything), then
 * errors that no retry can fix, then optimistic conflicts (no attempt used: bounded by their own count),
 * then outages (refunded while the item has refunds left), then the attempt budget.
 */
export function decideFailure(error: unknown, facts: FailureFacts): FailureDecision {
  const text = facts.errorText ?? describe;
  if (error instanceof JobCancelledError) return { kind: 'cancelled' };
  if (error instanceof LeaseLostError && !(error instanceof LeaseRanOutError)) {
    return error.completedByThisLease ? { kind: 'completed-earlier' } : { kind: 'lease-lost' };
  }
  if (isPermanent(error)) {
    return {
      kind: 'dead-letter',
      cause: {
        reason: permanentReason(error),
        errorClass: errorClass(error),
        errorMessage: text(error),
      },
    };
  }
  // Someone else changed a row the job wrote: not the job's failure. It goes back with a delay and the
  // attempt is taken back, bounded apart so a job that never gets through still ends. A row without its
  // version attribute is nobody's write in the way: it never clears, so it counts like any failure.
  if (error instanceof OptimisticConflictError && !error.rowUnversioned && facts.conflictGiveBack !== false) {
    const conflicts = facts.conflicts ?? 0;
    if (conflicts >= (facts.maxConflicts ?? DEFAULTS.maxConflicts)) {
      return {
        kind: 'dead-letter',
        cause: { reason: 'max-conflicts', errorClass: errorClass(error), errorMessage: text(error) },
      };
    }
    return {
      kind: 'retry',
      delaySeconds: (facts.conflictBackoffSeconds ?? facts.backoffSeconds)(conflicts + 1),
      refundAttempt: false,
      conflict: true,
      deadline: false,
      outage: false,
    };
  }
  // A run-out is the store's only when a renewal was tried and failed: nobody refused us, and a fenced
  // release still applies if nobody claimed the job meanwhile. One with no renewal sent in time is the
  // job's own doing (it starved the event loop) and counts like any failure.
  const outage =
    error instanceof StoreUnavailableError || (error instanceof LeaseRanOutError && error.renewalFailed);
  const refund = outage && (facts.refunds ?? 0) < (facts.maxRefunds ?? DEFAULTS.maxRefunds);
  if (!refund && facts.attempts >= facts.maxAttempts) {
    return {
      kind: 'dead-letter',
      cause: { reason: 'max-attempts', errorClass: errorClass(error), errorMessage: text(error) },
    };
  }
  const deadline = error instanceof DeadlineError;
  return {
    kind: 'retry',
    delaySeconds: deadline ? 0 : facts.backoffSeconds(facts.attempts),
    refundAttempt: refund,
    conflict: false,
    deadline,
    outage,
  };
}

/** A permanent error's reason: the envelope's or the store's problem when it names one. */
function permanentReason(error: Error): string {
  if (error instanceof InvalidEnvelopeError) return `invalid-${error.problem}`;
  if (error instanceof StoreRefusedError) return `store-${error.problem}`;
  return 'permanent-error';
}

function isPermanent(error: unknown): error is Error {
  return error instanceof Error && 'retryable' in error && error.retryable === false;
}
