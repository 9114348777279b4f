/**
 * What the inspector reads, each call bounded by a timeout: a store that is slow or down makes a page
 * show a banner naming the call and the parts that did answer, never hang or fail whole.
 */
import { scanJobSummaries } from '../../shared/core/adapters/dynamodb-scans.ts';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { collect, DEFAULT_STUCK_AFTER_MS, stuckReason } from '../../shared/ops/jobs.ts';
import { listProblemJobs, ProblemsIndexMissingError } from '../../shared/ops/problem-jobs.ts';
import type { OpsTarget } from '../../shared/ops/target.ts';
import { safeText } from '../safe-text.ts';

/** A call's answer, or why there is none (one line, no payload: the SDK's error name and message). */
export type Bounded<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly problem: string };

/** Why a store call gave no answer, as the banner says it. */
export function problemText(service: string, what: string, error: unknown, timeoutMs: number): string {
  if (error instanceof UiTimeout) return `${service} not answering: ${what} took longer than ${timeoutMs} ms`;
  const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  // Throttled is not down: the store answers, it refuses the rate (on-demand's limit, a hot partition).
  const state = isThrottle(error) ? 'throttling' : 'not answering';
  // Escaped here (safe-text.ts), not only by the HTML: the chart's script shows it from JSON as text.
  return `${service} ${state}: ${what} failed (${safeText(detail.replace(/\s+/g, ' ').slice(0, 300))})`;
}

/** The SDK's throttling errors (DynamoDB's and SQS's), by their `name` as the SDK sets it. */
const THROTTLES = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
  'RequestThrottled',
]);

function isThrottle(error: unknown): boolean {
  return error instanceof Error && THROTTLES.has(error.name);
}

class UiTimeout extends Error {}

/**
 * Runs `fn` for at most `timeoutMs`. `fn` is given a signal that aborts at the bound, or when `outer`
 * aborts (the browser went away): a read passes it to the SDK, so a call given up on ends its request
 * rather than running on holding a connection.
 */
export async function bounded<T>(
  service: 'DynamoDB' | 'SQS',
  what: string,
  timeoutMs: number,
  fn: (signal: AbortSignal) => Promise<T>,
  outer?: AbortSignal,
): Promise<Bounded<T>> {
  const stop = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const onOuter = () => stop.abort(outer?.reason);
  outer?.addEventListener('abort', onOuter, { once: true });
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new UiTimeout());
      stop.abort(new UiTimeout());
    }, timeoutMs);
  });
  try {
    if (outer?.aborted) throw outer.reason ?? new Error('aborted');
    return { ok: true, value: await Promise.race([fn(stop.signal), timeout]) };
  } catch (error) {
    return { ok: false, problem: problemText(service, what, error, timeoutMs) };
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener('abort', onOuter);
  }
}

/** One job of the problem-jobs page. */
export interface ProblemRow {
  readonly dedupKey: string;
  readonly status: JobStatus;
  readonly type?: string;
  readonly attempts: number;
  readonly owner?: string;
  /** The error class or dead reason, when the listing knows it. */
  readonly error?: string;
  /** When its last problem (or last change) happened, epoch ms. */
  readonly at?: number;
  readonly stuck?: string;
}

/** The filters of the problem-jobs page; every given one must match. */
export interface ProblemFilter {
  /** A status, or `stuck` (the stuck rule of `leaseq leases`). */
  readonly status?: JobStatus | 'stuck';
  readonly type?: string;
  /** A substring of the error (class and message with the index, class or stuck reason with a scan). */
  readonly error?: string;
  /** Only jobs whose last problem is at most this old (ms). */
  readonly maxAgeMs?: number;
}

/** The problem jobs a page shows, and where they were read from. */
export interface ProblemListing {
  readonly rows: ProblemRow[];
  /** `index`: the sparse problems index (its read units); `scan`: a table made before the index. */
  readonly source: { readonly kind: 'index'; readonly readUnits: number } | { readonly kind: 'scan' };
}

/**
 * The problem jobs matching `filter`, newest problem first (at most 500): from the sparse `problems`
 * index (listProblemJobs), or, on a jobs table made before the index, from the operator scan.
 */
export async function listProblems(
  target: OpsTarget,
  filter: ProblemFilter,
  now: number,
): Promise<ProblemListing> {
  try {
    const listed = await listProblemJobs(
      target,
      {
        ...(filter.status ? { status: filter.status } : {}),
        ...(filter.type ? { type: filter.type } : {}),
        ...(filter.error ? { errorContains: filter.error } : {}),
        ...(filter.maxAgeMs === undefined ? {} : { since: now - filter.maxAgeMs }),
        limit: 500,
      },
      now,
    );
    const rows = listed.jobs.map((j) => ({
      dedupKey: j.dedupKey,
      status: j.status,
      ...(j.type ? { type: j.type } : {}),
      attempts: j.attempts,
      ...(j.owner ? { owner: j.owner } : {}),
      ...(j.deadReason || j.lastErrorClass ? { error: j.deadReason ?? j.lastErrorClass } : {}),
      at: j.problemAt,
      ...(j.stuck ? { stuck: j.stuck } : {}),
    }));
    return { rows, source: { kind: 'index', readUnits: listed.readUnits } };
  } catch (error) {
    if (!(error instanceof ProblemsIndexMissingError)) throw error;
    return { rows: filterProblems(await scanProblems(target, now), filter, now), source: { kind: 'scan' } };
  }
}

/**
 * Jobs that had a problem: retried (attempts > 1), waiting for a retry, dead, or stuck. Read with the
 * operator scan of the jobs table (a projection, no payloads; fine at local and demo sizes).
 */
export async function scanProblems(target: OpsTarget, now: number): Promise<ProblemRow[]> {
  const items = await collect(scanJobSummaries(target.clients.doc, target.names.jobsTable));
  const rows: ProblemRow[] = [];
  for (const item of items) {
    const stuck = stuckReason(item, now, DEFAULT_STUCK_AFTER_MS);
    const troubled =
      item.attempts > 1 || item.status === JobStatus.Dead || item.status === JobStatus.RetryWait || stuck;
    if (!troubled) continue;
    rows.push({
      dedupKey: item.dedupKey,
      status: item.status,
      ...(item.type ? { type: item.type } : {}),
      attempts: item.attempts,
      ...(item.owner ? { owner: item.owner } : {}),
      ...(item.updatedAt === undefined ? {} : { at: item.updatedAt }),
      ...(stuck ? { stuck } : {}),
    });
  }
  return rows.sort((a, b) => (b.at ?? 0) - (a.at ?? 0));
}

/** Pure: the rows that pass the filter. */
export function filterProblems(
  rows: readonly ProblemRow[],
  filter: ProblemFilter,
  now: number,
): ProblemRow[] {
  const error = filter.error?.toLowerCase();
  return rows.filter(
    (r) =>
      (filter.status === undefined ||
        (filter.status === 'stuck' ? r.stuck !== undefined : r.status === filter.status)) &&
      (filter.type === undefined || r.type === filter.type) &&
      (error === undefined || (r.error ?? r.stuck ?? '').toLowerCase().includes(error)) &&
      (filter.maxAgeMs === undefined || (r.at !== undefined && now - r.at <= filter.maxAgeMs)),
  );
}
