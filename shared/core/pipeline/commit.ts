// E6, the commit: the job's effects and its COMPLETED item in one fenced write. When a commit's answer
// is lost (an outage, abandoned at its bound, or an SDK retry that met the first send still in flight:
// TransactionInProgressException, store-errors.ts), one bounded read settles it; both the leased commit
// and the fast path's one-write commit (E12) settle through it. Also the bookkeeping of a completion.
import { StoreUnavailableError } from '../../errors.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { Effect, FencedWriteResult, JobLease } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { leaseSafetyMs } from '../decisions/lease-timing.ts';
import { boundedSignal } from '../leases/timeout-signal.ts';
import type { JobLog } from '../observe/job-log.ts';
import { MetricName } from '../observe/metric-names.ts';
import { inSpan } from '../observe/spans.ts';
import { byType, byTypeAndWorker, cacheType, type Job } from './attempt.ts';
import type { Settings } from './settings.ts';

/**
 * The leased commit (E6), bounded by the lease (not by the deadline: a fenced commit in flight may
 * finish). An unknown answer that the read shows COMPLETED under this very lease is done.
 * @throws StoreUnavailableError when the answer stays unknown.
 */
export async function commit(
  s: Settings,
  lease: JobLease,
  result: unknown,
  effects: readonly Effect[],
  signal: AbortSignal,
  log: JobLog,
): Promise<FencedWriteResult> {
  try {
    return await inSpan(
      'leaseq.commit',
      { 'leaseq.attempt': lease.attempts, 'leaseq.token': lease.token },
      () => s.store.complete(lease, result, effects, { signal }),
      { errorText: s.errorText },
    );
  } catch (error) {
    if (!(error instanceof StoreUnavailableError)) throw error;
    const item = await completedItem(s, lease.dedupKey);
    if (item && item.token === lease.token && item.owner === lease.owner) {
      log.info('the commit went through though its answer was lost');
      return { ok: true };
    }
    // Still unknown: the failure keeps the message, and the release (or the next claim) tells.
    throw error;
  }
}

/**
 * The one read that settles a commit whose answer was lost: the job item if it is COMPLETED, else
 * undefined (not completed, or the read failed too: still unknown). Bounded by the lease's safety margin.
 */
export async function completedItem(s: Settings, dedupKey: string): Promise<JobItem | undefined> {
  const bound = boundedSignal(Math.max(1000, leaseSafetyMs(s.leaseMs)), 'commit check');
  try {
    const item = await s.store.get(dedupKey, { signal: bound.signal });
    return item?.status === JobStatus.Completed ? item : undefined;
  } catch {
    return undefined;
  } finally {
    bound.clear();
  }
}

/** A job this worker committed: the cache, the success metrics and the log line. */
export function jobCompleted(
  s: Settings,
  job: Pick<Job, 'envelope' | 'payloadHash'>,
  started: number,
  log: JobLog,
): 'completed' {
  const { envelope } = job;
  s.cache?.add(envelope.dedupKey, cacheType(job));
  const at = s.now();
  const duration = at - started;
  const jobType = byType(envelope);
  s.metrics.count(MetricName.JobSucceeded, 1, jobType);
  // `worker` is for local pools (InMemoryMetrics); the EMF sink drops it (unbounded in Lambda).
  s.metrics.count(MetricName.JobsPerWorker, 1, byTypeAndWorker(envelope, s.worker));
  s.metrics.observe(MetricName.JobDuration, duration, jobType);
  s.metrics.observe(MetricName.QueueLag, at - Date.parse(envelope.createdAt), jobType);
  log.info('job completed', { durationMs: duration });
  return 'completed';
}

/** A refused write, or a read, showed the job COMPLETED by this worker: an earlier commit's answer was lost. */
export function completedEarlier(s: Settings, job: Job, line: string): 'completed' {
  job.log.info(line);
  s.cache?.add(job.envelope.dedupKey, cacheType(job));
  s.metrics.count(MetricName.JobSucceeded, 1, byType(job.envelope));
  return 'completed';
}
