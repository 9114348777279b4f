// The effect applier of the in-memory job store: applies a job's effects (the DynamoDB writes that commit
// with its checkpoint or completion) to in-memory tables, all or nothing, as one TransactWriteItems:
// every effect `ctx.tables` builds, with DynamoDB's expression semantics, and the named-lease fences.

import { isDeepStrictEqual } from 'node:util';
import type { Effect } from '../core/contract/job-store.ts';
import {
  checkUnusedPlaceholders,
  parseCondition,
  parseUpdate,
  validationException,
} from './dynamodb-expressions.ts';
import { compareNumbers, isDynamoNumber, numberText } from './dynamodb-numbers.ts';

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

export { validationException };

/**
 * An item's size as DynamoDB counts it, near enough for the limit: attribute names plus values, the
 * values measured as their JSON text (a little more than DynamoDB's count, never less for strings).
 */
export function itemBytes(item: Readonly<Record<string, unknown>>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) {
    // The replacer changes only bigints and sets: a string, number, boolean or null is written as it is.
    const text =
      typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' || value === null
        ? JSON.stringify(value)
        : JSON.stringify(value, measurable);
    bytes += Buffer.byteLength(name) + Buffer.byteLength(text ?? '');
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

/** JSON.stringify replacer for sizes: a bigint as its digits (not a TypeError), a set as its elements. */
function measurable(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  return value instanceof Set ? [...value] : value;
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

interface PlannedWrite {
  readonly tableName: string;
  readonly table: Map<string, StoredRecord>;
  readonly id: string;
  readonly passes: (existing: StoredRecord | undefined) => boolean;
  /** The item after the write (undefined: deleted); absent for a condition check (nothing written). */
  readonly write?: (existing: StoredRecord | undefined) => StoredRecord | undefined;
  /** The item `write` returns is the applier's own copy, shared with nobody (a Put's structured clone). */
  readonly owned?: boolean;
}

const EFFECT_FIELDS = new Set([
  'TableName',
  'Item',
  'Key',
  'UpdateExpression',
  'ConditionExpression',
  'ExpressionAttributeNames',
  'ExpressionAttributeValues',
  'ReturnValuesOnConditionCheckFailure',
]);

/**
 * In-memory application tables that apply a job's effects as one `TransactWriteItems` applies them: every
 * operation `ctx.tables.<name>` builds (a Put, an Update with its update expression, a Delete, each with an
 * optional condition; versionedPut is a conditioned Put) and ConditionChecks, including the named-lease
 * fences of the lease stores in `options.leases`. Conditions and update expressions follow DynamoDB's
 * grammar (dynamodb-expressions.ts); anything it cannot evaluate throws a ValidationException, nothing
 * written, so a test never passes on semantics the fake only guessed.
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
    for (const write of planned) {
      const id = `${write.tableName} ${write.id}`;
      if (seen.has(id)) {
        throw validationException(
          'Transaction request cannot include multiple operations on one item ' +
            `(effects touch ${id} more than once)`,
        );
      }
      seen.add(id);
    }
    const failed = planned.findIndex((write) => !write.passes(write.table.get(write.id)));
    if (failed >= 0) return { ok: false, index: failed };
    // Every new item is computed before any is stored: an update that DynamoDB would refuse writes nothing.
    const results = planned.map((write) => write.write?.(write.table.get(write.id)));
    planned.forEach((write, i) => {
      if (!write.write) return;
      const item = results[i];
      if (item === undefined) write.table.delete(write.id);
      else write.table.set(write.id, (write.owned ? ownedAsRead(item) : asRead(item)) as StoredRecord);
    });
    return { ok: true };
  }

  /** Reads one item (a copy), by its key attributes. */
  get(tableName: string, key: StoredRecord): StoredRecord | undefined {
    const item = this.#table(tableName).get(this.#id(tableName, key));
    return item === undefined ? undefined : structuredClone(item);
  }

  /** Writes one item unconditionally (test setup, like a plain PutItem). */
  put(tableName: string, item: StoredRecord): void {
    checkSendable(item, `put to ${tableName}`);
    this.#table(tableName).set(this.#id(tableName, item), asRead(item) as StoredRecord);
  }

  /** Every item of a table (copies), in key order. */
  items(tableName: string): StoredRecord[] {
    return [...this.#table(tableName).entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, item]) => structuredClone(item));
  }

  #plan(effect: Effect, index: number): PlannedWrite {
    const where = `effect ${index}`;
    const operations = (['Put', 'Update', 'Delete', 'ConditionCheck'] as const).filter((k) => effect[k]);
    if (operations.length !== 1) {
      throw validationException(
        `${where}: an effect holds exactly one of Put, Update, Delete, ConditionCheck`,
      );
    }
    const kind = operations[0] as 'Put' | 'Update' | 'Delete' | 'ConditionCheck';
    const op = effect[kind] as Record<string, unknown> & {
      TableName?: string;
      ConditionExpression?: string;
      UpdateExpression?: string;
      ExpressionAttributeNames?: Record<string, string>;
      ExpressionAttributeValues?: Record<string, unknown>;
    };
    if (kind === 'ConditionCheck' && op.TableName !== undefined && this.#leases.has(op.TableName)) {
      return this.#planLeaseFence(effect.ConditionCheck as NonNullable<Effect['ConditionCheck']>, where);
    }
    const extra = Object.keys(op).filter((k) => !EFFECT_FIELDS.has(k));
    if (extra.length > 0)
      throw validationException(`${where}: unsupported ${kind} fields ${extra.join(', ')}`);
    const tableName = op.TableName;
    if (tableName === undefined) throw validationException(`${where}: ${kind} without TableName`);
    for (const part of ['Item', 'Key', 'ExpressionAttributeValues'] as const) {
      checkSendable(op[part], `${where}: ${kind} ${part}`);
    }
    const table = this.#table(tableName);
    const placeholders = { names: op.ExpressionAttributeNames, values: op.ExpressionAttributeValues };
    const expressions = [op.ConditionExpression, op.UpdateExpression].filter((e): e is string => !!e);
    checkUnusedPlaceholders(placeholders, expressions);
    if (kind === 'ConditionCheck' && !op.ConditionExpression) {
      throw validationException(`${where}: a ConditionCheck needs a ConditionExpression`);
    }
    const condition = op.ConditionExpression
      ? parseCondition(op.ConditionExpression, placeholders)
      : () => true;
    if (kind === 'Put') {
      const item = op.Item as StoredRecord | undefined;
      if (item === undefined) throw validationException(`${where}: Put without Item`);
      const stored = structuredClone(item);
      return {
        tableName,
        table,
        id: this.#id(tableName, item),
        passes: condition,
        write: () => stored,
        owned: true,
      };
    }
    const key = op.Key as StoredRecord | undefined;
    if (key === undefined) throw validationException(`${where}: ${kind} without Key`);
    const keyNames = this.#keys.get(tableName) ?? [];
    const extraKeys = Object.keys(key).filter((k) => !keyNames.includes(k));
    if (extraKeys.length > 0) {
      throw validationException(
        `${where}: The provided key element does not match the schema (${tableName} is keyed by ${keyNames.join(', ')}, got ${Object.keys(key).join(', ')})`,
      );
    }
    const id = this.#id(tableName, key);
    if (kind === 'ConditionCheck') return { tableName, table, id, passes: condition };
    if (kind === 'Delete') return { tableName, table, id, passes: condition, write: () => undefined };
    if (!op.UpdateExpression) throw validationException(`${where}: Update without UpdateExpression`);
    const update = parseUpdate(op.UpdateExpression, placeholders);
    return {
      tableName,
      table,
      id,
      passes: condition,
      write: (existing) => {
        // UpdateItem creates the item from its key when it is absent.
        const next = update(existing ?? structuredClone(key));
        for (const name of keyNames) {
          const [now, was] = [next[name], key[name]];
          const same =
            isDynamoNumber(now) && isDynamoNumber(was)
              ? compareNumbers(now, was) === 0
              : isDeepStrictEqual(now, was);
          if (!same) {
            throw validationException(
              `${where}: Cannot update attribute ${name}. This attribute is part of the key`,
            );
          }
        }
        return next;
      },
    };
  }

  /** A named-lease fence, exactly as the lease stores' `fence()` builds it. */
  #planLeaseFence(check: NonNullable<Effect['ConditionCheck']>, where: string): PlannedWrite {
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
      if (typeof value === 'string') return value;
      // 7 and 7n are one key to DynamoDB (N "7").
      if (isDynamoNumber(value)) return { N: numberText(value) };
      throw new Error(`item for ${tableName} lacks its key attribute ${k} (string or number)`);
    });
    return JSON.stringify(parts);
  }
}

