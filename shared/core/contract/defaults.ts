/**
 * leaseq's defaults, written once. The processor's settings (pipeline/settings.ts), the job context, the
 * worker's environment, the local runner and the CDK construct all read them from here, so the lease a
 * deployment documents is the lease its workers take.
 */
export const DEFAULTS = {
  /** Job lease length (ms); the heartbeat renews it every third of it. */
  leaseMs: 30_000,
  /**
   * The shortest job lease (ms), checked by the worker's config, the processor's settings and the CDK
   * construct alike, and the shortest lease the processor starts a job under when a deadline caps it.
   * Below it a third of the lease (the heartbeat) leaves too little room for one store round trip.
   */
  minLeaseMs: 1000,
  /**
   * How long before a Lambda invocation's deadline every lease ends (ms), so a job's release or commit
   * and its message's give-back land inside the invocation. With `minLeaseMs` it sets the shortest
   * invocation timeout under which a job can start (`minInvocationTimeoutSeconds`).
   */
  deadlineMarginMs: 3000,
  /** Records of one batch run at once (`LEASEQ_BATCH_CONCURRENCY`). */
  batchConcurrency: 10,
  /** Claims that ran the job before it is dead-lettered. */
  maxAttempts: 5,
  /**
   * Attempts a job item may have refunded (store outages, renewals that failed): past them an outage's
   * attempt counts, so no job retries forever. Well below the queue's redrive margin (10 receives).
   */
  maxRefunds: 3,
  /**
   * Optimistic conflicts (another writer changed a row first) a job may give back before it is
   * dead-lettered `max-conflicts`. A conflict uses no attempt; this bounds a job that never gets through.
   */
  maxConflicts: 20,
  /** In-process tries of an optimistic write before the job is given back with a delay. */
  optimisticTries: 3,
  /** A named lease's length (ms), when `ctx.withLease` is not told. */
  namedLeaseMs: 15_000,
} as const;
