// E12, the fast path (docs/protocol.md, "Fast path"): run the job with no claim, then write its effects
// and the completion in one transaction under the claim's condition. The run and the commit get the
// time a lease would.
import { FastPathNeedsLeaseError, OptimisticConflictError, StoreUnavailableError } from '../../errors.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { Effect, FastCommitResult, JobLease } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { collides, needsLeasedClaim } from '../decisions/claim-decision.ts';
import { leaseSafetyMs } from '../decisions/lease-timing.ts';
import { boundedSignal } from '../leases/timeout-signal.ts';
import { conflictRow, describeConflict, rowUnversioned } from '../model/conflict.ts';
import { namedLeaseLost } from '../model/job-context.ts';
import type { AnyJobDefinition } from '../model/job-definition.ts';
import { MetricName } from '../observe/metric-names.ts';
import { inSpan } from '../observe/spans.ts';
import { noteStoreUnavailable } from '../observe/store-throttle.ts';
import { byType, cacheType, type Job } from './attempt.ts';
import { completedEarlier, completedItem, jobCompleted } from './commit.ts';
import { jobContext, runAndCommit } from './job-run.ts';
import type { RecordAction } from './outcome.ts';
import { mismatchOf } from './payload-mismatch.ts';
import { actOnRefusal } from './refusal.ts';
import type { Settings } from './settings.ts';

/**
 * How a fast attempt ended: the record is settled (`action`: committed, refused as a copy, the commit's
 * answer unknown, or the run outlasted its budget and M goes back to run leased); or the job must be
 * claimed now, to run leased (`leased`: it needs a lease, or has a checkpoint) or to record the failed
 * run's `error` under a lease (nothing was written either way).
 */
export type FastResult =
  | { readonly action: RecordAction }
  | { readonly error: unknown }
  | { readonly leased: true };

/** Runs `job` on the fast path, within one lease's time from `started`. */
export async function runFast(
  s: Settings,
  job: Job,
  definition: AnyJobDefinition,
  leaseMs: number,
  started: number,
): Promise<FastResult> {
  const { envelope, message, log } = job;
  s.metrics.count(MetricName.JobClaimed);
  const budget = leaseMs - leaseSafetyMs(leaseMs);
  const bound = boundedSignal(budget, 'the fast path has the time of one lease');
  let result: Settled;
  try {
    result = await runAndCommitOnce(s, job, definition, started + budget, bound.signal);
  } catch (thrown) {
    if (thrown instanceof StoreUnavailableError) return { action: await commitUnknown(s, job, thrown) };
    if (thrown instanceof FastPathNeedsLeaseError) {
      log.info('the job needs a lease: running it leased', { error: s.errorText(thrown) });
      return { leased: true };
    }
    // A conflict the tries did not resolve is the attempt's answer even if the budget ended while its
    // detail was read back: the same conflict without the read-back is recorded and counted too.
    if (bound.signal.aborted && !(thrown instanceof OptimisticConflictError)) {
      // Nothing was written and the job did not fail: its redelivery runs leased, with the heartbeat.
      s.metrics.count(MetricName.HandBack);
      log.info('the fast run outlasted one lease; giving the message back to run leased', {
        budgetMs: budget,
      });
      await message.giveBack(0, 'fast run past its budget');
      return { action: 'deadline' };
    }
    log.info('fast attempt failed; recording it under a lease', { error: s.errorText(thrown) });
    return { error: thrown };
  } finally {
    bound.clear();
  }
  if (result.ok) return { action: jobCompleted(s, job, started, log) };
  // Refused: claim it now rather than hand M back to come round again.
  const { existing } = result;
  if (
    !collides(existing, envelope.type) &&
    (needsLeasedClaim(existing, s.maxAttempts, s.now(), message.identity) ||
      mismatchOf(s, job, existing)?.kind === 'new-life')
  ) {
    // A new job of a finished key (onPayloadMismatch 'new-job') too: only the leased claim renews it.
    return { leased: true };
  }
  return { action: await actOnRefusal(s, job, existing) };
}

/**
 * The read before a fast run, made when enough recent messages were copies (copy-share.ts): a job item
 * found COMPLETED is refused as the commit would refuse it, without running the job (a copy then costs
 * 0.5 RRU instead of a run and a cancelled two-item transaction); any other item goes to the leased claim,
 * whose condition decides it; none, or a failed read, runs the job fast (the read only saves cost).
 * The read is eventually consistent: it may return an earlier version of the item, and only COMPLETED
 * and CANCELLED, which no edge leaves but TTL, are acted on, so a stale answer costs a run or a claim
 * the condition then refuses, never a skipped job. `copy` tells the worker's share of copies what the
 * read found.
 */
