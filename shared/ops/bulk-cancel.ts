/**
 * Cancel by filter (docs/cli.md, "leaseq cancel"): a preview that finds the jobs, then an action on exactly
 * the jobs the preview found, paced, one conditional cancel each (cancel.ts), with a report of what changed
 * and what was refused and why.
 *
 * Which jobs it can find: reads are bounded, so the jobs come from the jobs table's sparse `problems` index
 * (problem-jobs.ts), never from a scan. Every RETRY_WAIT job is there (a release writes a `failed` event, a
 * redrive's reset a `redrive` one, both set the index keys), and so is an IN_PROGRESS job that had a
 * problem before (a retry, a takeover, a redrive). A first attempt running now, and a job whose message has
 * not been claimed yet, had no problem: the index does not hold them, and `leaseq cancel <dedupKey>`
 * cancels them one by one.
 */
import { DynamoDbJobStore } from '../core/adapters/dynamodb-job-store.ts';
import type { CancelResult } from '../core/contract/job-store.ts';
import { JobStatus } from '../core/contract/statuses.ts';
import { Pacer } from '../producer/pacer.ts';
import { cancelJob } from './cancel.ts';
import { messageOf, OpsError } from './ops-errors.ts';
import {
  listProblemJobs,
  PROBLEM_JOBS_MAX_LIMIT,
  type ProblemJobView,
  type ProblemStatusFilter,
} from './problem-jobs.ts';
import type { OpsTarget } from './target.ts';

/** Jobs per second a bulk action runs at unless told. @default 10 */
export const BULK_DEFAULT_RATE = 10;
/** Most jobs one bulk action takes. @default 1000 */
export const BULK_DEFAULT_LIMIT = 1000;
/** The largest `limit` a bulk action accepts. */
export const BULK_MAX_LIMIT = 10_000;
/** The statuses a cancel can change: a finished job stays as it is. */
export const CANCELLABLE_STATUSES: readonly ProblemStatusFilter[] = [
  JobStatus.InProgress,
  JobStatus.RetryWait,
  'stuck',
];

export interface BulkCancelFilter {
  /** The job type, exactly. */
  readonly type?: string;
  /** Case-insensitive substring of the job's last error (`class: message`). */
  readonly errorContains?: string;
  /** Only jobs whose last problem is at or after this (epoch ms). */
  readonly since?: number;
  /** IN_PROGRESS, RETRY_WAIT or `stuck`. @default IN_PROGRESS and RETRY_WAIT */
  readonly status?: readonly ProblemStatusFilter[];
}

/** What a bulk cancel would act on: the jobs found, in the order they are acted on (newest problem first). */
export interface BulkCancelPreview {
  readonly filter: BulkCancelFilter;
  readonly jobs: readonly ProblemJobView[];
  /** More jobs matched than `limit`: the action takes the first `limit` only. */
  readonly more: boolean;
  readonly limit: number;
  /** What finding them read: index entries, read units, queries. */
  readonly reads: { readonly itemsRead: number; readonly readUnits: number; readonly queries: number };
}

/**
 * Finds the jobs a bulk cancel acts on, from the `problems` index only (pages of it, until `limit` jobs
 * or its end). Changes nothing.
 * @throws OpsError for a filter that names no job a cancel can change, or an index that is missing
 */
