// The fence of every write after the claim (owner + token + IN_PROGRESS), read from the job item as a
// store holds it or returned it with a refusal: does this lease still hold the job, and if not, which
// error says so. Both job stores answer a refused fenced write with the same error.

import { JobCancelledError, LeaseLostError } from '../../errors.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { JobLease } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';

/** True while the item is still this lease's: owner, token, IN_PROGRESS. */
export function holdsFence(item: JobItem, lease: JobLease): boolean {
  return item.owner === lease.owner && item.token === lease.token && item.status === JobStatus.InProgress;
}

/**
 * The error for a refused fenced write, from the item as it is (undefined: gone). When the item shows the
 * job COMPLETED under this very lease (an earlier commit went through but its answer was lost), the error
 * says so, and the caller treats the job as done instead of lost; when it shows the job CANCELLED, the
 * error is a JobCancelledError.
 */
export function fenceRefusal(
  lease: JobLease,
  operation: string,
  item: JobItem | undefined,
  cause?: unknown,
): LeaseLostError {
  if (!item) {
    return new LeaseLostError(
      lease.dedupKey,
      lease.token,
      `${operation} refused: the job item is gone`,
      cause,
    );
  }
  // Cancelled: the holder must stop and give its message up, not leave it to a new owner (there is none).
  if (item.status === JobStatus.Cancelled) {
    return new JobCancelledError(
      lease.dedupKey,
      lease.token,
      `${operation} refused: the job was cancelled`,
      cause,
    );
  }
  const completedByUs =
    item.status === JobStatus.Completed && item.token === lease.token && item.owner === lease.owner;
  return new LeaseLostError(
    lease.dedupKey,
    lease.token,
    `${operation} refused: item now has owner ${item.owner ?? '(none)'}, token ${item.token}, status ${item.status}`,
    cause,
    completedByUs,
  );
}
