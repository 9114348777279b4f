import {
  DeadlineError,
  describe,
  errorClass,
  InvalidEnvelopeError,
  LeaseLostError,
  LeaseRanOutError,
  StoreRefusedError,
  StoreUnavailableError,
} from '../../errors.ts';

import type { DeadLetterCause } from '../contract/job-store.ts';

export type { DeadLetterCause } from '../contract/job-store.ts';

/** What a worker does after an attempt ended without a commit (docs/protocol.md, "The state machine", edges E7-E9, and "Store outages"). */
export type FailureDecision =
  /** A commit had gone through and only its answer was lost: the job is done, delete the message. */
  | { readonly kind: 'completed-earlier' }
  /** Another worker holds the job now: write nothing more and leave the message alone. */
  | { readonly kind: 'lease-lost' }
  /** Permanent error or the last attempt failed: letter, DEAD item, delete the original. */
  | { readonly kind: 'dead-letter'; readonly cause: DeadLetterCause }
  /**
   * Release the lease with a backoff and give the message back. `refundAttempt`: the attempt is not the
   * job's failure (a store outage); `deadline`: the invocation ran out of time, retry at once.
   */
  | {
      readonly kind: 'retry';
      readonly delaySeconds: number;
      readonly refundAttempt: boolean;
      readonly deadline: boolean;
      readonly outage: boolean;
    };

export interface FailureFacts {
  /** This claim's attempt number (1 = first). */
  readonly attempts: number;
  readonly maxAttempts: number;
  /** Backoff before attempt `attempts + 1`, in whole seconds. */
  readonly backoffSeconds: (attempts: number) => number;
  /** The text the dead letter and DEAD item carry for the error. @default describe (capped, not redacted) */
  readonly errorText?: (error: unknown) => string;
}

/**
 * Decides what a failed attempt leads to, from the error alone and the attempt count. Pure. The order
 * matters: a lost lease first (the worker may no longer write anything), then errors that no retry can
 * fix, then outages (never counted against the job), then the attempt budget.
 */
export function decideFailure(error: unknown, facts: FailureFacts): FailureDecision {
  const text = facts.errorText ?? describe;
  if (error instanceof LeaseRanOutError) {
    // No one refused us: the store did not answer in time. A fenced release still applies if nobody
    // claimed the job meanwhile, and then the attempt is the store's, not the job's.
    return {
      kind: 'retry',
      delaySeconds: facts.backoffSeconds(facts.attempts),
      refundAttempt: true,
      deadline: false,
      outage: true,
    };
  }
  if (error instanceof LeaseLostError) {
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
  const outage = error instanceof StoreUnavailableError;
  if (!outage && facts.attempts >= facts.maxAttempts) {
    return {
      kind: 'dead-letter',
      cause: { reason: 'max-attempts', errorClass: errorClass(error), errorMessage: text(error) },
    };
  }
  const deadline = error instanceof DeadlineError;
  return {
    kind: 'retry',
    delaySeconds: deadline ? 0 : facts.backoffSeconds(facts.attempts),
    refundAttempt: outage,
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
