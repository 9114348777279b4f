// An in-memory DynamoDB behind the document client's `send()`: leaseq's real DynamoDB adapters run on it
// unchanged (they take a DynamoDBDocumentClient, and lib-dynamodb's paginators check for one), for unit
// tests, `runJob`, the interleaving model and the CPU benchmark. It serves exactly the commands leaseq
// sends and never makes a network call; anything else throws naming the command.

import { DynamoDBClient, ResourceNotFoundException } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  ScanCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { checkUnusedPlaceholders, type Item } from '../dynamodb-expressions.ts';
import { capacity, returnValues } from './answers.ts';
import { batchGet } from './batch-get.ts';
import { consumed, readUnits, type TableTally, Tally, writeUnits } from './capacity.ts';
import { asSdkError, conditionFailed, metadata, partitionThrottled, transactionThrottled } from './errors.ts';
import { afterLatency, DynamoDbFaults } from './faults.ts';
import { applyWrite, ConditionRefusal, type PlannedWrite, planWrite, type WriteKind } from './item-ops.ts';
import { checkValues } from './marshalling.ts';
import {
  type PartitionCharge,
  type PartitionLimitOptions,
  PartitionLimits,
  partitionOf,
  queryCharge,
  read,
  refusalCharge,
  throttlingReason,
  writeCharges,
} from './partition-limits.ts';
import { projectionPaths, projectPaths } from './projection.ts';
import { query, type ReadInput, scan } from './query-scan.ts';
import { Table, type TableSchema } from './tables.ts';
import { type TransactItem, transactWrite } from './transactions.ts';
import { copy, storedBytes } from './values.ts';

/** Options of {@link InMemoryDynamoDb}. */
export interface InMemoryDynamoDbOptions {
  /** The tables (e.g. `leaseqTables({ jobs: 'app-jobs', leases: 'app-leases' })`). */
  readonly tables: readonly TableSchema[];
  /** The clock TTL expiry reads (epoch ms). @default Date.now */
  readonly now?: () => number;
  /**
   * Each answer arrives this many ms after the request was applied (a timer), as a round trip takes time.
   * The adapters tell a retried write of their own from another by its millisecond timestamp: two writes
   * of one lease within the same millisecond (never on AWS, easily in memory) look like one retried.
   * @default 0
   */
  readonly latencyMs?: number;
  /**
   * Told of every write that landed (a single write or a whole transaction), as it lands: before its
   * answer, which a fault may still lose or delay. For a test's books (what committed), never to change
   * the items. @default none
   */
  readonly onWrite?: (write: LandedWrite) => void;
  /**
   * DynamoDB's per-partition throughput limit (1,000 write and 3,000 read units a second per partition
   * key value of a table or index, by a clock of its own or `now`): a request over it is throttled as
   * DynamoDB throttles a hot key. Scans are not limited. @default no limit
   */
  readonly partitionLimits?: PartitionLimitOptions | true;
}

/** A write that landed, as {@link InMemoryDynamoDbOptions.onWrite} is told of it. */
export interface LandedWrite {
  /** The store operation the adapter named (`leaseqOperation`), if any. */
  readonly operation: string | undefined;
  /** `PutCommand`, `UpdateCommand`, `DeleteCommand` or `TransactWriteCommand`. */
  readonly command: string;
  /** The command's input, as sent (a transaction's actions are the caller's own objects). */
  readonly input: Readonly<Record<string, unknown>>;
  /** Per item written (a transaction's in action order, condition checks included): before and after. */
  readonly writes: readonly PlannedWrite[];
}

/** The send options leaseq's adapters pass (HttpCallOptions in store-errors.ts). */
interface SendOptions {
  readonly abortSignal?: AbortSignal;
  readonly leaseqOperation?: string;
}

let sharedLowLevel: DynamoDBClient | undefined;

/** One low-level client per process, never used to send: the document client's constructor needs one. */
function lowLevel(): DynamoDBClient {
  sharedLowLevel ??= new DynamoDBClient({
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:9',
    credentials: { accessKeyId: 'in-memory', secretAccessKey: 'in-memory' },
  });
  return sharedLowLevel;
}

