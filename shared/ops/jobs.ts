import type { JobSummaryItem } from '../core/adapters/dynamodb-scans.ts';
import type { LeaseItem } from '../core/contract/lease-store.ts';
import { JobStatus } from '../core/contract/statuses.ts';
import { leaseOver } from '../core/decisions/lease-arithmetic.ts';

/**
 * A live job lease counts as stuck when neither its claim nor its last checkpoint happened within this
 * long: the heartbeat keeps it alive but the job makes no visible progress (a hung handler).
 * @default 600000 (10 minutes; a Lambda invocation cannot run longer than 15)
 */
export const DEFAULT_STUCK_AFTER_MS = 10 * 60_000;

// The overview's projection of a job item is the scan's (the adapter's) shape; the views below read it.
export type { JobSummaryItem };

/** Why an unfinished job counts as stuck. */
export type StuckReason =
  /** The lease ended and nobody renewed it: the worker died or lost it. The message's next receive takes it over. */
  | 'lease-expired'
  /** The lease is renewed, but neither a claim nor a checkpoint happened for `stuckAfterMs`. */
  | 'no-progress'
  /**
   * RETRY_WAIT, and its retry (or its redrive) has been due for more than `stuckAfterMs`: no message came
   * back to run it (moved by the queue's own redrive, purged, or no worker is polling).
   */
  | 'retry-overdue';

/** One job lease (an IN_PROGRESS item, or a RETRY_WAIT item that is stuck) as the operator sees it. */
export interface JobLeaseView {
  readonly dedupKey: string;
  readonly type?: string;
  readonly owner?: string;
  readonly token: number;
  readonly attempts: number;
  readonly leaseUntil: number;
  /** `leaseUntil - now`: negative when the lease expired that long ago. */
  readonly remainingMs: number;
  readonly checkpointStep?: string;
  /** The later of the claim and the last checkpoint (epoch ms). */
  readonly lastProgressAt?: number;
  readonly stuck?: StuckReason;
}

/** One item of the `leases` table as the operator sees it. */
export interface NamedLeaseView {
  readonly leaseKey: string;
  readonly owner?: string;
  readonly token: number;
  readonly leaseUntil: number;
  readonly remainingMs: number;
  readonly acquiredAt?: number;
  /**
   * `held`: an owner and a lease in the future. `abandoned`: an owner whose lease ended without a
   * release (the holder died; the next acquire takes over). `free`: released.
   */
  readonly state: 'held' | 'abandoned' | 'free';
}

/**
 * The stuck rule for a job item, or undefined when it is not stuck. IN_PROGRESS: expired lease
 * (`leaseUntil < now`, as the stores decide it), or a live lease with no claim or checkpoint for
 * `stuckAfterMs`. RETRY_WAIT: the retry was due (`leaseUntil`, or the redrive's `updatedAt` when later)
 * more than `stuckAfterMs` ago.
 */
export function stuckReason(
  item: JobSummaryItem,
  now: number,
  stuckAfterMs = DEFAULT_STUCK_AFTER_MS,
): StuckReason | undefined {
  if (item.status === JobStatus.RetryWait) {
    const due = Math.max(item.leaseUntil, item.updatedAt ?? 0);
    return now - due > stuckAfterMs ? 'retry-overdue' : undefined;
  }
  if (item.status !== JobStatus.InProgress) return undefined;
  if (leaseOver(item.leaseUntil, now)) return 'lease-expired';
  const progress = lastProgressAt(item);
  if (progress !== undefined && now - progress > stuckAfterMs) return 'no-progress';
  return undefined;
}

function lastProgressAt(item: JobSummaryItem): number | undefined {
  const times = [item.claimedAt, item.checkpoint?.at].filter((t): t is number => typeof t === 'number');
  return times.length > 0 ? Math.max(...times) : undefined;
}

