// DynamoDB's limits on one write of a job (docs/jobs.md, "Limits of a write"), checked before the request
// is sent so a write the store can never take costs no request: at most 100 items per transaction, one
// operation per item, 400 KB per item, 4 MB per transaction, and only values the document client can
// send. Pure; the sizes are lower bounds (core/protocol/item-size.ts: a write they pass may still be
// refused by DynamoDB, whose refusal `storeRefusal` in store-errors.ts names the same way).

import { NumberValue } from '@aws-sdk/lib-dynamodb';
import { StoreRefusedError } from '../../errors.ts';
import type { Effect } from '../contract/job-store.ts';
import { itemBytes, MAX_ITEM_BYTES, valueBytes } from '../protocol/item-size.ts';

/** Items in one TransactWriteItems call, the job item and named-lease fences included. */
export const MAX_TRANSACTION_ITEMS = 100;
/** Bytes of all the items of one transaction (4 MB). */
export const MAX_TRANSACTION_BYTES = 4 * 1024 * 1024;

/** One write of a job: the job item's update, with the effects (and fences) it commits. */
export interface JobWrite {
  readonly operation: string;
  /** What the job item will hold of the job's own data: `{ checkpoint }`, `{ result }` or both. */
  readonly jobValues: Readonly<Record<string, unknown>>;
  /** The jobs table and the job item's key, to tell an effect on the job item itself. */
  readonly jobItem?: { readonly tableName: string; readonly key: Readonly<Record<string, unknown>> };
  readonly effects: readonly Effect[];
}

/**
 * Checks one job write against DynamoDB's limits. CPU only, linear in the size of what is written.
 * @throws StoreRefusedError naming the limit (nothing was sent).
 */
export function checkJobWrite(write: JobWrite): void {
  const { operation, effects } = write;
  const items = effects.length + 1;
  if (items > MAX_TRANSACTION_ITEMS) {
    throw new StoreRefusedError(
      'too-many-items',
      operation,
      `the job item and ${effects.length} effects and named-lease fences make ${items} items; ` +
        `a DynamoDB transaction holds at most ${MAX_TRANSACTION_ITEMS}`,
    );
  }
  const bad = badValue(write.jobValues, 'job item');
  if (bad) throw new StoreRefusedError('bad-value', operation, bad);
  const jobBytes = itemBytes(write.jobValues);
  if (jobBytes > MAX_ITEM_BYTES) {
    throw new StoreRefusedError(
      'item-too-large',
      operation,
      `the job item would hold at least ${jobBytes} bytes (checkpoint and result); a DynamoDB item holds at most ${MAX_ITEM_BYTES}`,
    );
  }
  let total = jobBytes;
  const targets = new Targets(write.jobItem);
  effects.forEach((effect, index) => {
    const what = `effect ${index}`;
    const found = effectBadValue(effect, what);
    if (found) throw new StoreRefusedError('bad-value', operation, found);
    const bytes = effectBytes(effect);
    if (bytes > MAX_ITEM_BYTES) {
      throw new StoreRefusedError(
        'item-too-large',
        operation,
        `${what} (${opName(effect)} on ${tableOf(effect)}) writes at least ${bytes} bytes; a DynamoDB item holds at most ${MAX_ITEM_BYTES}`,
      );
    }
    total += bytes;
    targets.add(effect, index);
  });
  if (total > MAX_TRANSACTION_BYTES) {
    throw new StoreRefusedError(
      'transaction-too-large',
      operation,
      `the items written add up to at least ${total} bytes; a DynamoDB transaction holds at most ${MAX_TRANSACTION_BYTES}`,
    );
  }
  const twice = targets.duplicate();
  if (twice) {
    throw new StoreRefusedError(
      'same-item-twice',
      operation,
      `${twice[0]} and ${twice[1]} write the same item; a DynamoDB transaction touches each item once`,
    );
  }
}

/** Where `value` holds something the document client cannot send (a path, no data), or undefined. */
function badValue(value: unknown, path: string): string | undefined {
  // Every write of a job passes here: a walk that builds no path strings first, then, only for a bad
  // value, the walk that names where it is.
  return isSendable(value, 0) ? undefined : badValueAt(value, path, 0);
}

