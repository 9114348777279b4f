// The in-memory DynamoDB of `leaseq/testing`: a DynamoDBDocumentClient whose `send()` serves leaseq's
// commands from memory, so the real DynamoDB adapters run on it.

export type { TableTally } from './capacity.ts';
export { InMemoryDynamoDb, type InMemoryDynamoDbOptions } from './client.ts';
export type { CancellationReason } from './errors.ts';
export {
  type DelayOptions,
  DynamoDbFaults,
  type FaultKind,
  type FaultOptions,
  type FaultRequest,
  type FaultTarget,
} from './faults.ts';
export {
  type IndexSchema,
  type KeyPart,
  keyPart,
  leaseqTables,
  PROBLEMS_INDEX_SCHEMA,
  type TableSchema,
} from './tables.ts';
