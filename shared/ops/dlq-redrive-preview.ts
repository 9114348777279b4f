/**
 * The preview of a redrive by filter, before anything is received or changed: the dead jobs the filter
 * finds in the `problems` index (bounded reads, no letter received; problem-jobs.ts). What the redrive
 * then sends are their letters; a letter with no DEAD item (a body that never became a job: invalid-*,
 * dedup-key-collision, a letter the queue's own redrive moved) is not in the index, so only the dry run,
 * which browses the DLQ, counts it.
 */
import { JobStatus } from '../core/contract/statuses.ts';
import type { DeadLetterFilter } from './dlq-letters.ts';
import { listProblemJobs, PROBLEM_JOBS_MAX_LIMIT, type ProblemJobView } from './problem-jobs.ts';
import type { OpsTarget } from './target.ts';

export interface RedrivePreview {
  /** The first dead jobs that match, newest death first (at most `limit`). */
  readonly jobs: readonly ProblemJobView[];
  /** Matching dead jobs counted (all of them unless `more`). */
  readonly count: number;
  /** More match than were counted: the index was read `maxPages` pages deep. */
  readonly more: boolean;
  readonly readUnits: number;
}

/**
 * Counts the DEAD jobs `filter` matches in the `problems` index and keeps the first `rows`: the type, the
 * error text and the time window on the index's query; the reason (exact, or a prefix ending in `*`) on
 * what it returns; a dedup key on the entry. Reads at most `maxPages` pages of 1000 entries.
 * @throws ProblemsIndexMissingError when the table has no index (the caller previews with a dry run)
 */
export async function previewRedrive(
  target: OpsTarget,
  filter: DeadLetterFilter,
  options: { readonly rows?: number; readonly maxPages?: number; readonly now?: number } = {},
): Promise<RedrivePreview> {
  const rows = options.rows ?? 10;
  const maxPages = options.maxPages ?? 10;
  const jobs: ProblemJobView[] = [];
  let count = 0;
  let readUnits = 0;
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await listProblemJobs(
      target,
      {
        status: JobStatus.Dead,
        ...(filter.type === undefined ? {} : { type: filter.type }),
        ...(filter.errorContains === undefined ? {} : { errorContains: filter.errorContains }),
        ...(filter.since === undefined ? {} : { since: filter.since }),
        limit: PROBLEM_JOBS_MAX_LIMIT,
        ...(cursor === undefined ? {} : { cursor }),
      },
      options.now,
    );
    pages += 1;
    readUnits += page.readUnits;
    for (const job of page.jobs) {
      if (!reasonMatches(job.deadReason, filter.reason)) continue;
      if (filter.dedupKey !== undefined && job.dedupKey !== filter.dedupKey) continue;
      count += 1;
      if (jobs.length < rows) jobs.push(job);
    }
    cursor = page.next;
  } while (cursor !== undefined && pages < maxPages);
  return { jobs, count, more: cursor !== undefined, readUnits };
}

/** The redrive filter's reason test (dlq-letters.ts `matchesFilter`) on a job's `deadReason`. */
function reasonMatches(reason: string | undefined, wanted: string | undefined): boolean {
  if (wanted === undefined) return true;
  if (reason === undefined) return false;
  return wanted.endsWith('*') ? reason.startsWith(wanted.slice(0, -1)) : reason === wanted;
}
