/**
 * The jobs that had a problem, newest problem first, read from the sparse `problems` index
 * (job-history.ts): a listing reads the problem jobs only, never the table, so its cost does not grow with
 * the jobs that completed first time. `leaseq jobs`, `leaseq dlq list` and the web UI use it.
 */
import {
  type ProblemIndexItem,
  type ProblemShardKey,
  queryProblemShard,
} from '../core/adapters/dynamodb-problems.ts';
import { PROBLEM_SHARDS, PROBLEMS_INDEX, problemShard } from '../core/contract/job-history.ts';
import { JobStatus } from '../core/contract/statuses.ts';
import { DEFAULT_STUCK_AFTER_MS, type StuckReason, stuckReason } from './jobs.ts';
import { OpsError } from './ops-errors.ts';
import type { OpsTarget } from './target.ts';

/** A status to list, or `stuck`: IN_PROGRESS or RETRY_WAIT items the stuck rule (jobs.ts) picks. */
export type ProblemStatusFilter = JobStatus | 'stuck';

export interface ProblemJobsFilter {
  /** One status or several (any of them matches); all statuses when absent. */
  readonly status?: ProblemStatusFilter | readonly ProblemStatusFilter[];
  /** The job type, exactly. */
  readonly type?: string;
  /** Case-insensitive substring of `lastErrorClass: lastError`. */
  readonly errorContains?: string;
  /** The dead reason (`deadReason`, as a letter's `reason`) or the stuck reason, exactly. */
  readonly reason?: string;
  /** Only jobs whose last problem is at or after this (epoch ms). */
  readonly since?: number;
  /** Most jobs returned. @default 50 (at most 1000) */
  readonly limit?: number;
  /** The `next` of the previous call: continues that listing (same filter) where it stopped. */
  readonly cursor?: string;
  /** For the stuck rule. @default DEFAULT_STUCK_AFTER_MS */
  readonly stuckAfterMs?: number;
  /**
   * Most queries per shard (a bound on what one listing reads, whatever few entries match): a shard
   * stopped by it goes on from the cursor. Unbounded when absent (until `limit` matches or the end).
   */
  readonly maxQueriesPerShard?: number;
}

/** One problem job as a listing shows it (the index's projection, no payload, result or history). */
export interface ProblemJobView {
  readonly dedupKey: string;
  readonly status: JobStatus;
  readonly type?: string;
  readonly attempts: number;
  readonly lastError?: string;
  readonly lastErrorClass?: string;
  readonly deadReason?: string;
  readonly owner?: string;
  /** Lease end; in RETRY_WAIT, when the retry is due (epoch ms). */
  readonly leaseUntil: number;
  /** The last problem event (epoch ms): the listing's order. */
  readonly problemAt: number;
  /** From the envelope (ISO 8601), when known. */
  readonly createdAt?: string;
  /** `now - createdAt`, when known. */
  readonly ageMs?: number;
  readonly deadAt?: number;
  readonly completedAt?: number;
  /** Set when the job is stuck (jobs.ts `stuckReason`). */
  readonly stuck?: StuckReason;
}

export interface ProblemJobsResult {
  /** Newest problem first; at most `limit`. */
  readonly jobs: ProblemJobView[];
  /** Read capacity units the listing consumed (the index's: the table is not read). */
  readonly readUnits: number;
  /** Index entries read (before the filters; a filter lowers what travels, not what is read). */
  readonly itemsRead: number;
  /** Query requests made (at least one per shard). */
  readonly queries: number;
  /** Matches read, `jobs` and those held back for the next page (a count may use it). */
  readonly matchesRead: number;
  /** Pass as `cursor` for the next page; absent when every shard was read to its end. */
  readonly next?: string;
}

/** The default and the largest `limit`. */
export const PROBLEM_JOBS_DEFAULT_LIMIT = 50;
export const PROBLEM_JOBS_MAX_LIMIT = 1000;

/** The table has no `problems` index (made before it existed, by another tool, or given as an existing table). */
export class ProblemsIndexMissingError extends OpsError {
  constructor(tableName: string, cause?: unknown) {
    super(
      `the jobs table ${tableName} has no \`${PROBLEMS_INDEX}\` index: deploy the stack again or run ` +
        '`leaseq local provision` for a table leaseq made; add it with addProblemsIndex(table) from leaseq/cdk ' +
        'to a table of yours (existingStateTables)',
      cause,
    );
    this.name = 'ProblemsIndexMissingError';
  }
}

