/** Every metric leaseq emits. Names are the contract with dashboards and alarms. */
export const MetricName = {
  JobSucceeded: 'JobSucceeded',
  JobRetried: 'JobRetried',
  JobDeadLettered: 'JobDeadLettered',
  JobDuration: 'JobDuration',
  QueueLag: 'QueueLag',
  DuplicateSkipped: 'DuplicateSkipped',
  OwnMessageEarly: 'OwnMessageEarly',
  DeadCopyDropped: 'DeadCopyDropped',
  LeaseExpired: 'LeaseExpired',
  LeaseLost: 'LeaseLost',
  LeaseRenewed: 'LeaseRenewed',
  OptimisticConflict: 'OptimisticConflict',
  /**
   * A job whose optimistic conflicts outlasted its in-process tries went back to the queue with the
   * conflict backoff, its attempt taken back (dimension `jobType`). Not a failure: JobRetried does not count it.
   */
  ConflictRetries: 'ConflictRetries',
  CacheHit: 'CacheHit',
  CacheMiss: 'CacheMiss',
  StoreUnavailable: 'StoreUnavailable',
  StoreLatency: 'StoreLatency',
  /** A store call abandoned at its lease-derived bound (dimension `operation`). */
  StoreTimeout: 'StoreTimeout',
  /**
   * DynamoDB throttled a leaseq item: its partition was over 1,000 WCU or 3,000 RCU a second (dimension
   * `itemKind`: job, lease, rate, slot or effect). Also counted as StoreUnavailable; the log line names
   * the key's hash (docs/observability.md).
   */
  StoreThrottled: 'StoreThrottled',
  JobsPerWorker: 'JobsPerWorker',
  /** Every record a worker processed (a receive). With JobClaimed: receives per attempt (ping-pong). */
  MessageReceived: 'MessageReceived',
  /** Every attempt started: a successful claim, or a fast-path run. */
  JobClaimed: 'JobClaimed',
  /** A fast-path attempt failed and was recorded under a lease (dimension `jobType`). */
  FastPathFallback: 'FastPathFallback',
  /** A message given back without running (own message early, contended, claim outage, deadline, FIFO). */
  HandBack: 'HandBack',
  /**
   * A job found its concurrency slot or rate permit taken and went back to the queue with a delay, no
   * attempt used (dimension `kind`: concurrency or rate).
   */
  LimitWait: 'LimitWait',
  /** A running (or retrying) job stopped because it was cancelled; its message deleted (dimension `jobType`). */
  JobCancelled: 'JobCancelled',
  /** A copy of a cancelled job (or one sent after a cancel's tombstone) dropped (dimension `jobType`). */
  CancelledCopyDropped: 'CancelledCopyDropped',
  /**
   * A message a redrive sent for an earlier life of its key, dropped unrun by the job of a later life (a
   * fresh send reset the dead key while it was in flight; dimension `jobType`).
   */
  OtherLifeDropped: 'OtherLifeDropped',
  /**
   * A message came under a job's dedupKey with another payload (dimension `jobType`): dead-lettered
   * `payload-mismatch`, or run as a new job (`onPayloadMismatch: 'new-job'`). Counted once a message.
   */
  PayloadMismatch: 'PayloadMismatch',
} as const;
export type MetricName = (typeof MetricName)[keyof typeof MetricName];