/**
 * How deep DynamoDB nests values: an item's attributes are level 1, what a map or list among them holds
 * level 2, and so on (a value past it is refused: "Nesting Levels have exceeded supported limits"). The
 * walks stop there, so a value that holds itself is refused too, not walked until the stack overflows.
 */
const MAX_LEVELS = 32;

/** Whether the document client can send `value`: what {@link badValueAt} finds nothing wrong with. */
function isSendable(value: unknown, level: number): boolean {
  if (value === undefined) return true;
  if (level > MAX_LEVELS) return false;
  if (value === null) return true;
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'bigint':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'function':
    case 'symbol':
      return false;
  }
  if (value instanceof NumberValue || ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return true;
  if (Array.isArray(value) || value instanceof Set) {
    for (const element of value) if (!isSendable(element, level + 1)) return false;
    return true;
  }
  if (value instanceof Map) {
    for (const element of value.values()) if (!isSendable(element, level + 1)) return false;
    return true;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  if (Object.hasOwn(value, 'constructor')) return false;
  for (const name in value) {
    if (Object.hasOwn(value, name) && !isSendable((value as Record<string, unknown>)[name], level + 1)) {
      return false;
    }
  }
  return true;
}

/** Where `value` holds something the document client cannot send, with its path; or undefined. */
function badValueAt(value: unknown, path: string, level: number): string | undefined {
  if (value === undefined) return undefined;
  if (level > MAX_LEVELS) {
    return `${path} nests deeper than DynamoDB's ${MAX_LEVELS} levels (does a value hold itself?)`;
  }
  if (value === null) return undefined;
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'bigint':
      return undefined;
    case 'number':
      return Number.isFinite(value) ? undefined : `${path} is ${value} (DynamoDB numbers are finite)`;
    case 'function':
    case 'symbol':
      return `${path} is a ${typeof value}`;
  }
  if (value instanceof NumberValue || ArrayBuffer.isView(value) || value instanceof ArrayBuffer) {
    return undefined;
  }
  if (Array.isArray(value) || value instanceof Set) {
    let i = 0;
    for (const element of value) {
      const found = badValueAt(element, `${path}[${i++}]`, level + 1);
      if (found) return found;
    }
    return undefined;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (!(value instanceof Map) && proto !== Object.prototype && proto !== null) {
    const kind = (value as { constructor?: { name?: unknown } }).constructor?.name;
    return `${path} is a ${typeof kind === 'string' ? kind : 'class instance'} (write plain data: an ISO string or epoch number for a Date)`;
  }
  // lib-dynamodb tells a map from a class instance by its `constructor`: a field of that name is refused.
  if (!(value instanceof Map) && Object.hasOwn(value, 'constructor')) {
    return `${path} has a field named constructor, which the DynamoDB document client refuses (it reads it as a class instance): rename the field`;
  }
  const entries = value instanceof Map ? [...value.entries()] : Object.entries(value);
  for (const [name, element] of entries) {
    const found = badValueAt(element, `${path}.${String(name)}`, level + 1);
    if (found) return found;
  }
  return undefined;
}

type Op = NonNullable<Effect['Put'] | Effect['Update'] | Effect['Delete'] | Effect['ConditionCheck']>;

function opOf(effect: Effect): Op | undefined {
  return effect.Put ?? effect.Update ?? effect.Delete ?? effect.ConditionCheck;
}

function opName(effect: Effect): string {
  return effect.Put ? 'Put' : effect.Update ? 'Update' : effect.Delete ? 'Delete' : 'ConditionCheck';
}

function tableOf(effect: Effect): string {
  return String(opOf(effect)?.TableName ?? '?');
}

/**
 * What the document client would not send as written: an undefined expression value or key attribute
 * (it drops them, and DynamoDB then refuses the expression or the key), or a value it cannot marshal.
 * Undefined attributes inside an item or a map are simply left out, as in JSON.
 */
function effectBadValue(effect: Effect, what: string): string | undefined {
  const op = opOf(effect);
  if (!op) return `${what} names no operation (Put, Update, Delete or ConditionCheck)`;
  const values = op.ExpressionAttributeValues ?? {};
  for (const [name, value] of Object.entries(values)) {
    if (value === undefined) return `${what}: expression value ${name} is undefined`;
  }
  const key = 'Key' in op ? op.Key : undefined;
  for (const [name, value] of Object.entries(key ?? {})) {
    if (value === undefined) return `${what}: key attribute ${name} is undefined`;
  }
  if (effect.Put && (typeof effect.Put.Item !== 'object' || effect.Put.Item === null)) {
    return `${what}: Put has no Item`;
  }
  return (
    badValue(effect.Put?.Item, `${what}.Item`) ??
    badValue(key, `${what}.Key`) ??
    badValue(values, `${what}.ExpressionAttributeValues`)
  );
}

/**
 * A lower bound of what an effect writes: a Put's item; an Update's key and the values its SET and ADD
 * clauses write (the item it already holds is unknown here); nothing for a Delete or ConditionCheck.
 */
function effectBytes(effect: Effect): number {
  if (effect.Put) return itemBytes(effect.Put.Item ?? {});
  const update = effect.Update;
  if (!update) return 0;
  const values = update.ExpressionAttributeValues ?? {};
  let bytes = itemBytes(update.Key ?? {});
  for (const name of writtenValueNames(update.UpdateExpression ?? '')) {
    const value = values[name];
    if (value !== undefined) bytes += valueBytes(value, false);
  }
  return bytes;
}

/** The `:value` names used in an update expression's SET and ADD clauses (REMOVE and DELETE shrink). */
function writtenValueNames(expression: string): Set<string> {
  const names = new Set<string>();
  for (const clause of expression.split(/\b(?=(?:SET|REMOVE|ADD|DELETE)\b)/i)) {
    if (!/^\s*(SET|ADD)\b/i.test(clause)) continue;
    for (const match of clause.matchAll(/:[A-Za-z0-9_]+/g)) names.add(match[0]);
  }
  return names;
}

/**
 * The items a transaction touches, by table and key. A Put carries no separate key: its key is read with
 * the key attribute names learned from the other operations on its table (a Key names exactly the
 * table's key attributes); two Puts on a table no operation names a key of are left to DynamoDB.
 */
class Targets {
  readonly #keyed: { table: string; key: Readonly<Record<string, unknown>>; what: string }[] = [];
  readonly #puts: { table: string; item: Readonly<Record<string, unknown>>; what: string }[] = [];

  constructor(jobItem: JobWrite['jobItem']) {
    if (jobItem) this.#keyed.push({ table: jobItem.tableName, key: jobItem.key, what: 'the job item' });
  }

  add(effect: Effect, index: number): void {
    const what = `effect ${index}`;
    const table = tableOf(effect);
    if (effect.Put) this.#puts.push({ table, item: effect.Put.Item ?? {}, what });
    else {
      const op = opOf(effect);
      const key = op && 'Key' in op ? op.Key : undefined;
      if (key) this.#keyed.push({ table, key, what });
    }
  }

  duplicate(): [string, string] | undefined {
    // One item cannot be written twice.
    if (this.#keyed.length + this.#puts.length < 2) return undefined;
    const keyNames = new Map<string, string[]>();
    for (const { table, key } of this.#keyed) keyNames.set(table, Object.keys(key).sort());
    const seen = new Map<string, string>();
    const all = [
      ...this.#keyed.map(({ table, key, what }) => ({
        table,
        id: keyId(key, Object.keys(key).sort()),
        what,
      })),
      ...this.#puts.flatMap(({ table, item, what }) => {
        const names = keyNames.get(table);
        return names ? [{ table, id: keyId(item, names), what }] : [];
      }),
    ];
    for (const { table, id, what } of all) {
      if (id === undefined) continue;
      const target = `${table}\u0000${id}`;
      const earlier = seen.get(target);
      if (earlier) return [earlier, what];
      seen.set(target, what);
    }
    return undefined;
  }
}

/** The key attributes' values, as one comparable string; undefined when one is missing. */
function keyId(item: Readonly<Record<string, unknown>>, names: readonly string[]): string | undefined {
  const parts: unknown[] = [];
  for (const name of names) {
    const value = item[name];
    if (value === undefined) return undefined;
    parts.push(
      name,
      ArrayBuffer.isView(value)
        ? Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64')
        : value,
    );
  }
  return JSON.stringify(parts, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
}
