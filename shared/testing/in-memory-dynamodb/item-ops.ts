// One item's write or read on the in-memory tables: the condition tested on the item as it is, the item
// the write leaves (an update's expression applied, key attributes unchanged, at most 400 KB). A write is
// planned first (nothing changes) and then applied, so a transaction plans all its actions before it
// applies any.

import { validationException } from '../dynamodb-errors.ts';
import {
  checkUnusedPlaceholders,
  type Item,
  type Placeholders,
  parseCondition,
  parseUpdate,
} from '../dynamodb-expressions.ts';
import type { Table } from './tables.ts';
import { copy, storedBytes, updatedBytes } from './values.ts';

/** Bytes in one item (400 KB), attribute names included. */
export const MAX_ITEM_BYTES = 400 * 1024;

/** One write as the document client's input names it (a transaction's action or a single write). */
export interface WriteInput {
  readonly TableName?: string;
  readonly Key?: Item;
  readonly Item?: Item;
  readonly UpdateExpression?: string;
  readonly ConditionExpression?: string;
  readonly ExpressionAttributeNames?: Record<string, string>;
  readonly ExpressionAttributeValues?: Record<string, unknown>;
}

export type WriteKind = 'put' | 'update' | 'delete' | 'check';

/** A planned write: what the item is now, what it will be (undefined: no item), where. */
export interface PlannedWrite {
  readonly table: Table;
  readonly key: string;
  readonly old: Item | undefined;
  /** The item the write leaves; `undefined` for a delete (and a check, which writes nothing). */
  readonly next: Item | undefined;
  readonly kind: WriteKind;
}

/** A condition the item failed: the item it was tested on. */
export class ConditionRefusal {
  constructor(readonly old: Item | undefined) {}
}

/**
 * Plans one write. Throws a ValidationException (named so) for a request DynamoDB refuses, and a
 * {@link ConditionRefusal} when the condition fails on the item as it is.
 */
export function planWrite(table: Table, kind: WriteKind, input: WriteInput): PlannedWrite {
  const placeholders: Placeholders = {
    names: input.ExpressionAttributeNames,
    values: input.ExpressionAttributeValues,
  };
  const expressions: string[] = [];
  if (input.ConditionExpression !== undefined) expressions.push(input.ConditionExpression);
  if (kind === 'update') {
    if (input.UpdateExpression === undefined) {
      throw validationException('Invalid UpdateExpression: The expression can not be empty');
    }
    expressions.push(input.UpdateExpression);
  }
  if (kind === 'check' && input.ConditionExpression === undefined) {
    throw validationException('The ConditionExpression of a ConditionCheck can not be empty');
  }
  if (input.ExpressionAttributeNames || input.ExpressionAttributeValues) {
    checkUnusedPlaceholders(placeholders, expressions);
  }
  let key: string;
  let keyItem: Item | undefined;
  if (kind === 'put') {
    if (input.Item === undefined) throw validationException('Item is required for a Put');
    key = table.keyOfItem(input.Item);
  } else {
    key = table.keyOf(input.Key);
    keyItem = input.Key;
  }
  const old = table.items.get(key);
  const condition =
    input.ConditionExpression === undefined
      ? undefined
      : parseCondition(input.ConditionExpression, placeholders);
  const update = kind === 'update' ? parseUpdate(input.UpdateExpression as string, placeholders) : undefined;
  if (condition !== undefined && !condition(old)) throw new ConditionRefusal(old);
  let next: Item | undefined;
  if (kind === 'put') next = copy(input.Item as Item);
  else if (update !== undefined) {
    next = update(old ?? copy(keyItem as Item));
    checkKeyKept(table, next, keyItem as Item);
    dropUndefined(next);
  }
  if (
    next !== undefined &&
    (old && kind === 'update' ? updatedBytes(old, next) : storedBytes(next)) > MAX_ITEM_BYTES
  ) {
    throw validationException(
      kind === 'update'
        ? 'Item size to update has exceeded the maximum allowed size'
        : 'Item size has exceeded the maximum allowed size',
    );
  }
  return { table, key, old, next, kind };
}

/** Applies a planned write. */
export function applyWrite(write: PlannedWrite): void {
  if (write.kind === 'check') return;
  if (write.next === undefined) write.table.items.delete(write.key);
  else write.table.items.set(write.key, write.next);
}

/** DynamoDB refuses an update that changes a key attribute. */
function checkKeyKept(table: Table, next: Item, key: Item): void {
  for (const name of table.keyNames) {
    const v = next[name];
    if (v === key[name]) continue;
    if (
      v instanceof Uint8Array &&
      key[name] instanceof Uint8Array &&
      Buffer.compare(v, key[name] as Uint8Array) === 0
    )
      continue;
    throw validationException(
      `One or more parameter values were invalid: Cannot update attribute ${name}. This attribute is part of the key`,
    );
  }
}

/** An update may set a value the document client would drop (undefined): it never reaches the table. */
function dropUndefined(item: Item): void {
  for (const name in item) if (item[name] === undefined) delete item[name];
}
