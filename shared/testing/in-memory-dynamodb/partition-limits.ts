// DynamoDB's per-partition throughput limit, opt-in on the in-memory DynamoDB: each partition key value
// of a table, and of each global secondary index, serves at most 1,000 write units and 3,000 read units a
// second, in on-demand and provisioned mode alike (DynamoDB's "key range throughput exceeded" throttling:
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/throttling-key-range-limit-exceeded-mitigation.html).
// One key's items share one partition; an item cannot be split. Each partition is a token bucket refilled
// at the limit, holding `burstSeconds` of it: DynamoDB's adaptive capacity (moving a hot key to a
// partition of its own) and its burst capacity are not modelled, so a key never gets more than the limit
// and this small bucket. A request over it is refused before anything is written, and consumes nothing.

import type { Item } from '../dynamodb-expressions.ts';
import type { PlannedWrite } from './item-ops.ts';
import type { IndexSchema, Table } from './tables.ts';
import { storedBytes } from './values.ts';

/** Options of the per-partition limit ({@link InMemoryDynamoDbOptions.partitionLimits}). */
export interface PartitionLimitOptions {
  /** Write units a second one partition key value serves. @default 1000 */
  readonly writeUnitsPerSecond?: number;
  /** Read units a second one partition key value serves. @default 3000 */
  readonly readUnitsPerSecond?: number;
  /**
   * Seconds of the limit a partition may spend at once after being idle (its bucket's size); a request
   * larger than the whole bucket passes when the bucket is full. @default 0.2
   */
  readonly burstSeconds?: number;
  /** The clock the buckets refill by (epoch ms). @default the client's `now` */
  readonly now?: () => number;
}

/** One partition's use of one kind of unit, as a request asks for it. */
export interface PartitionCharge {
  readonly table: string;
  /** The global secondary index, when the partition is one of an index's. */
  readonly index?: string;
  /** The partition key value, as text. */
  readonly partition: string;
  readonly kind: 'read' | 'write';
  readonly units: number;
  /** The transaction action it is charged for (its index in TransactItems). */
  readonly action?: number;
}

/** A partition that refused requests, and how many. */
export interface PartitionThrottle {
  readonly table: string;
  readonly index?: string;
  readonly partition: string;
  readonly kind: 'read' | 'write';
  readonly requests: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** Buckets kept before full (idle) ones are dropped. */
const PRUNE_AT = 50_000;

/** The token buckets of every partition one client served. */
export class PartitionLimits {
  readonly #rate: { readonly read: number; readonly write: number };
  readonly #burstSeconds: number;
  readonly #now: () => number;
  readonly #buckets = new Map<string, Bucket>();
  readonly #throttles = new Map<string, PartitionThrottle>();

  constructor(options: PartitionLimitOptions, now: () => number) {
    const write = options.writeUnitsPerSecond ?? 1000;
    const read = options.readUnitsPerSecond ?? 3000;
    const burst = options.burstSeconds ?? 0.2;
    for (const [name, value] of [
      ['writeUnitsPerSecond', write],
      ['readUnitsPerSecond', read],
      ['burstSeconds', burst],
    ] as const) {
      if (!(Number.isFinite(value) && value > 0)) {
        throw new RangeError(`partitionLimits.${name} must be a positive number, got ${value}`);
      }
    }
    this.#rate = { read, write };
    this.#burstSeconds = burst;
    this.#now = options.now ?? now;
  }

