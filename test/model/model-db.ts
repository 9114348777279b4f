import { DynamoDbJobStore } from '../../shared/core/adapters/dynamodb-job-store.ts';
import { DynamoDbLeaseStore } from '../../shared/core/adapters/dynamodb-lease-store.ts';
import { DynamoDbRateStore } from '../../shared/core/adapters/dynamodb-rate-store.ts';
import type { JobItem } from '../../shared/core/contract/job-item.ts';
import type { Effect } from '../../shared/core/contract/job-store.ts';
import type { LeaseItem } from '../../shared/core/contract/lease-store.ts';
import { rateKeyOfShard } from '../../shared/core/decisions/rate-shards.ts';
import { defineTable } from '../../shared/core/model/table.ts';
import { EffectTables } from '../../shared/jobs/effect-tables.ts';
import { InMemoryDynamoDb, type LandedWrite } from '../../shared/testing/in-memory-dynamodb/client.ts';
import { leaseqTables } from '../../shared/testing/in-memory-dynamodb/tables.ts';

// The interleaving model's DynamoDB: one in-memory DynamoDB per schedule (shared/testing/in-memory-dynamodb)
// under the adapters that ship (DynamoDbJobStore, DynamoDbLeaseStore, DynamoDbRateStore) and the jobs'
// effect tables, so the conditions, updates and refusals the model proves are the ones a worker sends.
// Faults are injected at its request boundary (`db.faults`, by the operation names the adapters hand the
// SDK); what committed is read from the writes that landed (`onWrite`), never from the stores' insides.

export const JOBS_TABLE = 'model-jobs';
export const LEASES_TABLE = 'model-leases';
/** The application table the model's jobs credit (ledger rows by account). */
export const LEDGER = 'ledger';
export const LEDGER_TABLE = defineTable(LEDGER, { partitionKey: 'account' });

/** What the model learns from each write that landed. */
export interface ModelDbHooks {
  /** A transaction that carried effects landed: `effects` are the caller's objects, in order. */
  committed(effects: readonly Effect[]): void;
  /** A rate permit was logged at `at` (a take's write landed, answered or not). */
  granted(key: string, at: number): void;
}

/** One schedule's DynamoDB, the stores on it, and the model's reads of it outside any request. */
export class ModelDb {
  readonly db: InMemoryDynamoDb;
  readonly store: DynamoDbJobStore;
  readonly leases: DynamoDbLeaseStore;
  readonly rates: DynamoDbRateStore;
  readonly tables: EffectTables;

  /**
   * `rateShards`: the shards of a rate limit (the default shards only limits far above the model's, so a
   * schedule may shard its small ones to check the shards together never grant over the limit).
   */
  constructor(
    hooks: ModelDbHooks,
    options: { readonly rateShards?: (limit: number) => number; readonly random?: () => number } = {},
  ) {
    this.db = new InMemoryDynamoDb({
      tables: leaseqTables({ jobs: JOBS_TABLE, leases: LEASES_TABLE, app: { [LEDGER]: LEDGER_TABLE } }),
      onWrite: (write) => landed(write, hooks),
    });
    this.store = new DynamoDbJobStore({ client: this.db, tableName: JOBS_TABLE });
    this.leases = new DynamoDbLeaseStore({ client: this.db, tableName: LEASES_TABLE });
    this.rates = new DynamoDbRateStore({
      client: this.db,
      tableName: LEASES_TABLE,
      ...(options.rateShards ? { shards: options.rateShards } : {}),
      ...(options.random ? { random: options.random } : {}),
    });
    this.tables = new EffectTables(this.db, { [LEDGER]: LEDGER });
  }

  /** The job item as stored (the stored object: to read, never to change). */
  peek(dedupKey: string): JobItem | undefined {
    return this.db.item(JOBS_TABLE, { dedupKey }, { copy: false }) as JobItem | undefined;
  }

  /** The named lease (or slot) as stored (a copy). */
  peekLease(leaseKey: string): LeaseItem | undefined {
    return this.db.item(LEASES_TABLE, { leaseKey }) as LeaseItem | undefined;
  }

  /** A ledger row as stored (a copy). */
  ledgerRow(account: string): { balance?: number; version?: number } | undefined {
    return this.db.item(LEDGER, { account }) as { balance?: number; version?: number } | undefined;
  }

  /** Deletes a job item outside any request (a self-test's broken store). */
  deleteJob(dedupKey: string): void {
    this.db.remove(JOBS_TABLE, { dedupKey });
  }
}

function landed(write: LandedWrite, hooks: ModelDbHooks): void {
  if (write.command === 'TransactWriteCommand') {
    // The job store's commits: the job item's update first, then the effects as the worker built them.
    const actions = (write.input.TransactItems ?? []) as readonly Effect[];
    if (actions.length > 1) hooks.committed(actions.slice(1));
    return;
  }
  if (write.operation !== 'rate-take') return;
  // The permit a take logged: the stamp its write added to the window's grants.
  const [one] = write.writes;
  const shard = one?.next?.leaseKey;
  if (typeof shard !== 'string') return;
  // A shard's grants count against the limit they share: the check is on the whole limit.
  const key = rateKeyOfShard(shard);
  const before = new Map<number, number>();
  for (const at of grantsOf(one?.old)) before.set(at, (before.get(at) ?? 0) + 1);
  for (const at of grantsOf(one?.next)) {
    const n = before.get(at) ?? 0;
    if (n > 0) before.set(at, n - 1);
    else hooks.granted(key, at);
  }
}

function grantsOf(item: Record<string, unknown> | undefined): number[] {
  const g = item?.g;
  return Array.isArray(g) ? g.filter((t): t is number => typeof t === 'number') : [];
}
