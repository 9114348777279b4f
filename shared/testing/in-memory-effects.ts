// The effect applier of the in-memory job store: applies a job's effects (the DynamoDB writes that commit
// with its checkpoint or completion) to in-memory tables, all or nothing, understanding exactly the
// effects leaseq builds (versionedPut, named-lease fences) and refusing any other.

import { isDeepStrictEqual } from 'node:util';
import type { Effect } from '../core/contract/job-store.ts';

/** Outcome of applying a group of effects: all of them, or (`ok: false`) none. */
export type EffectOutcome = { readonly ok: true } | { readonly ok: false; readonly index: number };

/**
 * Applies a job's effects for the in-memory job store, which cannot evaluate DynamoDB expressions itself.
 * `apply` must be synchronous and all-or-nothing: it checks every effect's condition, then writes all of
 * them, or writes nothing and names the first effect whose condition failed. It throws for an effect it
 * cannot interpret (nothing written).
 */
export interface EffectApplier {
  apply(effects: readonly Effect[]): EffectOutcome;
}

/** The most items one `TransactWriteItems` may carry (DynamoDB's limit). */
export const DYNAMODB_MAX_TRANSACTION_ITEMS = 100;
/** The most bytes one DynamoDB item may hold (attribute names and values). */
export const DYNAMODB_MAX_ITEM_BYTES = 400 * 1024;

/** An error named like the one the SDK throws when DynamoDB refuses a request as invalid (HTTP 400). */
export function validationException(message: string): Error {
  const error = new Error(message);
  error.name = 'ValidationException';
  return error;
}

/**
 * An item's size as DynamoDB counts it, near enough for the limit: attribute names plus values, the
 * values measured as their JSON text (a little more than DynamoDB's count, never less for strings).
 */
export function itemBytes(item: Readonly<Record<string, unknown>>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) {
    bytes += Buffer.byteLength(name) + Buffer.byteLength(JSON.stringify(value) ?? '');
  }
  return bytes;
}

/**
 * Throws the ValidationException DynamoDB answers a transaction that breaks its limits with, before any
 * condition is evaluated: more than {@link DYNAMODB_MAX_TRANSACTION_ITEMS} items (the `extraItems` the
 * store adds, such as the job item, included), or a Put item above {@link DYNAMODB_MAX_ITEM_BYTES}.
 * (Two operations on one item are refused by `InMemoryEffectApplier.apply`.)
 */
export function checkTransactionLimits(effects: readonly Effect[], extraItems = 0): void {
  const count = effects.length + extraItems;
  if (count > DYNAMODB_MAX_TRANSACTION_ITEMS) {
    throw validationException(
      `1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must ` +
        `have length less than or equal to ${DYNAMODB_MAX_TRANSACTION_ITEMS} (got ${count})`,
    );
  }
  for (const effect of effects) {
    const item = effect.Put?.Item as Record<string, unknown> | undefined;
    if (item !== undefined && itemBytes(item) > DYNAMODB_MAX_ITEM_BYTES) {
      throw validationException('Item size has exceeded the maximum allowed size');
    }
  }
}

/** A store of named leases whose fences (ConditionChecks) the applier can evaluate. */
export interface NamedLeaseHolder {
  /** The table name its fences carry. */
  readonly tableName: string;
  /** True while `owner` holds `key` with `token`. */
  holds(key: string, owner: string, token: number): boolean;
}

export interface InMemoryEffectApplierOptions {
  /** Key attribute names per table, partition key first: `{ ledger: ['account'] }`. */
  readonly tables: Readonly<Record<string, readonly string[]>>;
  /**
   * In-memory lease stores whose `fence()` ConditionChecks may join a commit (jobs using `ctx.withLease`).
   * @default none
   */
  readonly leases?: readonly NamedLeaseHolder[];
}

type StoredRecord = Record<string, unknown>;

interface PlannedPut {
  readonly tableName: string;
  readonly table: Map<string, StoredRecord>;
  readonly id: string;
  /** The item to write; undefined for a condition check (nothing written). */
  readonly item: StoredRecord | undefined;
  readonly passes: (existing: StoredRecord | undefined) => boolean;
}

/**
 * An in-memory application-state store that understands exactly the effects `versionedPut`
 * (optimistic.ts) builds: a `Put` conditioned on `attribute_not_exists(#k)` (first write) or `#v = :seen`
 * (optimistic version). Any other effect throws, so a test never passes on semantics the fake only guessed.
 */
export class InMemoryEffectApplier implements EffectApplier {
  readonly #keys: ReadonlyMap<string, readonly string[]>;
  readonly #tables = new Map<string, Map<string, StoredRecord>>();
  readonly #leases: ReadonlyMap<string, NamedLeaseHolder>;

  constructor(options: InMemoryEffectApplierOptions) {
    this.#keys = new Map(Object.entries(options.tables));
    for (const [name, keys] of this.#keys) {
      if (keys.length < 1 || keys.length > 2) {
        throw new RangeError(`table ${name} needs 1 or 2 key attributes, got ${JSON.stringify(keys)}`);
      }
      this.#tables.set(name, new Map());
    }
    this.#leases = new Map((options.leases ?? []).map((holder) => [holder.tableName, holder]));
  }

