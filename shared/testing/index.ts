// `leaseq/testing`: `runJob` runs one of your jobs in memory through the worker's pipeline, on the stores
// the worker ships (DynamoDbJobStore, DynamoDbLeaseStore, DynamoDbRateStore) over InMemoryDynamoDb, with
// fault injection at its request boundary; leaseq's own unit tests and interleaving model run on the same.
// The in-memory DynamoDB is checked against the embedded emulator request by request (the store contracts'
// differential check); run your jobs there too (docs/jobs.md, "Testing a job").

export { DynamoDbJobStore, type DynamoDbJobStoreOptions } from '../core/adapters/dynamodb-job-store.ts';
export { DynamoDbLeaseStore, type DynamoDbLeaseStoreOptions } from '../core/adapters/dynamodb-lease-store.ts';
export { DynamoDbRateStore, type DynamoDbRateStoreOptions } from '../core/adapters/dynamodb-rate-store.ts';
export type { JobStore } from '../core/contract/job-store.ts';
export type { LeaseStore, NamedLease } from '../core/contract/lease-store.ts';
export type { RateStore, RateTake } from '../core/contract/rate-store.ts';
export { keyFingerprint } from '../core/model/conflict.ts';
export { InMemoryMetrics, type MetricsSink, type MetricsSnapshot } from '../core/observe/metrics.ts';
export type { TableTally } from './in-memory-dynamodb/capacity.ts';
export {
  InMemoryDynamoDb,
  type InMemoryDynamoDbOptions,
  type LandedWrite,
} from './in-memory-dynamodb/client.ts';
export type { CancellationReason } from './in-memory-dynamodb/errors.ts';
export {
  type DelayOptions as DynamoDbDelayOptions,
  DynamoDbFaults,
  type FaultKind as DynamoDbFaultKind,
  type FaultOptions as DynamoDbFaultOptions,
  type FaultRequest as DynamoDbFaultRequest,
  type FaultTarget as DynamoDbFaultTarget,
} from './in-memory-dynamodb/faults.ts';
export type {
  PartitionCharge,
  PartitionLimitOptions,
  PartitionLimits,
  PartitionThrottle,
} from './in-memory-dynamodb/partition-limits.ts';
export {
  type IndexSchema,
  type KeyPart,
  keyPart,
  leaseqTables,
  PROBLEMS_INDEX_SCHEMA,
  type TableSchema,
} from './in-memory-dynamodb/tables.ts';
export {
  type DeadLetter,
  InMemoryQueue,
  type InMemoryQueueOptions,
  type QueuedMessage,
  type QueueOperation,
} from './in-memory-queue.ts';
export {
  type AttemptReport,
  type InjectedFailure,
  type RecordedError,
  type RunJobOptions,
  type RunJobResult,
  runJob,
  type TableRow,
} from './run-job.ts';
export { type DelayOptions, type FaultOptions, StoreFaults } from './store-faults.ts';
