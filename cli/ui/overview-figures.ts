/**
 * Pure: one snapshot's figures, tiles and lists from the same reads so they cannot disagree. A jobs table
 * the sample held whole gives exact figures, the ones `leaseq status` computes (summariseJobs, the stuck
 * rule, listLeases' rows); a bigger table gives lower bounds (`atLeast`), with the problems index's exact
 * counts of dead and waiting jobs when its shards fit one page each.
 */
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import {
  type JobsSummary,
  jobLeaseView,
  namedLeaseView,
  type StuckReason,
  stuckReason,
  summariseJobs,
} from '../../shared/ops/jobs.ts';
import { type QueueDepth, totalDepth } from '../../shared/ops/queue-stats.ts';
import { problemsOf } from './components.ts';
import { type OverviewSnapshot, READS_PER_REFRESH, SAMPLE_ITEMS } from './overview-data.ts';

/** A count, or a lower bound of it when the reads did not cover everything. */
export interface Figure {
  readonly n: number;
  readonly atLeast?: true;
}

/** One job lease row (an IN_PROGRESS job, or a RETRY_WAIT one whose retry is overdue). */
export interface LeaseRow {
  readonly dedupKey: string;
  readonly type?: string;
  readonly owner?: string;
  readonly attempts: number;
  readonly leaseUntil: number;
  readonly remainingMs: number;
  readonly stuck?: StuckReason;
}

export interface OverviewFigures {
  readonly at: number;
  readonly tookMs: number;
  /** Requests one refresh makes, whatever the tables' size. */
  readonly reads: typeof READS_PER_REFRESH;
  readonly queue: QueueDepth | null;
  readonly dlq: (QueueDepth & { readonly depth: number }) | null;
  /** Null when neither the sample nor the index answered. */
  readonly jobs: {
    /** The sample held the whole jobs table: every figure is exact. */
    readonly complete: boolean;
    /** Items the sample read. */
    readonly sampled: number;
    /** Exact figures (what `leaseq status` reports), only when `complete`. */
    readonly summary?: JobsSummary;
    readonly live: Figure;
    readonly stuck: Figure;
    readonly retryWait: Figure | null;
    readonly dead: Figure | null;
  } | null;
  /** Job leases, soonest end first (the tiles count these rows). */
  readonly leases: readonly LeaseRow[] | null;
  readonly named: {
    readonly held: number;
    readonly abandoned: number;
    readonly free: number;
    readonly abandonedKeys: readonly string[];
    readonly complete: boolean;
  } | null;
  /** Banners: the reads that failed or timed out. */
  readonly problems: string[];
}

/** The figures of one snapshot. */
export function overviewFigures(s: OverviewSnapshot): OverviewFigures {
  const now = s.at;
  const sample = s.sample.ok ? s.sample.value : undefined;
  const index = s.index.ok ? s.index.value : undefined;
  const complete = sample !== undefined && !sample.more;
  const rows = new Map<string, LeaseRow>();
  for (const item of sample?.items ?? []) {
    const stuck = stuckReason(item, now);
    if (item.status === JobStatus.InProgress || (item.status === JobStatus.RetryWait && stuck)) {
      const v = jobLeaseView(item, now);
      rows.set(item.dedupKey, leaseRow(v));
    }
  }
  // A sample that held the whole table has every lease; otherwise the index adds the problem jobs' ones.
  if (!complete) {
    for (const v of index?.views ?? []) {
      if (rows.has(v.dedupKey)) continue;
      if (v.status === JobStatus.InProgress || (v.status === JobStatus.RetryWait && v.stuck)) {
        rows.set(v.dedupKey, {
          dedupKey: v.dedupKey,
          ...(v.type ? { type: v.type } : {}),
          ...(v.owner ? { owner: v.owner } : {}),
          attempts: v.attempts,
          leaseUntil: v.leaseUntil,
          remainingMs: v.leaseUntil - now,
          ...(v.stuck ? { stuck: v.stuck } : {}),
        });
      }
    }
  }
  const leases = sample || index ? [...rows.values()].sort((a, b) => a.leaseUntil - b.leaseUntil) : null;
  const bound = (n: number, exact: boolean): Figure => (exact ? { n } : { n, atLeast: true });
  const summary = complete ? summariseJobs(sample.items, now) : undefined;
  const fromIndex = (status: JobStatus): Figure | null =>
    index && !index.missing
      ? bound(index.views.filter((v) => v.status === status).length, index.complete)
      : null;
  const jobs =
    leases === null
      ? null
      : {
          complete,
          sampled: sample?.items.length ?? 0,
          ...(summary ? { summary } : {}),
          live: bound(leases.filter((r) => !r.stuck).length, complete),
          stuck: bound(leases.filter((r) => r.stuck).length, complete),
          retryWait: summary ? { n: summary.byStatus[JobStatus.RetryWait] } : fromIndex(JobStatus.RetryWait),
          dead: summary ? { n: summary.byStatus[JobStatus.Dead] } : fromIndex(JobStatus.Dead),
        };
  const named = s.named.ok
    ? (() => {
        const views = s.named.value.items.map((item) => namedLeaseView(item, now));
        const count = (state: string) => views.filter((v) => v.state === state).length;
        return {
          held: count('held'),
          abandoned: count('abandoned'),
          free: count('free'),
          abandonedKeys: views.filter((v) => v.state === 'abandoned').map((v) => v.leaseKey),
          complete: !s.named.value.more,
        };
      })()
    : null;
  return {
    at: s.at,
    tookMs: s.tookMs,
    reads: READS_PER_REFRESH,
    queue: s.queue.ok ? s.queue.value : null,
    dlq: s.dlq.ok ? { ...s.dlq.value, depth: totalDepth(s.dlq.value) } : null,
    jobs,
    leases,
    named,
    problems: problemsOf(s.queue, s.dlq, s.sample, s.index, s.named),
  };
}

function leaseRow(v: ReturnType<typeof jobLeaseView>): LeaseRow {
  return {
    dedupKey: v.dedupKey,
    ...(v.type ? { type: v.type } : {}),
    ...(v.owner ? { owner: v.owner } : {}),
    attempts: v.attempts,
    leaseUntil: v.leaseUntil,
    remainingMs: v.remainingMs,
    ...(v.stuck ? { stuck: v.stuck } : {}),
  };
}

/** The note under the tiles when the sample did not hold the whole table. */
export function sampleNote(f: OverviewFigures): string | undefined {
  if (!f.jobs || f.jobs.complete) return undefined;
  return `The jobs table holds more than the ${SAMPLE_ITEMS} items one refresh reads: figures marked ≥ are lower bounds (from that sample and the problems index); leaseq status counts them all with a full scan.`;
}
