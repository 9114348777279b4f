// Item values of the in-memory DynamoDB: copies (so no answer aliases a stored item, and what a caller
// keeps of its request cannot change the table), sizes as DynamoDB counts them, and projections.

import { NumberValue } from '@aws-sdk/lib-dynamodb';
import type { Item } from '../dynamodb-expressions.ts';

/**
 * A copy of a document value, without `undefined` members (the document client's
 * `removeUndefinedValues`, which leaseq's clients set): plain objects, arrays, Sets and bytes are copied,
 * scalars are shared.
 */
export function copy<T>(value: T): T {
  if (typeof value === 'bigint') return asRead(value) as T;
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (const v of value) if (v !== undefined) out.push(copy(v));
    return out as T;
  }
  if (value instanceof Set) return new Set([...value].map(asRead)) as T;
  if (value instanceof Uint8Array) return new Uint8Array(value) as T;
  if (value instanceof NumberValue) return value;
  const out: Item = {};
  for (const key in value) {
    const v = (value as Item)[key];
    if (v !== undefined) out[key] = copy(v);
  }
  return out as T;
}

/** A number as a read returns it: lib-dynamodb reads an N that fits a JS number as a number. */
function asRead(value: unknown): unknown {
  return typeof value === 'bigint' &&
    value <= BigInt(Number.MAX_SAFE_INTEGER) &&
    value >= BigInt(Number.MIN_SAFE_INTEGER)
    ? Number(value)
    : value;
}

const STORED_BYTES = new WeakMap<Item, number>();

/**
 * {@link itemBytes} of an item a table holds or is about to store, kept with it: a stored item is never
 * changed (every write stores a new object), so its size is counted once, not on every request.
 */
export function storedBytes(item: Item): number {
  let bytes = STORED_BYTES.get(item);
  if (bytes === undefined) {
    bytes = itemBytes(item);
    STORED_BYTES.set(item, bytes);
  }
  return bytes;
}

/**
 * {@link storedBytes} of `next`, an update of the stored `old` that shares every attribute it left as it
 * was (the update copies on write): only the attributes it changed are counted again.
 */
export function updatedBytes(old: Item, next: Item): number {
  let bytes = STORED_BYTES.get(next);
  if (bytes !== undefined) return bytes;
  bytes = storedBytes(old);
  for (const key in old) {
    const v = old[key];
    if (v !== undefined && next[key] !== v) bytes -= nameBytes(key) + valueBytes(v);
  }
  for (const key in next) {
    const v = next[key];
    if (v !== undefined && old[key] !== v) bytes += nameBytes(key) + valueBytes(v);
  }
  STORED_BYTES.set(next, bytes);
  return bytes;
}

/** An item's size in bytes as DynamoDB counts it: names and values (UTF-8), numbers by their digits. */
export function itemBytes(item: Item): number {
  let bytes = 0;
  for (const key in item) {
    const v = item[key];
    if (v !== undefined) bytes += nameBytes(key) + valueBytes(v);
  }
  return bytes;
}

/** UTF-8 bytes of attribute names, which repeat from item to item. */
const NAME_BYTES = new Map<string, number>();

function nameBytes(name: string): number {
  let bytes = NAME_BYTES.get(name);
  if (bytes === undefined) {
    bytes = Buffer.byteLength(name);
    if (NAME_BYTES.size >= 10_000) NAME_BYTES.clear();
    NAME_BYTES.set(name, bytes);
  }
  return bytes;
}

function valueBytes(v: unknown): number {
  if (typeof v === 'string') return Buffer.byteLength(v);
  if (typeof v === 'number' && Number.isSafeInteger(v)) return integerBytes(v);
  if (typeof v === 'number' || typeof v === 'bigint') return numberBytes(String(v));
  if (v instanceof NumberValue) return numberBytes(v.value);
  if (typeof v === 'boolean' || v === null) return 1;
  if (v instanceof Uint8Array) return v.byteLength;
  if (v instanceof Set) {
    let bytes = 0;
    for (const e of v) bytes += valueBytes(e);
    return bytes;
  }
  if (Array.isArray(v)) {
    let bytes = 3;
    for (const e of v) bytes += 1 + valueBytes(e);
    return bytes;
  }
  if (typeof v === 'object') {
    let bytes = 3;
    for (const [key, e] of Object.entries(v as Item)) {
      if (e !== undefined) bytes += 1 + Buffer.byteLength(key) + valueBytes(e);
    }
    return bytes;
  }
  return 0;
}

/** {@link numberBytes} of a safe integer (its text has no exponent or point), without building it. */
function integerBytes(v: number): number {
  let n = Math.abs(v);
  // Trailing zeros are not significant (1000000000 is one digit), as in numberBytes.
  while (n >= 10 && n % 10 === 0) n /= 10;
  let digits = 1;
  for (; n >= 10; n = Math.floor(n / 10)) digits += 1;
  return Math.ceil(digits / 2) + 1;
}

/** DynamoDB: one byte per two significant digits (leading and trailing zeros trimmed), plus one. */
function numberBytes(text: string): number {
  const digits = text
    .replace(/^-/, '')
    .replace(/e.*$/i, '')
    .replace('.', '')
    .replace(/^0+/, '')
    .replace(/0+$/, '');
  return Math.ceil(Math.max(digits.length, 1) / 2) + 1;
}

/** The top-level attributes `names` of an item (a ProjectionExpression's, or an index's projection). */
export function project(item: Item, names: readonly string[]): Item {
  const out: Item = {};
  for (const name of names) if (item[name] !== undefined) out[name] = copy(item[name]);
  return out;
}

/**
 * The top-level attributes an update's paths name, of `from` (UPDATED_OLD: the old item, UPDATED_NEW: the
 * new one), written or not: DynamoDB returns an attribute SET to the value it had too.
 */
export function updatedAttributes(
  paths: readonly (readonly (string | number)[])[],
  from: Item,
): Item | undefined {
  const out: Item = {};
  let any = false;
  for (const path of paths) {
    const name = path[0] as string;
    if (from[name] !== undefined && !(name in out)) {
      out[name] = copy(from[name]);
      any = true;
    }
  }
  return any ? out : undefined;
}

/** The DynamoDB type name of a document value. */
export function typedName(v: unknown): string {
  if (typeof v === 'string') return 'S';
  if (typeof v === 'number' || typeof v === 'bigint') return 'N';
  if (typeof v === 'boolean') return 'BOOL';
  if (v === null) return 'NULL';
  if (v instanceof Uint8Array) return 'B';
  if (Array.isArray(v)) return 'L';
  if (v instanceof Set) {
    const first = v.values().next().value;
    return typeof first === 'string' ? 'SS' : first instanceof Uint8Array ? 'BS' : 'NS';
  }
  return 'M';
}
