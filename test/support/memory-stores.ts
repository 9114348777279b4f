import {
  DynamoDbJobStore,
  type DynamoDbJobStoreOptions,
} from '../../shared/core/adapters/dynamodb-job-store.ts';
import { DynamoDbLeaseStore } from '../../shared/core/adapters/dynamodb-lease-store.ts';
import { DynamoDbRateStore } from '../../shared/core/adapters/dynamodb-rate-store.ts';
import { defineTable, type TableDefinition } from '../../shared/core/model/table.ts';
import { EffectTables } from '../../shared/jobs/effect-tables.ts';
import type { Item } from '../../shared/testing/dynamodb-expressions.ts';
import { InMemoryDynamoDb } from '../../shared/testing/in-memory-dynamodb/client.ts';
import { leaseqTables } from '../../shared/testing/in-memory-dynamodb/tables.ts';

// The stores a worker ships (DynamoDbJobStore, DynamoDbLeaseStore, DynamoDbRateStore, EffectTables) on one
// InMemoryDynamoDb, for unit tests: what they exercise is the code the worker runs. Faults go in at the
// request boundary (`doc.faults.failNext('claim', ...)`, by the operation names guardStore hands over).

export const JOBS_TABLE = 'jobs';
export const LEASES_TABLE = 'leases';

export interface MemoryStoresOptions<S extends DynamoDbJobStore = DynamoDbJobStore> {
  /** The clock of `doc.expire()` (TTL's sweep). @default Date.now */
  readonly now?: () => number;
  /** Application tables by physical name: a definition, or the name of its (string) partition key. */
  readonly tables?: Readonly<Record<string, TableDefinition | string>>;
  /** Each answer after a timer of this many ms (see InMemoryDynamoDbOptions.latencyMs). @default 0 */
  readonly latencyMs?: number;
  /** The job store's option of the same name. */
  readonly dedupTtlSeconds?: number;
  /** Builds the job store (a test's subclass of the adapter). @default new DynamoDbJobStore(options) */
  readonly jobStore?: (options: DynamoDbJobStoreOptions) => S;
}

export interface MemoryStores<S extends DynamoDbJobStore = DynamoDbJobStore> {
  readonly doc: InMemoryDynamoDb;
  readonly store: S;
  readonly leases: DynamoDbLeaseStore;
  readonly rates: DynamoDbRateStore;
  /** The application tables a job reads, each by its own name. */
  readonly tables: EffectTables;
  /** The stored item with this key, read outside any request (no faults, no tally). */
  row(table: string, key: Item): Item | undefined;
}

export function memoryStores<S extends DynamoDbJobStore = DynamoDbJobStore>(
  options: MemoryStoresOptions<S> = {},
): MemoryStores<S> {
  const app = Object.fromEntries(
    Object.entries(options.tables ?? {}).map(([name, def]) => [
      name,
      typeof def === 'string' ? defineTable(name, { partitionKey: def }) : def,
    ]),
  );
  const doc = new InMemoryDynamoDb({
    tables: leaseqTables({ jobs: JOBS_TABLE, leases: LEASES_TABLE, app }),
    ...(options.now ? { now: options.now } : {}),
    ...(options.latencyMs !== undefined ? { latencyMs: options.latencyMs } : {}),
  });
  const storeOptions: DynamoDbJobStoreOptions = {
    client: doc,
    tableName: JOBS_TABLE,
    ...(options.dedupTtlSeconds !== undefined ? { dedupTtlSeconds: options.dedupTtlSeconds } : {}),
  };
  return {
    doc,
    store: options.jobStore ? options.jobStore(storeOptions) : (new DynamoDbJobStore(storeOptions) as S),
    leases: new DynamoDbLeaseStore({ client: doc, tableName: LEASES_TABLE }),
    rates: new DynamoDbRateStore({ client: doc, tableName: LEASES_TABLE }),
    tables: new EffectTables(doc, Object.fromEntries(Object.keys(app).map((name) => [name, name]))),
    row: (table, key) =>
      doc.items(table).find((item) => Object.entries(key).every(([k, v]) => item[k] === v)),
  };
}

export type { DynamoDbJobStore, DynamoDbLeaseStore, DynamoDbRateStore };