export async function readBeforeFast(
  s: Settings,
  job: Job,
  copy: (isCopy: boolean) => void,
): Promise<FastResult | undefined> {
  const bound = boundedSignal(Math.max(1000, leaseSafetyMs(s.leaseMs)), 'read before a fast run');
  let item: JobItem | undefined;
  try {
    item = await s.store.get(job.envelope.dedupKey, { signal: bound.signal, consistent: false });
  } catch (error) {
    job.log.info('the read before the fast run failed; running it fast', { error: s.errorText(error) });
    return undefined;
  } finally {
    bound.clear();
  }
  if (item === undefined) {
    copy(false);
    return undefined;
  }
  if (item.status === JobStatus.Cancelled) return { action: await actOnRefusal(s, job, item) };
  if (item.status !== JobStatus.Completed || mismatchOf(s, job, item)?.kind === 'new-life') {
    return { leased: true };
  }
  copy(true);
  return { action: await actOnRefusal(s, job, item) };
}

/** A fast commit's answer other than an effect conflict (those are thrown, with what conflicted). */
type Settled = Exclude<FastCommitResult, { reason: 'effect-conflict' }>;

/**
 * Runs the job and tries its one-write commit; an optimistic conflict re-runs it a few times.
 * @throws OptimisticConflictError when the re-runs did not resolve it
 */
async function runAndCommitOnce(
  s: Settings,
  job: Job,
  definition: AnyJobDefinition,
  until: number,
  signal: AbortSignal,
): Promise<Settled> {
  const { envelope, message, log } = job;
  // The lease the job sees: nothing is claimed, so nothing to fence a step or a named lease with.
  const lease: JobLease = {
    dedupKey: envelope.dedupKey,
    owner: s.worker,
    token: 0,
    attempts: 1,
    messageId: message.record.messageId,
    version: 0,
    leaseUntil: until,
  };
  const context = jobContext(s, definition, lease, signal, undefined, job.slots);
  let committed: readonly Effect[] = [];
  let effectCount = 0;
  const answer = await runAndCommit(
    s,
    { definition, payload: job.payload, context, signal, log, what: 'fast commit' },
    (outcome) => {
      const effects = outcome?.effects ?? [];
      effectCount = effects.length;
      // A concurrency slot lost during the run: its fence refuses the transaction, nothing applies.
      committed = effectCount > 0 ? [...effects, ...context.leaseFences()] : effects;
      return inSpan(
        'leaseq.commit',
        { 'leaseq.fast_path': true },
        () =>
          s.store.claimAndComplete(
            {
              dedupKey: envelope.dedupKey,
              owner: s.worker,
              messageId: message.record.messageId,
              ...(message.identity.life === undefined ? {} : { life: message.identity.life }),
              type: envelope.type,
              createdAt: envelope.createdAt,
              now: s.now(),
              maxAttempts: s.maxAttempts,
              ...(job.payloadHash === undefined ? {} : { payloadHash: job.payloadHash }),
            },
            outcome?.result,
            committed,
            { signal },
          ),
        { errorText: s.errorText },
      );
    },
    (refused) =>
      !refused.ok && refused.reason !== 'refused' && context.lostLeaseAt(refused, effectCount) === undefined,
    (refused) =>
      !refused.ok && refused.reason === 'effect-conflict'
        ? conflictRow(committed, refused.index, context.tables)
        : undefined,
  );
  if (answer.ok || answer.reason === 'refused') return answer;
  const lost = context.lostLeaseAt(answer, effectCount);
  if (lost) throw namedLeaseLost(lost, 'fast commit');
  // Optimistic conflicts the re-runs did not resolve: recorded under a lease like any failed fast run.
  const detail = await describeConflict(committed, answer, context.tables, signal);
  throw new OptimisticConflictError('completion', s.optimisticTries, undefined, detail, {
    rowUnversioned: rowUnversioned(detail),
  });
}

/**
 * A fast commit whose answer is unknown: the one settling read (commit.ts). A COMPLETED job is done,
 * whoever's write did it: this worker's own write completes the record, another copy's makes this one a
 * duplicate. Otherwise the message goes back with a backoff; nothing was claimed, so nothing to release.
 */
async function commitUnknown(s: Settings, job: Job, error: StoreUnavailableError): Promise<RecordAction> {
  const { envelope, message, log } = job;
  const item = await completedItem(s, envelope.dedupKey);
  // Refused, not lost: the key belongs to a job of another type.
  if (item && collides(item, envelope.type)) return actOnRefusal(s, job, item);
  // Completed by a message of another payload: not this one's copy.
  if (item && mismatchOf(s, job, item) !== undefined) return actOnRefusal(s, job, item);
  if (item) {
    if (item.owner === s.worker && item.messageId === message.record.messageId) {
      return completedEarlier(s, job, 'the fast commit went through though its answer was lost');
    }
    s.cache?.add(envelope.dedupKey, cacheType(job));
    log.info('the fast commit answer was lost; another copy completed the job: deleting this copy');
    s.metrics.count(MetricName.DuplicateSkipped, 1, byType(envelope));
    return 'duplicate';
  }
  const delay = s.backoffSeconds(message.receives);
  noteStoreUnavailable(s.metrics, log, error);
  s.metrics.count(MetricName.HandBack);
  log.warn('store unavailable at the fast commit; giving the message back', {
    delaySeconds: delay,
    error: s.errorText(error),
  });
  await message.giveBack(delay, 'store unavailable');
  return 'store-unavailable';
}
