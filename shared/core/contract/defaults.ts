/**
 * leaseq's defaults, written once. The processor's settings (pipeline/settings.ts), the job context, the
 * worker's environment, the local runner and the CDK construct all read them from here, so the lease a
 * deployment documents is the lease its workers take.
 */
export const DEFAULTS = {
  /** Job lease length (ms); the heartbeat renews it every third of it. */
  leaseMs: 30_000,
  /** Claims that ran the job before it is dead-lettered. */
  maxAttempts: 5,
  /** In-process tries of an optimistic write before the job is given back with a delay. */
  optimisticTries: 3,
  /** A named lease's length (ms), when `ctx.withLease` is not told. */
  namedLeaseMs: 15_000,
} as const;
