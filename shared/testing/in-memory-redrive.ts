/**
 * The in-memory job store's redrive writes (InMemoryJobStore.resetForRedrive and undoRedrive), as the
 * DynamoDB adapter makes them (core/protocol/redrive.ts): pure, from the item to the next one.
 */
import { HISTORY_MAX, problemShard } from '../core/contract/job-history.ts';
import type { JobItem } from '../core/contract/job-item.ts';
import { type RedriveBy, redriveEvent } from '../core/contract/job-store.ts';
import { JobStatus } from '../core/contract/statuses.ts';
import { leaseOver } from '../core/decisions/lease-arithmetic.ts';

type MutableJobItem = { -readonly [K in keyof JobItem]: JobItem[K] };

/** The fields a redrive's reset removes or zeroes, which its undo puts back. */
const RESET_FIELDS = [
  'status',
  'leaseUntil',
  'attempts',
  'owner',
  'deadReason',
  'refunds',
  'conflicts',
  'deadAt',
  'deadKeyUntil',
  'problemAt',
] as const;

/** The item after a redrive's reset, or undefined when refused (JobStore.resetForRedrive). */
export function redriveReset(
  item: JobItem | undefined,
  dedupKey: string,
  reset: {
    readonly now: number;
    readonly leaseEndedBefore: number;
    readonly by: RedriveBy;
    readonly planned?: number;
    readonly expiresAt: number;
  },
): JobItem | undefined {
  if (!item || item.status === JobStatus.Completed || item.status === JobStatus.Cancelled) return undefined;
  if (reset.planned !== undefined && item.version !== reset.planned) return undefined;
  if (item.status === JobStatus.InProgress && !leaseOver(item.leaseUntil, reset.leaseEndedBefore))
    return undefined;
  const { now } = reset;
  const next: MutableJobItem = {
    ...item,
    status: JobStatus.RetryWait,
    leaseUntil: 0,
    attempts: 0,
    version: item.version + 1,
    updatedAt: now,
    expiresAt: reset.expiresAt,
    problemShard: problemShard(dedupKey),
    problemAt: now,
  };
  const history = [...(item.history ?? []), redriveEvent(now, reset.by)];
  next.history = history.slice(-HISTORY_MAX);
  if (history.length > HISTORY_MAX) {
    next.historyDropped = (item.historyDropped ?? 0) + history.length - HISTORY_MAX;
  }
  delete next.owner;
  delete next.deadReason;
  delete next.refunds;
  delete next.conflicts;
  delete next.deadAt;
  delete next.deadKeyUntil;
  return next;
}

/** The item with a redrive's reset undone, or undefined when it moved since (JobStore.undoRedrive). */
export function redriveUndone(
  item: JobItem | undefined,
  before: JobItem,
  resetVersion: number,
  now: number,
): JobItem | undefined {
  if (item?.version !== resetVersion || item.status !== JobStatus.RetryWait || item.attempts !== 0) {
    return undefined;
  }
  const next: MutableJobItem = { ...item, version: item.version + 1, updatedAt: now };
  const put = next as Record<string, unknown>;
  for (const field of RESET_FIELDS) {
    if (before[field] === undefined) delete put[field];
    else put[field] = before[field];
  }
  return next;
}