/** The operator's view of an IN_PROGRESS (or stuck RETRY_WAIT) item. */
export function jobLeaseView(
  item: JobSummaryItem,
  now: number,
  stuckAfterMs = DEFAULT_STUCK_AFTER_MS,
): JobLeaseView {
  const stuck = stuckReason(item, now, stuckAfterMs);
  const progress = lastProgressAt(item);
  return {
    dedupKey: item.dedupKey,
    ...(item.type ? { type: item.type } : {}),
    ...(item.owner ? { owner: item.owner } : {}),
    token: item.token,
    attempts: item.attempts,
    leaseUntil: item.leaseUntil,
    remainingMs: item.leaseUntil - now,
    ...(item.checkpoint?.step ? { checkpointStep: item.checkpoint.step } : {}),
    ...(progress === undefined ? {} : { lastProgressAt: progress }),
    ...(stuck ? { stuck } : {}),
  };
}

/** The operator's view of a `leases` item. */
export function namedLeaseView(item: LeaseItem, now: number): NamedLeaseView {
  // The lease store's acquire takes a lease over only when `leaseUntil < now`: held until then.
  const state = !item.owner ? 'free' : leaseOver(item.leaseUntil, now) ? 'abandoned' : 'held';
  return {
    leaseKey: item.leaseKey,
    ...(item.owner ? { owner: item.owner } : {}),
    token: item.token,
    leaseUntil: item.leaseUntil,
    remainingMs: item.leaseUntil - now,
    ...(item.acquiredAt === undefined ? {} : { acquiredAt: item.acquiredAt }),
    state,
  };
}

/** Counts over the job items, for `leaseq status`. */
export interface JobsSummary {
  readonly total: number;
  readonly byStatus: Readonly<Record<JobStatus, number>>;
  /** IN_PROGRESS items that are not stuck. */
  readonly live: number;
  readonly stuck: number;
  readonly stuckByReason: Readonly<Record<StuckReason, number>>;
  /** COMPLETED items per last owner (the completing worker keeps `owner`), most first. */
  readonly completedByWorker: readonly { readonly worker: string; readonly completed: number }[];
  /** Age of the oldest IN_PROGRESS or RETRY_WAIT job (from its envelope's createdAt), or null. */
  readonly oldestUnfinishedAgeMs: number | null;
}

/** Pure: folds job items into the counts `leaseq status` shows. */
export function summariseJobs(
  items: Iterable<JobSummaryItem>,
  now: number,
  stuckAfterMs = DEFAULT_STUCK_AFTER_MS,
): JobsSummary {
  const byStatus: Record<JobStatus, number> = {
    [JobStatus.InProgress]: 0,
    [JobStatus.RetryWait]: 0,
    [JobStatus.Completed]: 0,
    [JobStatus.Dead]: 0,
    [JobStatus.Cancelled]: 0,
  };
  const stuckByReason: Record<StuckReason, number> = {
    'lease-expired': 0,
    'no-progress': 0,
    'retry-overdue': 0,
  };
  const workers = new Map<string, number>();
  let total = 0;
  let live = 0;
  let oldest: number | undefined;
  for (const item of items) {
    total += 1;
    if (item.status in byStatus) byStatus[item.status] += 1;
    if (item.status === JobStatus.InProgress || item.status === JobStatus.RetryWait) {
      const stuck = stuckReason(item, now, stuckAfterMs);
      if (stuck) stuckByReason[stuck] += 1;
      else if (item.status === JobStatus.InProgress) live += 1;
    }
    if (item.status === JobStatus.Completed && item.owner) {
      workers.set(item.owner, (workers.get(item.owner) ?? 0) + 1);
    }
    if (item.status === JobStatus.InProgress || item.status === JobStatus.RetryWait) {
      const created = item.createdAt ? Date.parse(item.createdAt) : Number.NaN;
      if (Number.isFinite(created) && (oldest === undefined || created < oldest)) oldest = created;
    }
  }
  return {
    total,
    byStatus,
    live,
    stuck: stuckByReason['lease-expired'] + stuckByReason['no-progress'] + stuckByReason['retry-overdue'],
    stuckByReason,
    completedByWorker: [...workers]
      .map(([worker, completed]) => ({ worker, completed }))
      .sort((a, b) => b.completed - a.completed || a.worker.localeCompare(b.worker)),
    oldestUnfinishedAgeMs: oldest === undefined ? null : Math.max(0, now - oldest),
  };
}

/** Drains an async iterable (a scan) into an array. */
export async function collect<T>(source: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of source) out.push(item);
  return out;
}
