// The public API of `leaseq` (the package's main entry point). Everything not exported here, from
// `leaseq/producer`, `leaseq/cdk` or `leaseq/testing` is internal and may change in any release.

export {
  ENVELOPE_SHAPE,
  ENVELOPE_VERSION,
  type JobEnvelope,
  parseEnvelope,
} from './core/contract/envelope.ts';
export type { Checkpoint, JobItem } from './core/contract/job-item.ts';
export type { Effect } from './core/contract/job-store.ts';
export type { PlainBodies, PlainJobContext, PlainKey, PlainUnwrap } from './core/contract/plain-body.ts';
export { JobStatus } from './core/contract/statuses.ts';
export { versionedPut } from './core/decisions/optimistic.ts';
export type { LeaseHandle } from './core/leases/named-lease.ts';
export { type Condition, EffectTable, type Item } from './core/model/effect-table.ts';
export type { JobLeaseOptions, StepOutcome, TableHandles } from './core/model/job-context.ts';
export { JobContext } from './core/model/job-context.ts';
export type { AnyJobDefinition, JobDefinition, JobOutcome } from './core/model/job-definition.ts';
export type { JobRegistryLike, JobSetOptions, JobSource } from './core/model/registry.ts';
export { JobRegistry } from './core/model/registry.ts';
export type { PayloadSchema } from './core/model/standard-schema.ts';
export {
  defineTable,
  type KeyAttribute,
  type TableDefinition,
  type TableMap,
  type TableSpec,
  tableEnvVar,
} from './core/model/table.ts';
export { MetricName } from './core/observe/metric-names.ts';
export {
  ConfigError,
  DeadlineError,
  InvalidEnvelopeError,
  JobCancelledError,
  LeaseBusyError,
  LeaseLostError,
  LeaseqError,
  NamedLeaseLostError,
  OptimisticConflictError,
  PermanentJobError,
  StoreUnavailableError,
  TransientJobError,
} from './errors.ts';
export { type DefinedJob, defineJob, defineJobs } from './jobs/define-job.ts';
export { type WorkerConfig, workerConfigFromEnv } from './worker/config.ts';
export { createWorkerHandler, type WorkerHandler, type WorkerHandlerOptions } from './worker/handler.ts';