/** A filter or cursor `listProblemJobs` cannot use. */
export class ProblemJobsFilterError extends OpsError {
  constructor(message: string) {
    super(message);
    this.name = 'ProblemJobsFilterError';
  }
}

/** The 16 shard values of the index's partition key (`p00`..`p15`). */
export const PROBLEM_SHARD_VALUES: readonly string[] = Array.from(
  { length: PROBLEM_SHARDS },
  (_, i) => `p${String(i).padStart(2, '0')}`,
);

/** Per shard: where its next query starts (undefined: at its newest), or `done`. */
type ShardPositions = Record<string, ProblemShardKey | 'done' | undefined>;

/**
 * Lists the jobs with a problem, newest problem first: queries the 16 shards of the `problems` index in
 * parallel, each newest first and paginated until it has `limit` matches or ends, and merges them. Reads
 * the index only.
 */
export async function listProblemJobs(
  target: OpsTarget,
  filter: ProblemJobsFilter = {},
  now: number = Date.now(),
): Promise<ProblemJobsResult> {
  const limit = filter.limit ?? PROBLEM_JOBS_DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > PROBLEM_JOBS_MAX_LIMIT) {
    throw new ProblemJobsFilterError(`limit must be a whole number from 1 to ${PROBLEM_JOBS_MAX_LIMIT}`);
  }
  // DynamoDB's numbers hold more, but the document client refuses to marshal an unsafe integer.
  if (filter.since !== undefined && !(Math.abs(filter.since) <= Number.MAX_SAFE_INTEGER)) {
    throw new ProblemJobsFilterError('since must be a time (epoch ms)');
  }
  const wanted = statusSet(filter.status);
  const needle = filter.errorContains?.toLowerCase();
  const stuckAfterMs = filter.stuckAfterMs ?? DEFAULT_STUCK_AFTER_MS;
  const positions = filter.cursor === undefined ? {} : parseCursor(filter.cursor);
  // Stuck needs IN_PROGRESS and RETRY_WAIT from the store; the rule itself runs here.
  const serverStatuses = wanted
    ? [...new Set([...wanted.plain, ...(wanted.stuck ? [JobStatus.InProgress, JobStatus.RetryWait] : [])])]
    : undefined;
  const matches = (view: ProblemJobView): boolean => {
    if (wanted && !wanted.plain.has(view.status) && !(wanted.stuck && view.stuck)) return false;
    if (filter.reason !== undefined && view.deadReason !== filter.reason && view.stuck !== filter.reason) {
      return false;
    }
    if (needle !== undefined) {
      const text = `${view.lastErrorClass ?? ''}: ${view.lastError ?? ''}`.toLowerCase();
      if (!text.includes(needle)) return false;
    }
    return true;
  };
  const maxQueries = filter.maxQueriesPerShard ?? Number.POSITIVE_INFINITY;
  // A shard's `limit` newest matches are enough for the merged `limit` newest.
  const pageSize = Math.min(PROBLEM_JOBS_MAX_LIMIT, Math.max(limit, 25));
  const reads = await Promise.all(
    PROBLEM_SHARD_VALUES.map(async (shard) => {
      const start = positions[shard];
      const read = { shard, found: [] as ProblemJobView[], readUnits: 0, scanned: 0, queries: 0 };
      if (start === 'done') return { ...read, end: 'done' as const };
      // A cursor's position older than `since` (a page of a listing without it): the rest of the shard is
      // older still, and DynamoDB refuses a start key outside the key condition.
      if (start && filter.since !== undefined && (start.problemAt as number) < filter.since) {
        return { ...read, end: 'done' as const };
      }
      let key: ProblemShardKey | undefined = start;
      do {
        const page = await queryShard(target, {
          shard,
          pageSize,
          ...(filter.since === undefined ? {} : { since: filter.since }),
          ...(serverStatuses ? { statuses: serverStatuses } : {}),
          ...(filter.type === undefined ? {} : { type: filter.type }),
          ...(key ? { startKey: key } : {}),
        });
        read.queries += 1;
        read.readUnits += page.readUnits;
        read.scanned += page.scanned;
        for (const item of page.items) {
          const view = problemJobView(item, now, stuckAfterMs);
          if (matches(view)) read.found.push(view);
        }
        key = page.lastKey;
      } while (key && read.found.length < limit && read.queries < maxQueries);
      return { ...read, end: key ?? ('done' as const) };
    }),
  );
  // Ties on problemAt keep each shard's own order, so what is taken from a shard is a prefix of what it
  // returned and the cursor (the last taken entry's key) skips nothing.
  // A shard stopped by maxQueriesPerShard before `limit` matches may hold matches newer than another
  // shard's older ones: nothing older than where it stopped is taken now (the cursor keeps it).
  const frontier = Math.max(
    Number.NEGATIVE_INFINITY,
    ...reads.flatMap((r) =>
      r.end !== 'done' && r.found.length < limit ? [Number(r.end.problemAt ?? Number.POSITIVE_INFINITY)] : [],
    ),
  );
  const merged = reads
    .flatMap((r, s) => r.found.map((job, i) => ({ job, s, i })))
    .filter((m) => m.job.problemAt >= frontier)
    .sort((a, b) => b.job.problemAt - a.job.problemAt || a.s - b.s || a.i - b.i)
    .slice(0, limit);
  const jobs = merged.map((m) => m.job);
  const next: ShardPositions = {};
  reads.forEach((r, s) => {
    const takenHere = merged.filter((m) => m.s === s).length;
    if (takenHere === r.found.length) next[r.shard] = r.end;
    else {
      const last = r.found[takenHere - 1];
      next[r.shard] = last ? shardKey(r.shard, last) : positions[r.shard];
    }
  });
  const more = Object.values(next).some((p) => p !== 'done');
  return {
    jobs,
    readUnits: reads.reduce((sum, r) => sum + r.readUnits, 0),
    itemsRead: reads.reduce((sum, r) => sum + r.scanned, 0),
    queries: reads.reduce((sum, r) => sum + r.queries, 0),
    matchesRead: reads.reduce((sum, r) => sum + r.found.length, 0),
    ...(more ? { next: encodeCursor(next) } : {}),
  };
}