export async function previewBulkCancel(
  target: OpsTarget,
  filter: BulkCancelFilter,
  options: { readonly limit?: number; readonly now?: number } = {},
): Promise<BulkCancelPreview> {
  checkBulkFilter(filter);
  const limit = options.limit ?? BULK_DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > BULK_MAX_LIMIT) {
    throw new OpsError(`limit must be a whole number from 1 to ${BULK_MAX_LIMIT}, received ${limit}`);
  }
  const now = options.now ?? Date.now();
  const jobs: ProblemJobView[] = [];
  const reads = { itemsRead: 0, readUnits: 0, queries: 0 };
  let cursor: string | undefined;
  let more = false;
  do {
    const page = await listProblemJobs(
      target,
      {
        status: filter.status?.length ? filter.status : [JobStatus.InProgress, JobStatus.RetryWait],
        ...(filter.type === undefined ? {} : { type: filter.type }),
        ...(filter.errorContains === undefined ? {} : { errorContains: filter.errorContains }),
        ...(filter.since === undefined ? {} : { since: filter.since }),
        limit: Math.min(PROBLEM_JOBS_MAX_LIMIT, limit - jobs.length + 1),
        ...(cursor === undefined ? {} : { cursor }),
      },
      now,
    );
    reads.itemsRead += page.itemsRead;
    reads.readUnits += page.readUnits;
    reads.queries += page.queries;
    for (const job of page.jobs) {
      if (jobs.length < limit) jobs.push(job);
      else more = true;
    }
    cursor = page.next;
  } while (cursor !== undefined && !more);
  return { filter, jobs, more: more || (cursor !== undefined && jobs.length >= limit), limit, reads };
}

/** A filter that can match only what the operator means: at least one of type, error text or time. */
export function checkBulkFilter(filter: BulkCancelFilter): void {
  if (filter.type === undefined && filter.errorContains === undefined && filter.since === undefined) {
    throw new OpsError(
      'a bulk cancel needs a filter: --type, --error-match or --since (or a dedup key for one job)',
    );
  }
  if (filter.errorContains !== undefined && filter.errorContains.trim() === '') {
    throw new OpsError('--error-match is empty: give the text the last error contains');
  }
  for (const s of filter.status ?? []) {
    if (!CANCELLABLE_STATUSES.includes(s)) {
      throw new OpsError(
        `a cancel changes only unfinished jobs: status ${s} is not one of ${CANCELLABLE_STATUSES.join(', ')}`,
      );
    }
  }
}

/** What the action did with one previewed job. */
export interface BulkCancelItem {
  readonly dedupKey: string;
  readonly type?: string;
  /**
   * `cancelled`: this action cancelled it. `refused`: it was left as it is, `why` says (finished since the
   * preview, already cancelled, another job under the key now). `failed`: the store did not answer.
   */
  readonly outcome: 'cancelled' | 'refused' | 'failed';
  /** The status the job had when acted on (the cancel's answer). */
  readonly status?: string;
  readonly why?: string;
}

export interface BulkCancelReport {
  readonly cancelled: number;
  readonly refused: number;
  readonly failed: number;
  /** Previewed jobs not reached: the action was interrupted (Ctrl-C, a closed page) before them. */
  readonly notReached: number;
  readonly interrupted: boolean;
  readonly items: readonly BulkCancelItem[];
}

export interface BulkCancelOptions {
  /** Who acts: the `cancelled` event's `by`. */
  readonly by: string;
  /** Why, kept in each job's `cancelled` event. */
  readonly reason?: string;
  /** Jobs per second at most. @default BULK_DEFAULT_RATE */
  readonly ratePerSecond?: number;
  /** Stops the action between two jobs; the report says what was done and what was not reached. */
  readonly signal?: AbortSignal;
  /** Called after each job. */
  readonly onProgress?: (item: BulkCancelItem, done: number, total: number) => void;
  /** @default Date.now */
  readonly now?: () => number;
}

/**
 * Cancels the jobs `preview` found, one conditional write each, at most `ratePerSecond` a second. Each job
 * is read first (one consistent read): one that finished since the preview, or whose key now holds another
 * job (another `createdAt`), is refused without a write; the cancel's own condition refuses one that
 * finishes between that read and the write. A running job stops at its next heartbeat (docs/jobs.md,
 * "Cancelling a job"). Never throws for one job: its failure is recorded and the rest go on.
 */