type Input = Record<string, unknown> & {
  readonly TableName?: string;
  readonly ReturnConsumedCapacity?: string;
};

/** An in-memory DynamoDB as a DynamoDBDocumentClient. */
export class InMemoryDynamoDb extends DynamoDBDocumentClient {
  readonly #tables = new Map<string, Table>();
  readonly #now: () => number;
  readonly #tally = new Tally();
  readonly #latencyMs: number;
  readonly #onWrite: ((write: LandedWrite) => void) | undefined;
  /** The request as the caller sent it, by the copy a pending fault rule made of it. */
  readonly #sent = new WeakMap<object, Input>();
  /** Injected failures and delays at the request boundary. */
  readonly faults = new DynamoDbFaults();
  /** The per-partition limit's buckets and throttles (`throttles()`), when it was asked for. */
  readonly partitions: PartitionLimits | undefined;

  constructor(options: InMemoryDynamoDbOptions) {
    super(lowLevel(), { marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false } });
    for (const schema of options.tables) this.#tables.set(schema.name, new Table(schema));
    this.#now = options.now ?? Date.now;
    this.#latencyMs = options.latencyMs ?? 0;
    this.#onWrite = options.onWrite;
    const limits = options.partitionLimits;
    this.partitions =
      limits === undefined ? undefined : new PartitionLimits(limits === true ? {} : limits, this.#now);
  }