/**
 * The view of one index entry. The index holds whatever the item holds: an entry whose attribute is
 * missing or of another type (an item edited by hand or another tool) shows without it rather than
 * failing the listing of every other job.
 */
export function problemJobView(entry: ProblemIndexItem, now: number, stuckAfterMs: number): ProblemJobView {
  const item = entry as unknown as Record<string, unknown>;
  const text = (name: string): string | undefined =>
    typeof item[name] === 'string' ? (item[name] as string) : undefined;
  const time = (name: string): number | undefined =>
    typeof item[name] === 'number' && Number.isFinite(item[name]) ? (item[name] as number) : undefined;
  const status = (text('status') ?? 'UNKNOWN') as JobStatus;
  const leaseUntil = time('leaseUntil') ?? 0;
  const attempts = time('attempts') ?? 0;
  const claimedAt = time('claimedAt');
  const updatedAt = time('updatedAt');
  const createdAt = text('createdAt');
  const created = createdAt ? Date.parse(createdAt) : Number.NaN;
  // The index projects no checkpoint: `updatedAt` (bumped by a claim, a checkpoint, a release, never by a
  // lease renewal) stands for the last progress, which is what the stuck rule asks of claim and checkpoint.
  const stuck = stuckReason(
    {
      dedupKey: entry.dedupKey,
      status,
      leaseUntil,
      token: 0,
      attempts,
      ...(claimedAt === undefined ? {} : { claimedAt }),
      ...(updatedAt === undefined ? {} : { updatedAt, checkpoint: { at: updatedAt } }),
    },
    now,
    stuckAfterMs,
  );
  const optional = {
    type: text('type'),
    lastError: text('lastError'),
    lastErrorClass: text('lastErrorClass'),
    deadReason: text('deadReason'),
    owner: text('owner'),
  };
  return {
    dedupKey: entry.dedupKey,
    status,
    ...(optional.type === undefined ? {} : { type: optional.type }),
    attempts,
    ...(optional.lastError === undefined ? {} : { lastError: optional.lastError }),
    ...(optional.lastErrorClass === undefined ? {} : { lastErrorClass: optional.lastErrorClass }),
    ...(optional.deadReason === undefined ? {} : { deadReason: optional.deadReason }),
    ...(optional.owner === undefined ? {} : { owner: optional.owner }),
    leaseUntil,
    problemAt: entry.problemAt,
    ...(createdAt === undefined ? {} : { createdAt }),
    ...(Number.isFinite(created) ? { ageMs: Math.max(0, now - created) } : {}),
    ...(time('deadAt') === undefined ? {} : { deadAt: time('deadAt') as number }),
    ...(time('completedAt') === undefined ? {} : { completedAt: time('completedAt') as number }),
    ...(stuck ? { stuck } : {}),
  };
}

