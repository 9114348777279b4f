// A job item's size as DynamoDB counts it (docs/jobs.md, "Limits of a write"): lower bounds of what a
// write leaves in the item, so what they refuse DynamoDB refuses too, and the upper bound of a value that
// the give-up's sizing of its error text needs (give-up.ts). The checks of a whole write before it is sent
// are in core/adapters/dynamodb-limits.ts.

import { NumberValueImpl as NumberValue } from '@aws-sdk/util-dynamodb';
import { StoreRefusedError } from '../../errors.ts';
import type { Checkpoint } from '../contract/job-item.ts';

/** Bytes in one item (400 KB), attribute names included. */
export const MAX_ITEM_BYTES = 400 * 1024;

/**
 * Throws DynamoDB's refusal of a write that leaves `item` over 400 KB (a lower bound of its size, so
 * what this refuses DynamoDB refuses too): for the in-memory fakes, which keep whole items.
 */
export function checkItemSize(item: Readonly<Record<string, unknown>>, operation: string): void {
  const bytes = itemBytes(item);
  if (bytes > MAX_ITEM_BYTES) {
    throw new StoreRefusedError(
      'item-too-large',
      operation,
      `the job item would hold at least ${bytes} bytes; a DynamoDB item holds at most ${MAX_ITEM_BYTES}`,
    );
  }
}

/** An upper bound of the bytes a checkpoint adds to its item, its name included. */
export function checkpointUpperBytes(checkpoint: Checkpoint): number {
  return utf8('checkpoint') + valueBytes(checkpoint, true);
}

/** A lower bound of an item's size, DynamoDB's way: names and values, UTF-8. */
export function itemBytes(item: Readonly<Record<string, unknown>>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) {
    if (value !== undefined) bytes += utf8(name) + valueBytes(value, false);
  }
  return bytes;
}

/**
 * A value's size as DynamoDB counts it: `upper` false gives a lower bound (numbers by their significant
 * digits only, no per-element byte), true an upper bound (21 bytes a number, 1 byte per element).
 */
export function valueBytes(value: unknown, upper: boolean): number {
  if (typeof value === 'string') return utf8(value);
  if (typeof value === 'number') return upper ? 21 : numberLowerBytes(value);
  if (typeof value === 'bigint') return numberBytes(String(value), upper);
  if (typeof value === 'boolean' || value === null) return 1;
  if (value instanceof NumberValue) return numberBytes(value.value, upper);
  if (ArrayBuffer.isView(value)) return value.byteLength;
  if (value instanceof ArrayBuffer) return value.byteLength;
  const perElement = upper ? 1 : 0;
  if (Array.isArray(value) || value instanceof Set) {
    let bytes = 3;
    for (const element of value) {
      if (element !== undefined) bytes += valueBytes(element, upper) + perElement;
    }
    return bytes;
  }
  if (typeof value === 'object') {
    let bytes = 3;
    const entries = value instanceof Map ? value.entries() : Object.entries(value);
    for (const [name, element] of entries) {
      if (element !== undefined) bytes += utf8(String(name)) + valueBytes(element, upper) + perElement;
    }
    return bytes;
  }
  return 0;
}

/** {@link numberBytes} of a JS number, lower bound: a safe integer's digits counted without its text. */
function numberLowerBytes(value: number): number {
  if (!Number.isSafeInteger(value)) return numberBytes(String(value), false);
  let n = Math.abs(value);
  if (n === 0) return 0;
  while (n % 10 === 0) n /= 10;
  let digits = 0;
  for (; n >= 1; n = Math.floor(n / 10)) digits++;
  return Math.ceil(digits / 2);
}

function numberBytes(text: string, upper: boolean): number {
  if (upper) return 21;
  const digits = text
    .replace(/e.*$/i, '')
    .replace(/[^0-9]/g, '')
    .replace(/^0+/, '')
    .replace(/0+$/, '');
  return Math.ceil(digits.length / 2);
}

export function utf8(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}