export async function bulkCancel(
  target: OpsTarget,
  preview: Pick<BulkCancelPreview, 'jobs'>,
  options: BulkCancelOptions,
): Promise<BulkCancelReport> {
  const rate = options.ratePerSecond ?? BULK_DEFAULT_RATE;
  const pacer = new Pacer({ perSecond: rate });
  const store = new DynamoDbJobStore({ client: target.clients.doc, tableName: target.names.jobsTable });
  const now = options.now ?? Date.now;
  const items: BulkCancelItem[] = [];
  const total = preview.jobs.length;
  for (const job of preview.jobs) {
    if (options.signal?.aborted) break;
    await pacer.take(1);
    if (options.signal?.aborted) break;
    const item = await cancelOne(target, store, job, options, now);
    items.push(item);
    options.onProgress?.(item, items.length, total);
  }
  const count = (o: BulkCancelItem['outcome']) => items.filter((i) => i.outcome === o).length;
  return {
    cancelled: count('cancelled'),
    refused: count('refused'),
    failed: count('failed'),
    notReached: total - items.length,
    interrupted: items.length < total,
    items,
  };
}

async function cancelOne(
  target: OpsTarget,
  store: DynamoDbJobStore,
  job: ProblemJobView,
  options: BulkCancelOptions,
  now: () => number,
): Promise<BulkCancelItem> {
  const named = { dedupKey: job.dedupKey, ...(job.type === undefined ? {} : { type: job.type }) };
  try {
    const item = await store.get(job.dedupKey);
    if (item === undefined) {
      // Gone since the preview (TTL): a cancel now would leave a tombstone for a job nobody previewed.
      return { ...named, outcome: 'refused', why: 'no job item any more (expired since the preview)' };
    }
    if (job.createdAt !== undefined && item.createdAt !== undefined && item.createdAt !== job.createdAt) {
      return {
        ...named,
        outcome: 'refused',
        status: item.status,
        why: `another job holds the key now (created ${item.createdAt}, the preview's ${job.createdAt})`,
      };
    }
    const result = await cancelJob(target, job.dedupKey, {
      by: options.by,
      now: now(),
      ...(options.reason === undefined ? {} : { reason: options.reason }),
    });
    return { ...named, ...outcomeOf(result) };
  } catch (error) {
    return { ...named, outcome: 'failed', why: messageOf(error) };
  }
}

function outcomeOf(result: CancelResult): Pick<BulkCancelItem, 'outcome' | 'status' | 'why'> {
  switch (result.outcome) {
    case 'cancelled':
      return {
        outcome: 'cancelled',
        status: result.status,
        why: result.wasRunning ? 'it was running: it stops at its next heartbeat' : 'its retry will not run',
      };
    case 'finished':
      return {
        outcome: 'refused',
        status: result.status,
        why: `finished since the preview (${result.status})`,
      };
    case 'already-cancelled':
      return { outcome: 'refused', status: result.status, why: 'already cancelled' };
    case 'tombstone':
      // Only when the item went between the read and the write.
      return { outcome: 'cancelled', why: 'the item expired meanwhile: a tombstone drops its message' };
  }
}

/** One line of what a bulk cancel did, for the CLI and the UI. */
export function describeBulkCancel(report: BulkCancelReport): string {
  const reasons = new Map<string, number>();
  for (const i of report.items) {
    if (i.outcome !== 'refused') continue;
    const key = i.why?.startsWith('finished since') ? `finished (${i.status})` : (i.why ?? 'refused');
    reasons.set(key, (reasons.get(key) ?? 0) + 1);
  }
  const why = reasons.size ? ` (${[...reasons].map(([k, n]) => `${n} ${k}`).join(', ')})` : '';
  const stopped = report.interrupted
    ? `; interrupted: ${report.notReached} previewed job${report.notReached === 1 ? '' : 's'} not reached, left as they were`
    : '';
  return `cancelled ${report.cancelled}, refused ${report.refused}${why}, failed ${report.failed}${stopped}`;
}
