/**
 * The overview's reads: one snapshot per refresh, from a fixed number of requests whatever the tables'
 * size. Two GetQueueAttributes (the jobs queue, the DLQ), one Scan page of the jobs table (a sample of at
 * most SAMPLE_ITEMS items: the whole table when it is that small), one Query page per shard of the
 * `problems` index (at most INDEX_PAGE entries each) and one Scan page of the leases table. Never a
 * paginated scan: a big table is sampled, and the figures say so (overview-figures.ts).
 */
import { queryProblemShard } from '../../shared/core/adapters/dynamodb-problems.ts';
import {
  type JobSummaryItem,
  type ScanPage,
  scanJobSummaryPage,
  scanLeasePage,
} from '../../shared/core/adapters/dynamodb-scans.ts';
import type { LeaseItem } from '../../shared/core/contract/lease-store.ts';
import { DEFAULT_STUCK_AFTER_MS } from '../../shared/ops/jobs.ts';
import {
  isMissingIndex,
  PROBLEM_SHARD_VALUES,
  type ProblemJobView,
  problemJobView,
} from '../../shared/ops/problem-jobs.ts';
import { type QueueDepth, queueStats } from '../../shared/ops/queue-stats.ts';
import type { OpsTarget } from '../../shared/ops/target.ts';
import { type Bounded, bounded } from './data.ts';

/** Items of the jobs table one refresh reads at most (one Scan page). */
export const SAMPLE_ITEMS = 200;
/** Entries of each `problems` index shard one refresh reads at most (one Query page per shard). */
export const INDEX_PAGE = 100;
/** Items of the leases table one refresh reads at most (one Scan page). */
export const LEASE_ITEMS = 200;
/** Requests one refresh makes: SQS, then DynamoDB (the shards' queries and the two scan pages). */
export const READS_PER_REFRESH = { sqs: 2, dynamodb: PROBLEM_SHARD_VALUES.length + 2 } as const;

/** The problem jobs the index gave, and whether every shard was read to its end. */
export interface IndexRead {
  readonly views: ProblemJobView[];
  readonly complete: boolean;
  /** The jobs table has no `problems` index (made before it): the sample alone gives the figures. */
  readonly missing?: true;
}

/** What one refresh read; each part on its own, so a slow store spoils only its parts. */
export interface OverviewSnapshot {
  /** When the reads ended (epoch ms): the figures' time. */
  readonly at: number;
  /** How long the reads took (ms). */
  readonly tookMs: number;
  readonly queue: Bounded<QueueDepth>;
  readonly dlq: Bounded<QueueDepth>;
  readonly sample: Bounded<ScanPage<JobSummaryItem>>;
  readonly index: Bounded<IndexRead>;
  readonly named: Bounded<ScanPage<LeaseItem>>;
}

/** Reads one snapshot; `signal` (the browser went away) aborts every request still running. */
export async function readOverview(
  target: OpsTarget,
  readMs: number,
  signal?: AbortSignal,
): Promise<OverviewSnapshot> {
  const started = Date.now();
  const { clients, names } = target;
  const [queue, dlq, sample, index, named] = await Promise.all([
    bounded(
      'SQS',
      'jobs queue depth (GetQueueAttributes)',
      readMs,
      (s) => queueStats(clients.sqs, names.queueUrl, s),
      signal,
    ),
    bounded(
      'SQS',
      'DLQ depth (GetQueueAttributes)',
      readMs,
      (s) => queueStats(clients.sqs, names.dlqUrl, s),
      signal,
    ),
    bounded(
      'DynamoDB',
      `sample of the jobs table (one Scan page of ${SAMPLE_ITEMS} items)`,
      readMs,
      (s) => scanJobSummaryPage(clients.doc, names.jobsTable, { limit: SAMPLE_ITEMS, abortSignal: s }),
      signal,
    ),
    bounded('DynamoDB', 'query of the problems index', readMs, (s) => readIndex(target, s), signal),
    bounded(
      'DynamoDB',
      `named leases (one Scan page of ${LEASE_ITEMS} items)`,
      readMs,
      (s) => scanLeasePage(clients.doc, names.leasesTable, { limit: LEASE_ITEMS, abortSignal: s }),
      signal,
    ),
  ]);
  const at = Date.now();
  return { at, tookMs: at - started, queue, dlq, sample, index, named };
}

/** One page of each shard of the `problems` index, newest problem first. */
async function readIndex(target: OpsTarget, abortSignal: AbortSignal): Promise<IndexRead> {
  let pages: Awaited<ReturnType<typeof queryProblemShard>>[];
  try {
    pages = await Promise.all(
      PROBLEM_SHARD_VALUES.map((shard) =>
        queryProblemShard(
          target.clients.doc,
          target.names.jobsTable,
          { shard, pageSize: INDEX_PAGE },
          { abortSignal },
        ),
      ),
    );
  } catch (error) {
    if (isMissingIndex(error)) return { views: [], complete: false, missing: true };
    throw error;
  }
  const now = Date.now();
  return {
    views: pages.flatMap((p) => p.items.map((item) => problemJobView(item, now, DEFAULT_STUCK_AFTER_MS))),
    complete: pages.every((p) => p.lastKey === undefined),
  };
}
