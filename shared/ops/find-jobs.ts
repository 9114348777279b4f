/**
 * The inspector's search (`leaseq ui`'s box on every page): an exact dedup key is one GetItem of the jobs
 * table; filters list the problem jobs from the sparse `problems` index (problem-jobs.ts), one page at a
 * time, with a count that is bounded: exact when the matches fit in {@link FIND_COUNT_BOUND}, else "at
 * least" that many. Nothing here scans the table.
 */
import { DynamoDbJobStore } from '../core/adapters/dynamodb-job-store.ts';
import type { JobItem } from '../core/contract/job-item.ts';
import {
  listProblemJobs,
  type ProblemJobsFilter,
  type ProblemJobView,
  type ProblemStatusFilter,
} from './problem-jobs.ts';
import type { OpsTarget } from './target.ts';

/** Most matches a count reads before it says "at least". */
export const FIND_COUNT_BOUND = 500;

/** Jobs per page of a search. */
export const FIND_PAGE_SIZE = 50;

/**
 * Queries per shard of the page's listing and of its count: one, so a search reads at most 16 queries of
 * the index for its page (50 entries each) and 16 for its count (500 each), however rare its matches; a
 * page may then hold fewer than 50 rows, and "Next page" reads on from where each shard stopped.
 */
export const FIND_QUERIES_PER_SHARD = 1;

/** What a search filters on; every given one must match (problem-jobs.ts ProblemJobsFilter). */
export interface FindFilter {
  readonly status?: readonly ProblemStatusFilter[];
  readonly type?: string;
  /** Dead reason or stuck reason, exactly. */
  readonly reason?: string;
  /** Case-insensitive substring of the last error (class and message). */
  readonly error?: string;
  /** Only jobs whose last problem is at or after this (epoch ms). */
  readonly since?: number;
}

/** How many jobs match: `n` exactly, or at least `n` when `atLeast` (the count stopped at its bound). */
export interface FindCount {
  readonly n: number;
  readonly atLeast: boolean;
}

export interface FindPage {
  /** Newest problem first. */
  readonly jobs: readonly ProblemJobView[];
  /** The cursor of the next page; absent on the last. */
  readonly next?: string;
  readonly count: FindCount;
  /** Read units of the index the page and its count consumed (the table is not read). */
  readonly readUnits: number;
  /** Query requests made, page and count together. */
  readonly queries: number;
}

function indexFilter(filter: FindFilter): ProblemJobsFilter {
  return {
    ...(filter.status && filter.status.length > 0 ? { status: filter.status } : {}),
    ...(filter.type === undefined ? {} : { type: filter.type }),
    ...(filter.reason === undefined ? {} : { reason: filter.reason }),
    ...(filter.error === undefined ? {} : { errorContains: filter.error }),
    ...(filter.since === undefined ? {} : { since: filter.since }),
  };
}

/**
 * One page of the problem jobs matching `filter` (from `cursor`, a page's `next`), and how many match
 * from the first page on. The first page that holds every match is its own count (no second read);
 * otherwise a second listing, of at most {@link FIND_COUNT_BOUND} matches, counts them.
 * @throws ProblemsIndexMissingError on a table without the index; ProblemJobsFilterError for a bad cursor.
 */
export async function findProblemJobs(
  target: OpsTarget,
  filter: FindFilter,
  options: { readonly cursor?: string; readonly pageSize?: number } = {},
  now: number = Date.now(),
): Promise<FindPage> {
  const base = indexFilter(filter);
  const page = await listProblemJobs(
    target,
    {
      ...base,
      limit: options.pageSize ?? FIND_PAGE_SIZE,
      maxQueriesPerShard: FIND_QUERIES_PER_SHARD,
      ...(options.cursor === undefined ? {} : { cursor: options.cursor }),
    },
    now,
  );
  if (options.cursor === undefined && page.next === undefined) {
    return {
      jobs: page.jobs,
      count: { n: page.jobs.length, atLeast: false },
      readUnits: page.readUnits,
      queries: page.queries,
    };
  }
  const counted = await listProblemJobs(
    target,
    { ...base, limit: FIND_COUNT_BOUND, maxQueriesPerShard: FIND_QUERIES_PER_SHARD },
    now,
  );
  return {
    jobs: page.jobs,
    ...(page.next === undefined ? {} : { next: page.next }),
    count: {
      n: Math.min(FIND_COUNT_BOUND, counted.matchesRead),
      atLeast: counted.next !== undefined || counted.matchesRead > FIND_COUNT_BOUND,
    },
    readUnits: page.readUnits + counted.readUnits,
    queries: page.queries + counted.queries,
  };
}

/** The job item under `dedupKey`, by one strongly consistent GetItem; undefined when there is none. */
export async function findJobByKey(target: OpsTarget, dedupKey: string): Promise<JobItem | undefined> {
  const store = new DynamoDbJobStore({ client: target.clients.doc, tableName: target.names.jobsTable });
  return store.get(dedupKey);
}

/** "12 jobs", "at least 500 jobs". */
export function describeCount(count: FindCount): string {
  return `${count.atLeast ? 'at least ' : ''}${count.n} job${count.n === 1 && !count.atLeast ? '' : 's'}`;
}
