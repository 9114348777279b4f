// Query (a table or a global secondary index) and Scan on the in-memory tables, with DynamoDB's
// pagination: `Limit` bounds the items read (before the filter), `LastEvaluatedKey` names the last one
// read when more may follow, `ExclusiveStartKey` resumes after it.

import { validationException } from '../dynamodb-errors.ts';
import { compareStrings } from '../dynamodb-expression-eval.ts';
import {
  checkUnusedPlaceholders,
  conditionTree,
  type Item,
  type Placeholders,
  parseCondition,
} from '../dynamodb-expressions.ts';
import { checkKeyCondition } from './key-conditions.ts';
import { projectionPaths, projectPaths } from './projection.ts';
import type { IndexSchema, KeyPart, Table } from './tables.ts';
import { copy, itemBytes } from './values.ts';

/** The part of a Query or Scan input the in-memory tables read. */
export interface ReadInput {
  readonly TableName?: string;
  readonly IndexName?: string;
  readonly KeyConditionExpression?: string;
  readonly FilterExpression?: string;
  readonly ProjectionExpression?: string;
  readonly ExpressionAttributeNames?: Record<string, string>;
  readonly ExpressionAttributeValues?: Record<string, unknown>;
  readonly Limit?: number;
  readonly ExclusiveStartKey?: Item;
  readonly ScanIndexForward?: boolean;
  readonly Select?: string;
  readonly ConsistentRead?: boolean;
}

/** A page of a Query or Scan, and the bytes it read (for its read units). */
export interface ReadPage {
  readonly Items: Item[];
  readonly Count: number;
  readonly ScannedCount: number;
  readonly LastEvaluatedKey?: Item;
  readonly bytes: number;
  /** A query's partition key value (of the table or index), read from its first matching item. */
  readonly partition?: Item;
}

/** What one Query or Scan page reads at most. */
const MAX_PAGE_BYTES = 1024 * 1024;

/** One Query page. */
export function query(table: Table, input: ReadInput): ReadPage {
  if (input.KeyConditionExpression === undefined) {
    throw validationException(
      'Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.',
    );
  }
  const index = indexOf(table, input.IndexName, input.ConsistentRead);
  const placeholders = placeholdersOf(input, [input.KeyConditionExpression]);
  const matches = parseCondition(input.KeyConditionExpression, placeholders);
  const sortKey = index ? index.sortKey : table.schema.sortKey;
  checkKeyCondition(
    conditionTree(input.KeyConditionExpression, placeholders),
    index ? index.partitionKey : table.schema.partitionKey,
    sortKey,
  );
  const candidates: Item[] = [];
  for (const item of table.items.values()) {
    if (index && !hasKeys(item, index)) continue;
    if (matches(item)) candidates.push(item);
  }
  const forward = input.ScanIndexForward !== false;
  const order = (a: Item, b: Item) =>
    compareKeys(sortKey, a, b) || compareText(table.keyOfItem(a), table.keyOfItem(b));
  candidates.sort(order);
  if (!forward) candidates.reverse();
  const read = page(table, index, candidates, input, placeholders, (item, start) =>
    forward ? order(item, start) > 0 : order(item, start) < 0,
  );
  return candidates[0] === undefined ? read : { ...read, partition: candidates[0] };
}

/** One Scan page, in key order. */
export function scan(table: Table, input: ReadInput): ReadPage {
  const index = indexOf(table, input.IndexName, input.ConsistentRead);
  const placeholders = placeholdersOf(input, []);
  const keyed: [string, Item][] = [];
  for (const [key, item] of table.items) if (!index || hasKeys(item, index)) keyed.push([key, item]);
  keyed.sort((a, b) => compareText(a[0], b[0]));
  return page(
    table,
    index,
    keyed.map(([, item]) => item),
    input,
    placeholders,
    (item, start) => compareText(table.keyOfItem(item), table.keyOfItem(start)) > 0,
  );
}

