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
  updatePaths,
} from '../dynamodb-expressions.ts';
import type { Table } from './tables.ts';
import { copy, storedBytes, typedName, updatedBytes } from './values.ts';

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
 * An update DynamoDB refused while applying it to the item (a missing operand, a wrong type, a bad
 * document path): a ValidationException alone, a `ValidationError` reason in a transaction.
 */
export function isApplyRefusal(error: unknown): boolean {
  return error instanceof Error && (error as { applying?: boolean }).applying === true;
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
    keyItem = copy(input.Key);
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
    try {
      next = update(old ?? copy(keyItem as Item));
    } catch (error) {
      if (error instanceof Error && error.name === 'ValidationException') {
        Object.assign(error, { applying: true });
      }
      throw error;
    }
    checkKeyKept(table, updatePaths(input.UpdateExpression as string, placeholders));
    dropUndefined(next);
  }
  if (next !== undefined) checkIndexKeys(table, next);
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

/** DynamoDB refuses an update that names a key attribute, even to write the value it has. */
function checkKeyKept(table: Table, paths: readonly (readonly unknown[])[]): void {
  for (const path of paths) {
    const name = path[0];
    if (typeof name !== 'string' || !table.keyNames.includes(name)) continue;
    throw validationException(
      `One or more parameter values were invalid: Cannot update attribute ${name}. This attribute is part of the key`,
    );
  }
}

/** DynamoDB refuses an item whose index key attribute has another type than the index's, or is empty. */
function checkIndexKeys(table: Table, item: Item): void {
  for (const index of table.schema.indexes ?? []) {
    for (const part of index.sortKey ? [index.partitionKey, index.sortKey] : [index.partitionKey]) {
      const v = item[part.name];
      if (v === undefined) continue;
      const type = typedName(v);
      if (type !== part.type) {
        throw validationException(
          `One or more parameter values were invalid: Type mismatch for Index Key ${part.name} Expected: ${part.type} Actual: ${type} IndexName: ${index.name}`,
        );
      }
      if ((type === 'S' && v === '') || (type === 'B' && (v as Uint8Array).length === 0)) {
        throw validationException(
          `One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty ${type === 'S' ? 'string' : 'binary'} value. IndexName: ${index.name}, IndexKey: ${part.name}`,
        );
      }
    }
  }
}

/** An update may set a value the document client would drop (undefined): it never reaches the table. */
function dropUndefined(item: Item): void {
  for (const name in item) if (item[name] === undefined) delete item[name];
}
