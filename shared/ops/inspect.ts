import { DynamoDbJobStore } from '../core/adapters/dynamodb-job-store.ts';
import { scanLeaseItems } from '../core/adapters/dynamodb-scans.ts';
import type { JobItem } from '../core/contract/job-item.ts';
import { JobStatus } from '../core/contract/statuses.ts';
import { jobLeaseOwner } from '../core/leases/named-lease.ts';
import {
  collect,
  DEFAULT_STUCK_AFTER_MS,
  type NamedLeaseView,
  namedLeaseView,
  type StuckReason,
  stuckReason,
} from './jobs.ts';
import type { OpsTarget } from './target.ts';
import { jobTimeline, type TimelineEntry } from './timeline.ts';

export interface InspectOptions {
  /** @default DEFAULT_STUCK_AFTER_MS */
  readonly stuckAfterMs?: number;
  /** @default Date.now() */
  readonly now?: number;
}

/** One job as `leaseq inspect` shows it. */
export interface InspectReport {
  readonly at: string;
  /** The whole `jobs` item, read with a strongly consistent read. */
  readonly job: JobItem;
  /** For IN_PROGRESS items: the job lease. */
  readonly lease?: {
    /** `leaseUntil - now`: negative when it expired that long ago. */
    readonly remainingMs: number;
    readonly stuck?: StuckReason;
  };
  /** For RETRY_WAIT items: when the message is due back (`leaseUntil - now`). */
  readonly retryInMs?: number;
  /** Named leases (the `leases` table) currently held by the job's owner, if it has one. */
  readonly ownerLeases: readonly NamedLeaseView[];
  /** The job's events, oldest first: stored ones merged with those its fields tell (timeline.ts). */
  readonly timeline: readonly TimelineEntry[];
  /**
   * For a DEAD job: until when copies sent under its key are dropped (epoch ms; its type's `deadKeyTtl`
   * after it died), or `ttl` when that is until TTL removes the item (no `deadKeyTtl`).
   */
  readonly deadKey?: { readonly droppedUntil: number | 'ttl' };
}

/**
 * Reads one job item by dedup key; `undefined` when there is none (never claimed, or TTL removed it).
 * For a job with an owner, also lists the named leases that owner holds (a scan of the small `leases` table).
 */
export async function inspectJob(
  target: OpsTarget,
  dedupKey: string,
  options: InspectOptions = {},
): Promise<InspectReport | undefined> {
  const store = new DynamoDbJobStore({ client: target.clients.doc, tableName: target.names.jobsTable });
  const job = await store.get(dedupKey);
  if (!job) return undefined;
  const ownerLeases = job.owner
    ? await collect(
        scanLeaseItems(target.clients.doc, target.names.leasesTable, {
          owner: jobLeaseOwner(job.owner, job.dedupKey),
        }),
      )
    : [];
  const now = options.now ?? Date.now();
  const stuck = stuckReason(job, now, options.stuckAfterMs ?? DEFAULT_STUCK_AFTER_MS);
  return {
    at: new Date(now).toISOString(),
    job,
    ...(job.status === JobStatus.InProgress
      ? { lease: { remainingMs: job.leaseUntil - now, ...(stuck ? { stuck } : {}) } }
      : {}),
    ...(job.status === JobStatus.RetryWait ? { retryInMs: job.leaseUntil - now } : {}),
    ownerLeases: ownerLeases.map((item) => namedLeaseView(item, now)).filter((v) => v.state !== 'free'),
    timeline: jobTimeline(job),
    ...(job.status === JobStatus.Dead ? { deadKey: { droppedUntil: job.deadKeyUntil ?? 'ttl' } } : {}),
  };
}