function page(
  table: Table,
  index: IndexSchema | undefined,
  ordered: readonly Item[],
  input: ReadInput,
  placeholders: Placeholders,
  isAfter: (item: Item, start: Item) => boolean,
): ReadPage {
  let start = 0;
  if (input.ExclusiveStartKey !== undefined) {
    // By the key's place in the order, as DynamoDB resumes: the item it names may be gone since.
    const after = input.ExclusiveStartKey;
    const at = ordered.findIndex((item) => isAfter(item, after));
    start = at < 0 ? ordered.length : at;
  }
  if (input.Limit !== undefined && !(Number.isInteger(input.Limit) && input.Limit >= 1)) {
    throw validationException(
      `1 validation error detected: Value '${input.Limit}' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1`,
    );
  }
  let end = input.Limit === undefined ? ordered.length : Math.min(ordered.length, start + input.Limit);
  const filter =
    input.FilterExpression === undefined ? undefined : parseCondition(input.FilterExpression, placeholders);
  const paths =
    input.ProjectionExpression === undefined
      ? undefined
      : projectionPaths(input.ProjectionExpression, placeholders);
  const items: Item[] = [];
  let bytes = 0;
  for (let i = start; i < end; i++) {
    const stored = ordered[i] as Item;
    const visible = index ? indexView(table, index, stored) : stored;
    bytes += itemBytes(visible);
    // A page reads at most 1 MB (before the filter): the item that reaches it is the page's last.
    if (bytes >= MAX_PAGE_BYTES && i + 1 < end) end = i + 1;
    if (filter && !filter(visible)) continue;
    if (input.Select !== 'COUNT') items.push(paths ? projectPaths(visible, paths) : copy(visible));
  }
  // DynamoDB names the last item read whenever the page stopped at its Limit, more to read or not.
  const stopped = end < ordered.length || (input.Limit !== undefined && end - start === input.Limit);
  const last = stopped && end > start ? (ordered[end - 1] as Item) : undefined;
  return {
    Items: items,
    Count: items.length,
    ScannedCount: end - start,
    ...(last ? { LastEvaluatedKey: lastKey(table, index, last) } : {}),
    bytes,
  };
}

function indexOf(table: Table, name: string | undefined, consistent?: boolean): IndexSchema | undefined {
  if (name === undefined) return undefined;
  const index = table.schema.indexes?.find((i) => i.name === name);
  if (!index) {
    throw validationException(`The table does not have the specified index: ${name}`);
  }
  if (consistent === true) {
    throw validationException('Consistent reads are not supported on global secondary indexes');
  }
  return index;
}

function placeholdersOf(input: ReadInput, expressions: string[]): Placeholders {
  const placeholders = { names: input.ExpressionAttributeNames, values: input.ExpressionAttributeValues };
  const all = [...expressions];
  if (input.FilterExpression !== undefined) all.push(input.FilterExpression);
  if (input.ProjectionExpression !== undefined) all.push(input.ProjectionExpression);
  if (input.ExpressionAttributeNames || input.ExpressionAttributeValues)
    checkUnusedPlaceholders(placeholders, all);
  return placeholders;
}

function hasKeys(item: Item, index: IndexSchema): boolean {
  return (
    item[index.partitionKey.name] !== undefined && (!index.sortKey || item[index.sortKey.name] !== undefined)
  );
}

/** What an index holds of an item: its keys, the table's keys, and the projected attributes. */
function indexView(table: Table, index: IndexSchema, item: Item): Item {
  const projection = index.projection ?? 'ALL';
  if (projection === 'ALL') return item;
  const names = [...table.keyNames, index.partitionKey.name, ...(index.sortKey ? [index.sortKey.name] : [])];
  if (projection !== 'KEYS_ONLY') names.push(...projection);
  const out: Item = {};
  for (const name of names) if (item[name] !== undefined) out[name] = item[name];
  return out;
}

function lastKey(table: Table, index: IndexSchema | undefined, item: Item): Item {
  const key = table.keyAttributes(item);
  if (index) {
    key[index.partitionKey.name] = item[index.partitionKey.name];
    if (index.sortKey) key[index.sortKey.name] = item[index.sortKey.name];
  }
  return copy(key);
}

function compareKeys(part: KeyPart | undefined, a: Item, b: Item): number {
  if (!part) return 0;
  const [x, y] = [a[part.name], b[part.name]];
  if (typeof x === 'number' && typeof y === 'number') return x - y;
  if (typeof x === 'bigint' || typeof y === 'bigint')
    return x === y ? 0 : (x as bigint) < (y as bigint) ? -1 : 1;
  if (x instanceof Uint8Array && y instanceof Uint8Array) return Buffer.compare(x, y);
  return compareStrings(String(x), String(y));
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
