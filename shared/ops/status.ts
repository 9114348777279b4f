import { scanJobSummaries, scanLeaseItems } from '../core/adapters/dynamodb-scans.ts';
import { collect, DEFAULT_STUCK_AFTER_MS, type JobsSummary, namedLeaseView, summariseJobs } from './jobs.ts';
import { type QueueDepth, queueStats, totalDepth } from './queue-stats.ts';
import type { OpsTarget } from './target.ts';

export interface StatusOptions {
  /** @default DEFAULT_STUCK_AFTER_MS */
  readonly stuckAfterMs?: number;
  /** @default Date.now() */
  readonly now?: number;
}

/** Everything `leaseq status` shows, as data (what `--json` prints). */
export interface StatusReport {
  /** When the report was taken (ISO 8601). */
  readonly at: string;
  readonly queue: QueueDepth & { readonly url: string };
  readonly dlq: QueueDepth & { readonly url: string; readonly depth: number };
  readonly jobs: JobsSummary;
  readonly namedLeases: { readonly held: number; readonly abandoned: number; readonly free: number };
  readonly stuckAfterMs: number;
}

/**
 * Collects queue and DLQ depth (GetQueueAttributes) and job and lease counts (table scans with a
 * projection: fine for local and demo sizes, a full read of the tables on a big deployment).
 */
export async function collectStatus(target: OpsTarget, options: StatusOptions = {}): Promise<StatusReport> {
  const { clients, names } = target;
  const stuckAfterMs = options.stuckAfterMs ?? DEFAULT_STUCK_AFTER_MS;
  const [queue, dlq, items, leases] = await Promise.all([
    queueStats(clients.sqs, names.queueUrl),
    queueStats(clients.sqs, names.dlqUrl),
    collect(scanJobSummaries(clients.doc, names.jobsTable)),
    collect(scanLeaseItems(clients.doc, names.leasesTable)),
  ]);
  // Taken after the reads, so a lease that ended while we scanned counts as ended.
  const now = options.now ?? Date.now();
  const namedLeases = { held: 0, abandoned: 0, free: 0 };
  for (const lease of leases) namedLeases[namedLeaseView(lease, now).state] += 1;
  return {
    at: new Date(now).toISOString(),
    queue: { url: names.queueUrl, ...queue },
    dlq: { url: names.dlqUrl, ...dlq, depth: totalDepth(dlq) },
    jobs: summariseJobs(items, now, stuckAfterMs),
    namedLeases,
    stuckAfterMs,
  };
}