  apply(effects: readonly Effect[]): EffectOutcome {
    const planned = effects.map((effect, index) => this.#plan(effect, index));
    const seen = new Set<string>();
    for (const put of planned) {
      const id = `${put.tableName} ${put.id}`;
      if (seen.has(id)) {
        throw validationException(
          'Transaction request cannot include multiple operations on one item ' +
            `(effects touch ${id} more than once)`,
        );
      }
      seen.add(id);
    }
    const failed = planned.findIndex((put) => !put.passes(put.table.get(put.id)));
    if (failed >= 0) return { ok: false, index: failed };
    for (const put of planned) if (put.item !== undefined) put.table.set(put.id, structuredClone(put.item));
    return { ok: true };
  }

  /** Reads one item (a copy), by its key attributes. */
  get(tableName: string, key: StoredRecord): StoredRecord | undefined {
    const item = this.#table(tableName).get(this.#id(tableName, key));
    return item === undefined ? undefined : structuredClone(item);
  }

  /** Writes one item unconditionally (test setup, like a plain PutItem). */
  put(tableName: string, item: StoredRecord): void {
    this.#table(tableName).set(this.#id(tableName, item), structuredClone(item));
  }

  #plan(effect: Effect, index: number): PlannedPut {
    const where = `effect ${index}`;
    if (effect.ConditionCheck && !effect.Put && !effect.Update && !effect.Delete) {
      return this.#planLeaseFence(effect.ConditionCheck, where);
    }
    const put = effect.Put;
    if (!put || effect.Update || effect.Delete || effect.ConditionCheck) {
      throw new Error(
        `${where}: InMemoryEffectApplier only understands versionedPut effects (a Put), got ${Object.keys(effect).join(', ')}`,
      );
    }
    const allowed = new Set([
      'TableName',
      'Item',
      'ConditionExpression',
      'ExpressionAttributeNames',
      'ExpressionAttributeValues',
    ]);
    const extra = Object.keys(put).filter((k) => !allowed.has(k));
    if (extra.length > 0) throw new Error(`${where}: unsupported Put fields ${extra.join(', ')}`);
    const tableName = put.TableName;
    if (tableName === undefined) throw new Error(`${where}: Put without TableName`);
    const item = put.Item as StoredRecord | undefined;
    if (item === undefined) throw new Error(`${where}: Put without Item`);
    const names = put.ExpressionAttributeNames ?? {};
    const values = (put.ExpressionAttributeValues ?? {}) as StoredRecord;
    const table = this.#table(tableName);
    const id = this.#id(tableName, item);
    if (put.ConditionExpression === 'attribute_not_exists(#k)' && onlyKeys(names, ['#k'])) {
      const attribute = names['#k'] ?? '';
      if (!onlyKeys(values, [])) throw new Error(`${where}: unexpected values for attribute_not_exists`);
      return { tableName, table, id, item, passes: (existing) => existing?.[attribute] === undefined };
    }
    if (put.ConditionExpression === '#v = :seen' && onlyKeys(names, ['#v']) && onlyKeys(values, [':seen'])) {
      const attribute = names['#v'] ?? '';
      const seenVersion = values[':seen'];
      return {
        tableName,
        table,
        id,
        item,
        passes: (existing) => existing !== undefined && isDeepStrictEqual(existing[attribute], seenVersion),
      };
    }
    throw new Error(
      `${where}: unsupported condition ${JSON.stringify(put.ConditionExpression)} with names ` +
        `${JSON.stringify(names)}; expected versionedPut's 'attribute_not_exists(#k)' or '#v = :seen'`,
    );
  }

  /** A named-lease fence, exactly as the lease stores' `fence()` builds it. */
  #planLeaseFence(check: NonNullable<Effect['ConditionCheck']>, where: string): PlannedPut {
    const holder = check.TableName === undefined ? undefined : this.#leases.get(check.TableName);
    const key = (check.Key as StoredRecord | undefined)?.leaseKey;
    const values = (check.ExpressionAttributeValues ?? {}) as StoredRecord;
    const owner = values[':owner'];
    const token = values[':token'];
    if (
      !holder ||
      check.ConditionExpression !== '#owner = :owner AND #token = :token' ||
      typeof key !== 'string' ||
      typeof owner !== 'string' ||
      typeof token !== 'number'
    ) {
      throw new Error(
        `${where}: InMemoryEffectApplier only understands named-lease fences of a lease store it was given ` +
          `(options.leases), got a ConditionCheck on ${check.TableName}`,
      );
    }
    return {
      tableName: check.TableName ?? '',
      table: new Map(),
      id: JSON.stringify([key]),
      item: undefined,
      passes: () => holder.holds(key, owner, token),
    };
  }

  #table(tableName: string): Map<string, StoredRecord> {
    const table = this.#tables.get(tableName);
    if (!table) {
      throw new Error(
        `InMemoryEffectApplier has no table ${tableName} (known: ${[...this.#tables.keys()].join(', ') || 'none'})`,
      );
    }
    return table;
  }

  #id(tableName: string, item: StoredRecord): string {
    const keys = this.#keys.get(tableName) ?? [];
    const parts = keys.map((k) => {
      const value = item[k];
      if (typeof value !== 'string' && typeof value !== 'number') {
        throw new Error(`item for ${tableName} lacks its key attribute ${k} (string or number)`);
      }
      return value;
    });
    return JSON.stringify(parts);
  }
}

function onlyKeys(record: object, expected: readonly string[]): boolean {
  const keys = Object.keys(record);
  return keys.length === expected.length && expected.every((k) => keys.includes(k));
}
