/**
 * The dead jobs as `leaseq dlq list` shows them by default: the DEAD items of the jobs table, read from
 * the sparse `problems` index (problem-jobs.ts). Unlike a browse of the DLQ (dlq-browse.ts) it receives
 * no letter, so listing neither hides the letters nor adds to their receive count.
 */
import { JobStatus } from '../core/contract/statuses.ts';
import { listProblemJobs } from './problem-jobs.ts';
import type { OpsTarget } from './target.ts';

/**
 * One dead job. Its fields are named like a letter's (DeadLetterSummary), so a script reading `dlq list
 * --json` finds the same `dedupKey`, `type`, `reason`, `errorClass`, `errorMessage`, `attempts` and
 * `deadAt`; what only a letter knows (its message id, receive count, worker, original message id) is not
 * here: `dlq list --letters` has it.
 */
export interface DeadJobSummary {
  readonly dedupKey: string;
  readonly type?: string;
  /** The item's `deadReason`; `unknown` if a writer left none. */
  readonly reason: string;
  readonly errorClass?: string;
  readonly errorMessage?: string;
  readonly attempts: number;
  /** ISO 8601. */
  readonly deadAt?: string;
}

export interface DeadJobsResult {
  /** Newest dead first. */
  readonly jobs: DeadJobSummary[];
  /** Read capacity units of the index the listing consumed. */
  readonly readUnits: number;
  /** Pass as `cursor` for the next page; absent at the end. */
  readonly next?: string;
}

/**
 * The DEAD jobs, newest first, from the problems index (`limit` at most PROBLEM_JOBS_MAX_LIMIT).
 * @throws ProblemsIndexMissingError when the table has no `problems` index.
 */
export async function listDeadJobs(
  target: OpsTarget,
  options: { readonly limit?: number; readonly cursor?: string } = {},
): Promise<DeadJobsResult> {
  const result = await listProblemJobs(target, {
    status: JobStatus.Dead,
    ...(options.limit === undefined ? {} : { limit: options.limit }),
    ...(options.cursor === undefined ? {} : { cursor: options.cursor }),
  });
  return {
    jobs: result.jobs.map((j) => ({
      dedupKey: j.dedupKey,
      ...(j.type === undefined ? {} : { type: j.type }),
      reason: j.deadReason ?? 'unknown',
      ...(j.lastErrorClass === undefined ? {} : { errorClass: j.lastErrorClass }),
      ...(j.lastError === undefined ? {} : { errorMessage: j.lastError }),
      attempts: j.attempts,
      ...(j.deadAt === undefined ? {} : { deadAt: new Date(j.deadAt).toISOString() }),
    })),
    readUnits: result.readUnits,
    ...(result.next === undefined ? {} : { next: result.next }),
  };
}