  /** Takes a request's units from its partitions, or throws as DynamoDB throttles a hot key. */
  #admit(charges: () => PartitionCharge[]): void {
    const over = this.partitions?.take(charges());
    if (over) throw partitionThrottled(throttlingReason(over));
  }

  /** Requests and capacity so far, by table name. */
  tally(): Record<string, TableTally> {
    return this.#tally.snapshot();
  }

  resetTally(): void {
    this.#tally.reset();
  }

  /**
   * TTL's sweep: deletes the items whose TTL attribute (epoch seconds) is at or before the clock's now.
   * Until then an expired item is served, as on AWS. Returns how many it deleted.
   */
  expire(): number {
    const nowSeconds = this.#now() / 1000;
    let deleted = 0;
    for (const table of this.#tables.values()) {
      const ttl = table.schema.ttlAttribute;
      if (ttl === undefined) continue;
      for (const [key, item] of table.items) {
        const at = item[ttl];
        if (typeof at === 'number' && at <= nowSeconds) {
          table.items.delete(key);
          deleted += 1;
        }
      }
    }
    return deleted;
  }

  /** Deletes an item outside any request (no faults, no tally): a test's own tidy-up. */
  remove(tableName: string, key: Item): boolean {
    const table = this.#table(tableName);
    return table.items.delete(table.keyOf(key));
  }

  /**
   * A copy of the item under `key`, outside any request (no faults, no tally). `copy: false`: the stored
   * item itself, to read and never change (a write stores a new object; a harness peeking often).
   */
  item(tableName: string, key: Item, options: { readonly copy?: boolean } = {}): Item | undefined {
    const table = this.#table(tableName);
    const item = table.items.get(table.keyOf(key));
    return item === undefined || options.copy === false ? item : copy(item);
  }

  /** A copy of every item of a table, in key order (for assertions), outside any request. */
  items(tableName: string): Item[] {
    return [...this.#table(tableName).items.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, item]) => copy(item));
  }

  /** Stores an item outside any request (no condition, faults or tally): a test's starting rows. */
  seed(tableName: string, item: Item): void {
    const table = this.#table(tableName);
    table.items.set(table.keyOfItem(item), copy(item));
  }

  /** Serves one command as DynamoDB would, under the injected faults. */
  // biome-ignore lint/suspicious/noExplicitAny: the document client's overloads of send
  override send(command: any, options?: any): Promise<any> {
    const http = (typeof options === 'object' && options !== null ? options : {}) as SendOptions;
    const sent = (command?.input ?? {}) as Input;
    const name: string = command?.constructor?.name ?? typeof command;
    let body: () => unknown;
    // The request as sent: a caller changing its objects afterwards (a delayed request) changes nothing.
    // Without a fault rule a request is applied before send() returns, so only then is a copy needed.
    const input = this.faults.pending > 0 ? copy(sent) : sent;
    // onWrite is told of the caller's own objects (a test matches them by identity), not of the copy.
    if (input !== sent) this.#sent.set(input, sent);
    try {
      body = this.#handler(command, input, name, http.leaseqOperation);
      checkValues(sent);
    } catch (error) {
      return Promise.reject(error);
    }
    const request = () => ({
      operation: http.leaseqOperation,
      command: name,
      tables: tablesOf(command, input),
      actions:
        command instanceof TransactWriteCommand ? ((input.TransactItems as unknown[]) ?? []).length : 0,
      ...(command instanceof BatchGetCommand ? { batchKeys: batchKeysOf(input) } : {}),
    });
    const answer = this.faults.run(request, body, http.abortSignal);
    if (this.#latencyMs === 0) return answer;
    const ms = this.#latencyMs;
    const later = (settle: () => unknown) => afterLatency(ms, http.abortSignal, settle);
    return answer.then(
      (value) => later(() => value),
      (error: unknown) =>
        later(() => {
          throw error;
        }),
    );
  }

  #handler(command: unknown, input: Input, name: string, operation: string | undefined): () => unknown {
    if (command instanceof GetCommand) return () => this.#get(input);
    if (command instanceof PutCommand) return () => this.#write('put', input, name, operation);
    if (command instanceof UpdateCommand) return () => this.#write('update', input, name, operation);
    if (command instanceof DeleteCommand) return () => this.#write('delete', input, name, operation);
    if (command instanceof TransactWriteCommand) return () => this.#transact(input, operation);
    if (command instanceof BatchGetCommand) return () => this.#batchGet(input);
    if (command instanceof QueryCommand) return () => this.#read(input, 'QueryCommand');
    if (command instanceof ScanCommand) return () => this.#read(input, 'ScanCommand');
    throw new Error(
      `in-memory DynamoDB: ${name} is not supported (it serves lib-dynamodb's Get, Put, Update, Delete, TransactWrite, BatchGet, Query and Scan commands)`,
    );
  }

  #table(name: string | undefined): Table {
    const table = name === undefined ? undefined : this.#tables.get(name);
    if (!table) {
      throw new ResourceNotFoundException({
        message: `Requested resource not found: Table: ${name} not found`,
        $metadata: metadata(400),
      });
    }
    return table;
  }

  #get(input: Input): unknown {
    const table = this.#table(input.TableName);
    const item = table.items.get(table.keyOf(input.Key as Item));
    const consistent = input.ConsistentRead === true;
    const units = { read: readUnits(item ? storedBytes(item) : 0, consistent) };
    this.#admit(() => [
      {
        table: table.schema.name,
        partition: partitionOf(table, input.Key as Item) as string,
        ...read(units),
      },
    ]);
    this.#tally.add(table.schema.name, 'GetCommand', units);
    const projection = input.ProjectionExpression as string | undefined;
    const names = { names: input.ExpressionAttributeNames as Record<string, string> | undefined };
    if (names.names !== undefined)
      checkUnusedPlaceholders(names, projection === undefined ? [] : [projection]);
    return {
      $metadata: metadata(),
      ...(item
        ? { Item: projection ? projectPaths(item, projectionPaths(projection, names)) : copy(item) }
        : {}),
      ...capacity(input, table.schema.name, units),
    };
  }

  #write(kind: WriteKind, input: Input, command: string, operation: string | undefined): unknown {
    const table = this.#table(input.TableName);
    let planned: ReturnType<typeof planWrite>;
    try {
      planned = planWrite(table, kind, input);
    } catch (error) {
      if (error instanceof ConditionRefusal) this.#admit(() => refusalCharge(table, input));
      this.#tally.add(table.schema.name, command, { write: 1 });
      if (error instanceof ConditionRefusal) {
        throw conditionFailed(error.old, input.ReturnValuesOnConditionCheckFailure === 'ALL_OLD');
      }
      throw asSdkError(error);
    }
    this.#admit(() => writeCharges([planned], false));
    applyWrite(planned);
    this.#onWrite?.({ operation, command, input: this.#sent.get(input) ?? input, writes: [planned] });
    const { old, next } = planned;
    const units = {
      write: writeUnits(Math.max(old ? storedBytes(old) : 0, next ? storedBytes(next) : 0), false),
    };
    this.#tally.add(table.schema.name, command, units);
    const returned = returnValues(input.ReturnValues as string | undefined, kind, old, next, input);
    return {
      $metadata: metadata(),
      ...(returned ? { Attributes: returned } : {}),
      ...capacity(input, table.schema.name, units),
    };
  }

  #transact(input: Input, operation: string | undefined): unknown {
    const items = input.TransactItems as TransactItem[] | undefined;
    let done: ReturnType<typeof transactWrite>;
    try {
      done = transactWrite(
        items,
        (name) => this.#table(name),
        (writes) => {
          const over = this.partitions?.take(writeCharges(writes, true));
          if (over) throw transactionThrottled(writes.length, over.action ?? 0);
        },
      );
    } catch (error) {
      for (const table of new Set((items ?? []).map((i) => tableOfAction(i)))) {
        if (table && this.#tables.has(table)) this.#tally.add(table, 'TransactWriteCommand', { write: 2 });
      }
      throw asSdkError(error);
    }
    this.#onWrite?.({
      operation,
      command: 'TransactWriteCommand',
      input: this.#sent.get(input) ?? input,
      writes: done.writes,
    });
    const byTable = new Map<string, number>();
    for (const w of done.writes) {
      const bytes = Math.max(w.old ? storedBytes(w.old) : 0, w.next ? storedBytes(w.next) : 0);
      const units = w.kind === 'check' ? readUnits(bytes, true, true) : writeUnits(bytes, true);
      byTable.set(w.table.schema.name, (byTable.get(w.table.schema.name) ?? 0) + units);
    }
    for (const [table, units] of byTable) this.#tally.add(table, 'TransactWriteCommand', { write: units });
    const mode = input.ReturnConsumedCapacity;
    return {
      $metadata: metadata(),
      ...(mode && mode !== 'NONE'
        ? { ConsumedCapacity: [...byTable].map(([table, units]) => consumed(table, { write: units }, mode)) }
        : {}),
    };
  }

  #batchGet(input: Input): unknown {
    return batchGet(input, (name) => this.#table(name), this.#tally, this.partitions);
  }

  #read(input: Input, command: 'QueryCommand' | 'ScanCommand'): unknown {
    const table = this.#table(input.TableName);
    let page: ReturnType<typeof query>;
    try {
      page = command === 'QueryCommand' ? query(table, input as ReadInput) : scan(table, input as ReadInput);
    } catch (error) {
      throw asSdkError(error);
    }
    const units = { read: readUnits(page.bytes, input.ConsistentRead === true) };
    if (page.partition) this.#admit(() => queryCharge(table, input, page.partition as Item, units));
    this.#tally.add(table.schema.name, command, units);
    const { bytes: _bytes, partition: _partition, ...answer } = page;
    if (input.Select === 'COUNT') delete (answer as { Items?: unknown }).Items;
    return {
      $metadata: metadata(),
      ...answer,
      ...capacity(input, table.schema.name, units, input.IndexName as string | undefined),
    };
  }
}

function tableOfAction(item: TransactItem): string | undefined {
  return (item.Put ?? item.Update ?? item.Delete ?? item.ConditionCheck)?.TableName;
}

function tablesOf(command: unknown, input: Input): string[] {
  if (command instanceof TransactWriteCommand) {
    return [
      ...new Set(
        ((input.TransactItems as TransactItem[]) ?? []).map(tableOfAction).filter((t) => t !== undefined),
      ),
    ];
  }
  if (command instanceof BatchGetCommand) return Object.keys((input.RequestItems as object) ?? {});
  return input.TableName === undefined ? [] : [input.TableName];
}

/** A BatchGet's keys by table, as the fault rules see them. */
function batchKeysOf(input: Input): Record<string, Record<string, unknown>[]> {
  const requests = (input.RequestItems ?? {}) as Record<string, { Keys?: Record<string, unknown>[] }>;
  return Object.fromEntries(Object.entries(requests).map(([table, r]) => [table, r.Keys ?? []]));
}
