// The public API of `leaseq` (the package's main entry point). Everything not exported here, from
// `leaseq/producer`, `leaseq/cdk` or `leaseq/testing` is internal and may change in any release.

export { ENVELOPE_SHAPE, ENVELOPE_VERSION, type JobEnvelope, parseEnvelope } from './core/envelope.ts';
export {
  ConfigError,
  DeadlineError,
  InvalidEnvelopeError,
  LeaseBusyError,
  LeaseLostError,
  LeaseqError,
  NamedLeaseLostError,
  OptimisticConflictError,
  PermanentJobError,
  StoreUnavailableError,
  TransientJobError,
} from './core/errors.ts';
export type { JobLeaseOptions, StepOutcome, TableHandles } from './core/job-context.ts';
export { JobContext } from './core/job-context.ts';
export type { Checkpoint, JobItem } from './core/job-item.ts';
export type { Effect } from './core/job-store.ts';
export { versionedPut } from './core/optimistic.ts';
export type {
  AnyJobDefinition,
  JobDefinition,
  JobOutcome,
  JobRegistryLike,
  JobSource,
  TableMap,
} from './core/registry.ts';
export { JobRegistry } from './core/registry.ts';
export { JobStatus, MetricName } from './core/statuses.ts';
export type { LeaseHandle } from './core/with-lease.ts';
export { defineJob, defineJobs } from './jobs/define-job.ts';
export { type Condition, EffectTable, type Item } from './jobs/effect-table.ts';
export type { PayloadSchema } from './jobs/standard-schema.ts';
export {
  defineTable,
  type KeyAttribute,
  type TableDefinition,
  type TableSpec,
  tableEnvVar,
} from './jobs/table.ts';
export { type WorkerConfig, workerConfigFromEnv } from './worker/config.ts';
export { createWorkerHandler, type WorkerHandler, type WorkerHandlerOptions } from './worker/handler.ts';
