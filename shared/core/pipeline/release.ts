// What a failed attempt leads to (decisions/failure-decision.ts), carried out: done after all, leave the
// job to the owner that took it, dead-letter it (E9, dead-letterer.ts), or release the lease with a
// backoff (E7; E8 refunds the attempt when the cause was outside the job) and give the message back.
import { trace } from '@opentelemetry/api';
import { errorClass } from '../../error-text.ts';
import { JobCancelledError, LeaseLostError, LeaseRanOutError } from '../../errors.ts';
import { JobStatus } from '../contract/statuses.ts';
import { decideFailure, type FailureDecision } from '../decisions/failure-decision.ts';
import { boundedSignal } from '../leases/timeout-signal.ts';
import { MetricName } from '../observe/metric-names.ts';
import { noteStoreUnavailable } from '../observe/store-throttle.ts';
import { type Attempt, byType } from './attempt.ts';
import { stopCancelled } from './cancelled.ts';
import { completedEarlier } from './commit.ts';
import type { DeadLetterer } from './dead-letterer.ts';
import { noteLeaseLost } from './history.ts';
import { resendAtReceives } from './limit-bounce.ts';
import type { RecordAction } from './outcome.ts';
import type { Settings } from './settings.ts';

const COMMITTED_EARLIER = 'the commit had gone through (its answer was lost): the job is done';

/** Decides what the attempt's failure `error` leads to, and carries it out. */
export async function settleFailure(
  s: Settings,
  attempt: Attempt,
  error: unknown,
  deadLetterer: DeadLetterer,
): Promise<RecordAction> {
  const decision = decideFailure(error, {
    attempts: attempt.lease.attempts,
    maxAttempts: s.maxAttempts,
    refunds: attempt.lease.refunds ?? 0,
    maxRefunds: s.maxRefunds,
    conflicts: attempt.lease.conflicts ?? 0,
    maxConflicts: s.maxConflicts,
    backoffSeconds: s.backoffSeconds,
    conflictBackoffSeconds: s.conflictBackoffSeconds,
    // A FIFO re-send goes to its group's tail (limit-bounce.ts), which a conflict does not take: it keeps
    // its place, and past the standard queue's re-send point (below a smaller redrive count the worker is
    // told) its conflicts count as attempts.
    conflictGiveBack:
      attempt.message.record.attributes.SequenceNumber === undefined ||
      attempt.message.receives < resendAtReceives(false, s.maxReceiveCount),
    errorText: s.errorText,
  });
  switch (decision.kind) {
    case 'completed-earlier':
      return completedEarlier(s, attempt, COMMITTED_EARLIER);
    case 'cancelled':
      return stopCancelled(attempt, s.metrics, s.errorText(error));
    case 'lease-lost':
      // Another worker owns the job now (or will, once the lease ends). Our receipt handle may be
      // stale, so we neither delete nor touch the message; our writes were refused by the fence.
      s.metrics.count(MetricName.LeaseLost);
      attempt.log.warn('lease lost; leaving the job to its new owner', { error: s.errorText(error) });
      await noteLeaseLost(s.store, attempt.lease, s.errorText(error), s.now(), attempt.log);
      return 'lease-lost';
    case 'dead-letter':
      return (await deadLetterer.claimed(attempt, decision.cause)).action;
    case 'retry':
      return release(s, attempt, error, decision);
  }
}

