/** Lifecycle of a job item in the `jobs` table. */
export const JobStatus = {
  /** Claimed: `owner` holds the lease until `leaseUntil`. */
  InProgress: 'IN_PROGRESS',
  /** A failed attempt released the lease; the message comes back at `leaseUntil` (the backoff). */
  RetryWait: 'RETRY_WAIT',
  /** The effect is stored; every later copy is a duplicate. */
  Completed: 'COMPLETED',
  /** Dead-lettered: the message sits in the DLQ; copies are dropped until an operator redrives it. */
  Dead: 'DEAD',
  /**
   * Cancelled by an operator or producer (`JobStore.cancel`): terminal. No claim or fast commit takes it,
   * a running holder's next fenced write is refused (its job is aborted), copies are dropped until TTL.
   */
  Cancelled: 'CANCELLED',
} as const;
export type JobStatus = (typeof JobStatus)[keyof typeof JobStatus];