async function queryShard(target: OpsTarget, q: Parameters<typeof queryProblemShard>[2]) {
  try {
    return await queryProblemShard(target.clients.doc, target.names.jobsTable, q);
  } catch (error) {
    if (isMissingIndex(error)) throw new ProblemsIndexMissingError(target.names.jobsTable, error);
    // The SDK has retried already; one shard's failure fails the listing (a merge without it would skip
    // its jobs silently), and says which and that a listing writes nothing.
    const e = error as { name?: string; message?: string };
    throw new OpsError(
      `could not read shard ${q.shard} of the ${PROBLEMS_INDEX} index (${e?.name ?? 'Error'}: ${e?.message ?? String(error)}); nothing was changed, run the listing again`,
      error,
    );
  }
}

/** DynamoDB's answer to a query of an index the table does not have. */
export function isMissingIndex(error: unknown): boolean {
  const e = error as { name?: string; message?: string } | undefined;
  return e?.name === 'ValidationException' && /index/i.test(e.message ?? '');
}

function statusSet(
  status: ProblemJobsFilter['status'],
): { plain: Set<JobStatus>; stuck: boolean } | undefined {
  if (status === undefined) return undefined;
  const list: readonly ProblemStatusFilter[] = typeof status === 'string' ? [status] : status;
  if (list.length === 0) return undefined;
  const known = new Set<string>([...Object.values(JobStatus), 'stuck']);
  for (const s of list) {
    if (!known.has(s)) throw new ProblemJobsFilterError(`unknown status ${JSON.stringify(s)}`);
  }
  return {
    plain: new Set(list.filter((s): s is JobStatus => s !== 'stuck')),
    stuck: list.includes('stuck'),
  };
}

function shardKey(shard: string, job: ProblemJobView): ProblemShardKey {
  return { dedupKey: job.dedupKey, problemShard: shard, problemAt: job.problemAt };
}

function encodeCursor(positions: ShardPositions): string {
  const compact: Record<string, unknown> = {};
  for (const [shard, p] of Object.entries(positions)) {
    if (p !== undefined) compact[shard] = p === 'done' ? 0 : [p.dedupKey, p.problemAt];
  }
  return Buffer.from(JSON.stringify(compact)).toString('base64url');
}

function parseCursor(cursor: string): ShardPositions {
  const bad = () => new ProblemJobsFilterError('cursor is not one a listing returned');
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw bad();
  const positions: ShardPositions = {};
  for (const [shard, p] of Object.entries(parsed)) {
    if (!PROBLEM_SHARD_VALUES.includes(shard)) throw bad();
    if (p === 0) positions[shard] = 'done';
    else if (Array.isArray(p) && p.length === 2 && isShardPosition(shard, p[0], p[1])) {
      positions[shard] = { dedupKey: p[0], problemShard: shard, problemAt: p[1] };
    } else throw bad();
  }
  return positions;
}

/**
 * A position a listing could have written for `shard`: a key of that shard (a foreign or edited one would
 * reach DynamoDB as a start key it refuses, or resume another listing's place) and an epoch-ms time.
 */
function isShardPosition(shard: string, dedupKey: unknown, problemAt: unknown): boolean {
  return (
    typeof dedupKey === 'string' &&
    dedupKey !== '' &&
    Buffer.byteLength(dedupKey, 'utf8') <= DYNAMODB_PARTITION_KEY_MAX_BYTES &&
    problemShard(dedupKey) === shard &&
    Number.isSafeInteger(problemAt) &&
    (problemAt as number) >= 0
  );
}

/** DynamoDB's largest partition key value. */
const DYNAMODB_PARTITION_KEY_MAX_BYTES = 2048;