  /**
   * Takes every charge of one request, or none: the first charge its partition cannot serve now is
   * returned (and counted as a throttle), nothing taken.
   */
  take(charges: readonly PartitionCharge[]): PartitionCharge | undefined {
    if (charges.length === 0) return undefined;
    const now = this.#now();
    const buckets = charges.map((c) => this.#bucket(c, now));
    const sums = new Map<Bucket, number>();
    for (const [i, c] of charges.entries()) {
      const b = buckets[i] as Bucket;
      sums.set(b, (sums.get(b) ?? 0) + c.units);
    }
    for (const [i, c] of charges.entries()) {
      const b = buckets[i] as Bucket;
      const size = this.#rate[c.kind] * this.#burstSeconds;
      if (b.tokens < Math.min(sums.get(b) ?? 0, size)) {
        this.#count(c);
        return c;
      }
    }
    for (const [b, units] of sums) b.tokens -= units;
    return undefined;
  }

  /** Partitions that refused requests so far, the busiest first. */
  throttles(): PartitionThrottle[] {
    return [...this.#throttles.values()].map((t) => ({ ...t })).sort((a, b) => b.requests - a.requests);
  }

  /** Forgets the throttles counted so far (the buckets keep their levels). */
  resetThrottles(): void {
    this.#throttles.clear();
  }

  #bucket(c: PartitionCharge, now: number): Bucket {
    const id = idOf(c);
    const size = this.#rate[c.kind] * this.#burstSeconds;
    let b = this.#buckets.get(id);
    if (b === undefined) {
      if (this.#buckets.size >= PRUNE_AT) this.#prune(now);
      b = { tokens: size, at: now };
      this.#buckets.set(id, b);
      return b;
    }
    const elapsed = Math.max(0, now - b.at) / 1000;
    b.tokens = Math.min(size, b.tokens + elapsed * this.#rate[c.kind]);
    b.at = Math.max(b.at, now);
    return b;
  }

  #prune(now: number): void {
    for (const [id, b] of this.#buckets) {
      const kind = id.startsWith('r') ? 'read' : 'write';
      const size = this.#rate[kind] * this.#burstSeconds;
      if (b.tokens + (Math.max(0, now - b.at) / 1000) * this.#rate[kind] >= size) this.#buckets.delete(id);
    }
  }

  #count(c: PartitionCharge): void {
    const id = idOf(c);
    const seen = this.#throttles.get(id);
    this.#throttles.set(id, {
      table: c.table,
      ...(c.index === undefined ? {} : { index: c.index }),
      partition: c.partition,
      kind: c.kind,
      requests: (seen?.requests ?? 0) + 1,
    });
  }
}

function idOf(c: PartitionCharge): string {
  return `${c.kind === 'read' ? 'r' : 'w'}\u0001${c.table}\u0001${c.index ?? ''}\u0001${c.partition}`;
}

/** The partition key value of an item or key of `table` (or of `index`), as text; undefined if absent. */
export function partitionOf(table: Table, item: Item, index?: IndexSchema): string | undefined {
  const part = index ? index.partitionKey : table.schema.partitionKey;
  const v = item[part.name];
  if (v === undefined) return undefined;
  return v instanceof Uint8Array ? Buffer.from(v).toString('base64') : String(v);
}

/**
 * The write charges of planned writes: each item's partition (the larger of its old and new size, twice
 * in a transaction), and each index partition it leaves or enters. An index entry is charged 1 unit
 * (leaseq's indexes project a few small attributes) or, projecting ALL, the item's size. A condition
 * check reads its item: a read charge.
 */
export function writeCharges(writes: readonly PlannedWrite[], transactional: boolean): PartitionCharge[] {
  const out: PartitionCharge[] = [];
  for (const [action, w] of writes.entries()) {
    const table = w.table.schema.name;
    const some = (w.next ?? w.old) as Item | undefined;
    const partition = some ? partitionOf(w.table, some) : undefined;
    if (partition === undefined) continue;
    const bytes = Math.max(w.old ? storedBytes(w.old) : 0, w.next ? storedBytes(w.next) : 0);
    const units = Math.max(1, Math.ceil(bytes / 1024)) * (transactional ? 2 : 1);
    if (w.kind === 'check') {
      out.push({ table, partition, kind: 'read', units: Math.ceil(bytes / 4096) * 2 || 2, action });
      continue;
    }
    out.push({ table, partition, kind: 'write', units, action });
    for (const index of w.table.schema.indexes ?? []) {
      const before = w.old ? partitionOf(w.table, w.old, index) : undefined;
      const after = w.next ? partitionOf(w.table, w.next, index) : undefined;
      const entry = index.projection === 'ALL' || index.projection === undefined ? units : 1;
      for (const p of new Set([before, after])) {
        if (p === undefined) continue;
        out.push({ table, index: index.name, partition: p, kind: 'write', units: entry, action });
      }
    }
  }
  return out;
}

/** A refused condition's charge: the write unit it is billed, on its item's partition. */
export function refusalCharge(table: Table, input: Readonly<Record<string, unknown>>) {
  const partition = partitionOf(table, (input.Key ?? input.Item) as Item) as string;
  return [{ table: table.schema.name, partition, kind: 'write' as const, units: 1 }];
}

/** DynamoDB's throttling reason for a charge (`TableWriteKeyRangeThroughputExceeded`, ...). */
export function throttlingReason(c: PartitionCharge): { reason: string; resource: string } {
  const kind = c.kind === 'read' ? 'Read' : 'Write';
  const resource = `arn:aws:dynamodb:us-east-1:000000000000:table/${c.table}${c.index ? `/index/${c.index}` : ''}`;
  return { reason: `${c.index ? 'Index' : 'Table'}${kind}KeyRangeThroughputExceeded`, resource };
}

/** A read charge's kind and units. */
export function read(units: { readonly read: number }): { kind: 'read'; units: number } {
  return { kind: 'read', units: units.read };
}

/** A query's read charge, on the partition of an item it matched (one matching none is not charged). */
export function queryCharge(
  table: Table,
  input: Readonly<Record<string, unknown>>,
  item: Item,
  units: { read: number },
): PartitionCharge[] {
  const index = table.schema.indexes?.find((i) => i.name === input.IndexName);
  const partition = partitionOf(table, item, index);
  if (partition === undefined) return [];
  return [{ table: table.schema.name, ...(index ? { index: index.name } : {}), partition, ...read(units) }];
}
