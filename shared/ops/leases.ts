import { scanJobSummaries, scanLeaseItems } from '../core/adapters/dynamodb-scans.ts';
import { JobStatus } from '../core/contract/statuses.ts';
import {
  collect,
  DEFAULT_STUCK_AFTER_MS,
  type JobLeaseView,
  jobLeaseView,
  type NamedLeaseView,
  namedLeaseView,
  stuckReason,
} from './jobs.ts';
import type { OpsTarget } from './target.ts';

export interface ListLeasesOptions {
  /** Only stuck job leases and abandoned named leases. @default false */
  readonly stuckOnly?: boolean;
  /** @default DEFAULT_STUCK_AFTER_MS */
  readonly stuckAfterMs?: number;
  /** @default Date.now() */
  readonly now?: number;
}

export interface LeasesReport {
  readonly at: string;
  readonly stuckAfterMs: number;
  /** IN_PROGRESS job items and RETRY_WAIT items whose retry is overdue, soonest expiry first. */
  readonly jobLeases: readonly JobLeaseView[];
  /** Items of the `leases` table (free ones only without `stuckOnly`), soonest expiry first. */
  readonly namedLeases: readonly NamedLeaseView[];
}

/**
 * Lists job leases (IN_PROGRESS items of the `jobs` table) and named leases (the `leases` table).
 * With `stuckOnly`: job leases that expired or made no progress for `stuckAfterMs`, and named leases whose
 * holder's lease ended without a release. Scans both tables (fine for local and demo sizes).
 */
export async function listLeases(target: OpsTarget, options: ListLeasesOptions = {}): Promise<LeasesReport> {
  const { clients, names } = target;
  const stuckAfterMs = options.stuckAfterMs ?? DEFAULT_STUCK_AFTER_MS;
  const [running, waiting, leases] = await Promise.all([
    collect(scanJobSummaries(clients.doc, names.jobsTable, { status: JobStatus.InProgress })),
    collect(scanJobSummaries(clients.doc, names.jobsTable, { status: JobStatus.RetryWait })),
    collect(scanLeaseItems(clients.doc, names.leasesTable)),
  ]);
  const now = options.now ?? Date.now();
  // A RETRY_WAIT item holds no lease; it is listed only when its retry is overdue (stuck).
  const overdue = waiting.filter((item) => stuckReason(item, now, stuckAfterMs) !== undefined);
  const jobLeases = [...running, ...overdue]
    .map((item) => jobLeaseView(item, now, stuckAfterMs))
    .filter((view) => !options.stuckOnly || view.stuck !== undefined)
    .sort((a, b) => a.leaseUntil - b.leaseUntil);
  const namedLeases = leases
    .map((item) => namedLeaseView(item, now))
    .filter((view) => (options.stuckOnly ? view.state === 'abandoned' : true))
    .sort((a, b) => a.leaseUntil - b.leaseUntil);
  return { at: new Date(now).toISOString(), stuckAfterMs, jobLeases, namedLeases };
}