/** Releases the lease with the decision's backoff (E7/E8) and gives the message back for that long. */
async function release(
  s: Settings,
  attempt: Attempt,
  error: unknown,
  decision: Extract<FailureDecision, { kind: 'retry' }>,
): Promise<RecordAction> {
  const { message, log, lease } = attempt;
  if (decision.conflict) {
    log.info('optimistic conflict outlasted its tries; giving the job back without using an attempt', {
      error: s.errorText(error),
      delaySeconds: decision.delaySeconds,
      conflicts: (lease.conflicts ?? 0) + 1,
      maxConflicts: s.maxConflicts,
    });
  } else {
    log.warn('attempt failed; releasing the lease and retrying after a backoff', {
      reason: errorClass(error),
      error: s.errorText(error),
      delaySeconds: decision.delaySeconds,
      checkpoint: lease.checkpoint?.step,
      attemptsLeft: s.maxAttempts - lease.attempts + (decision.refundAttempt ? 1 : 0),
      refunded: decision.refundAttempt,
    });
  }
  const bound = boundedSignal(Math.max(s.leaseMs, lease.leaseUntil - s.now()), 'release');
  try {
    await releaseWithRefund(s, attempt, error, decision, bound.signal);
  } catch (releaseError) {
    if (releaseError instanceof LeaseLostError && releaseError.completedByThisLease) {
      return completedEarlier(s, attempt, COMMITTED_EARLIER);
    }
    // Cancelled while the attempt failed: the retry must not come.
    if (releaseError instanceof JobCancelledError) {
      return stopCancelled(attempt, s.metrics, s.errorText(releaseError));
    }
    if (releaseError instanceof LeaseLostError) {
      s.metrics.count(MetricName.LeaseLost);
      log.warn('lease lost while releasing; leaving the job to its new owner', {
        error: s.errorText(releaseError),
      });
      await noteLeaseLost(s.store, lease, s.errorText(releaseError), s.now(), log);
      return 'lease-lost';
    }
    // The lease will simply expire; the message comes back after the backoff and takes it over.
    log.warn('could not release the lease; it will expire instead', { error: s.errorText(releaseError) });
  } finally {
    bound.clear();
  }
  // Counted once the attempt was released (or left to expire): not for a job found completed or lost.
  if (decision.outage) noteStoreUnavailable(s.metrics, log, error);
  s.metrics.count(
    decision.conflict ? MetricName.ConflictRetries : MetricName.JobRetried,
    1,
    byType(attempt.envelope),
  );
  trace.getActiveSpan()?.addEvent('leaseq.retry', {
    'leaseq.retry.delay_seconds': decision.delaySeconds,
    'error.type': errorClass(error),
    ...(decision.conflict ? { 'leaseq.retry.conflict': true } : {}),
  });
  // A conflict's give-back is a receive that is no attempt, as a limit's bounce is: from the same
  // receive count on it (below a smaller redrive count the worker is told) it re-sends the message, so
  // the queue's redrive never counts a hot row's waits.
  const resent =
    decision.conflict &&
    message.receives >= resendAtReceives(false, s.maxReceiveCount) &&
    (await message.resend(decision.delaySeconds));
  if (!resent) await message.giveBack(decision.delaySeconds, errorClass(error));
  if (error instanceof LeaseRanOutError) return 'lease-ran-out';
  return decision.deadline ? 'deadline' : 'retry';
}

/** Pause before a refund release is tried again: the SDK has already retried, so give the store a moment. */
const REFUND_RETRY_PAUSE_MS = 200;

/**
 * The fenced release. A refund (an outage's or a conflict's) that fails is tried again until `signal`
 * (its bound) ends: left to expire, the lease would be taken over with an attempt counted, and on the
 * last attempt that dead-letters a job for the store's outage or someone else's write ("Exhausted
 * takeover"). A release without a refund loses nothing by expiring, so it is tried once.
 */
async function releaseWithRefund(
  s: Settings,
  attempt: Attempt,
  error: unknown,
  decision: Extract<FailureDecision, { kind: 'retry' }>,
  signal: AbortSignal,
): Promise<void> {
  let failedBefore = false;
  for (;;) {
    try {
      await s.store.release(
        attempt.lease,
        s.now() + decision.delaySeconds * 1000,
        { message: s.errorText(error), errorClass: errorClass(error) },
        {
          refundAttempt: decision.refundAttempt,
          conflict: decision.conflict,
          signal,
          // A run-out ends the attempt: the release tells it in the history, in the same write.
          ...(error instanceof LeaseRanOutError ? { leaseLost: s.errorText(error) } : {}),
        },
      );
      return;
    } catch (releaseError) {
      // A try after a failed one is a fresh write: if the failed one had landed (only its answer was
      // lost), the owner is gone and the fence refuses this one. The item tells: our release, not a
      // lost lease, and the message goes back with its backoff.
      if (
        failedBefore &&
        releaseError instanceof LeaseLostError &&
        (await releasedByUs(s, attempt, decision.conflict ? 'conflicts' : 'refunds', signal))
      ) {
        return;
      }
      const refunds = decision.refundAttempt || decision.conflict;
      if (!refunds || releaseError instanceof LeaseLostError || signal.aborted) {
        throw releaseError;
      }
      failedBefore = true;
      attempt.log.warn('could not release the lease with its refund; trying again', {
        error: s.errorText(releaseError),
      });
      if (!(await pause(REFUND_RETRY_PAUSE_MS, signal))) throw releaseError;
    }
  }
}

/**
 * Whether the item is this lease's refund release: RETRY_WAIT one version on, same token (no claim since),
 * with the attempt counted back and the refund (or the conflict) counted (a redrive, the only other
 * writer that keeps the token, removes both counts). Unknown (the read failed) counts as no.
 */
async function releasedByUs(
  s: Settings,
  attempt: Attempt,
  counter: 'refunds' | 'conflicts',
  signal: AbortSignal,
): Promise<boolean> {
  const { lease } = attempt;
  try {
    const item = await s.store.get(lease.dedupKey, { signal });
    return (
      item !== undefined &&
      item.status === JobStatus.RetryWait &&
      item.token === lease.token &&
      item.version === lease.version + 1 &&
      item.attempts === lease.attempts - 1 &&
      (item[counter] ?? 0) === (lease[counter] ?? 0) + 1
    );
  } catch {
    return false;
  }
}

/** Waits `ms`; false when `signal` aborted first. */
function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((done) => {
    if (signal.aborted) return done(false);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', stop);
      done(true);
    }, ms);
    const stop = () => {
      clearTimeout(timer);
      done(false);
    };
    signal.addEventListener('abort', stop, { once: true });
  });
}