/**
 * Throws what lib-dynamodb (as leaseq's clients configure it) throws before sending a value it cannot
 * marshal, so a job that would fail against DynamoDB fails in memory too: an empty set (DynamoDB has
 * none), NaN or Infinity, or a number past Number.MAX_SAFE_INTEGER (it would lose digits: use a bigint).
 */
function checkSendable(value: unknown, where: string): void {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`${where}: Special numeric value ${value} is not allowed`);
    if (value > Number.MAX_SAFE_INTEGER || value < Number.MIN_SAFE_INTEGER) {
      throw new Error(
        `${where}: Number ${value} is ${value > 0 ? 'greater than Number.MAX_SAFE_INTEGER' : 'lesser than Number.MIN_SAFE_INTEGER'}. Use NumberValue from @aws-sdk/lib-dynamodb (or a bigint).`,
      );
    }
  } else if (value instanceof Set) {
    if (value.size === 0) {
      throw new Error(
        `${where}: Pass a non-empty set (lib-dynamodb refuses an empty Set; DynamoDB has no empty sets)`,
      );
    }
    for (const element of value) checkSendable(element, where);
  } else if (Array.isArray(value)) {
    for (const element of value) checkSendable(element, where);
  } else if (typeof value === 'object' && value !== null && !(value instanceof Uint8Array)) {
    for (const element of Object.values(value)) checkSendable(element, where);
  }
}

/** A copy of `value` as a read returns it: lib-dynamodb reads an N that fits a JS number as a number. */
function asRead(value: unknown): unknown {
  if (typeof value === 'bigint') {
    return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER)
      ? Number(value)
      : value;
  }
  if (value instanceof Set) return new Set([...value].map(asRead));
  if (Array.isArray(value)) return value.map(asRead);
  if (value instanceof Uint8Array) return new Uint8Array(value);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, asRead(v)]));
  }
  return value;
}

/**
 * {@link asRead} of a value the applier owns (its own structured clone, referenced by nothing else): the
 * same result, but its plain objects and arrays are converted where they are instead of copied.
 */
function ownedAsRead(value: unknown): unknown {
  if (Array.isArray(value)) {
    value.forEach((element: unknown, i) => {
      const read = ownedAsRead(element);
      if (read !== element) value[i] = read;
    });
    return value;
  }
  if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
    const record = value as Record<string, unknown>;
    for (const name of Object.keys(record)) {
      const element = record[name];
      const read = ownedAsRead(element);
      // defineProperty, not assignment: an own `__proto__` key stays a key.
      if (read !== element) {
        Object.defineProperty(record, name, {
          value: read,
          writable: true,
          enumerable: true,
          configurable: true,
        });
      }
    }
    return record;
  }
  return asRead(value);
}
