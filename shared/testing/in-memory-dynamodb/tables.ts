// The tables of the in-memory DynamoDB: their key schemas, indexes and TTL attributes (built from
// leaseq's own definitions by `leaseqTables`), and each table's items by key.

import {
  PROBLEM_AT_ATTRIBUTE,
  PROBLEM_SHARD_ATTRIBUTE,
  PROBLEMS_INDEX,
  PROBLEMS_PROJECTION,
} from '../../core/contract/job-history.ts';
import { type KeyAttribute, keyName, keyType, type TableDefinition } from '../../core/model/table.ts';
import { KEY_ATTRIBUTES, TTL_ATTRIBUTE } from '../../resources.ts';
import { validationException } from '../dynamodb-errors.ts';
import type { Item } from '../dynamodb-expressions.ts';
import { typedName } from './values.ts';

/** A key attribute of a table or index: its name and DynamoDB type. */
export interface KeyPart {
  readonly name: string;
  readonly type: 'S' | 'N' | 'B';
}

/** A global secondary index: its keys and what it projects. */
export interface IndexSchema {
  readonly name: string;
  readonly partitionKey: KeyPart;
  readonly sortKey?: KeyPart;
  /** ALL (default), KEYS_ONLY, or INCLUDE with these attributes. */
  readonly projection?: 'ALL' | 'KEYS_ONLY' | readonly string[];
}

/** One table: its physical name, keys, indexes and TTL attribute (epoch seconds). */
export interface TableSchema {
  readonly name: string;
  readonly partitionKey: KeyPart;
  readonly sortKey?: KeyPart;
  readonly indexes?: readonly IndexSchema[];
  readonly ttlAttribute?: string;
}

/** A key attribute in leaseq's own form (`'id'` or `{ name, type }`) as a {@link KeyPart}. */
export function keyPart(attribute: KeyAttribute): KeyPart {
  return { name: keyName(attribute), type: keyType(attribute) };
}

/** The `problems` index of a `jobs` table (infra/constructs/state-tables.ts builds the same). */
export const PROBLEMS_INDEX_SCHEMA: IndexSchema = {
  name: PROBLEMS_INDEX,
  partitionKey: { name: PROBLEM_SHARD_ATTRIBUTE, type: 'S' },
  sortKey: { name: PROBLEM_AT_ATTRIBUTE, type: 'N' },
  projection: [...PROBLEMS_PROJECTION],
};

/**
 * leaseq's tables under these physical names, shaped as the stack deploys them: `jobs` (key `dedupKey`,
 * TTL, the `problems` index), `leases` (key `leaseKey`, TTL; rate permits live there too), and
 * application tables from their `defineTable` definitions, by physical name.
 */
export function leaseqTables(names: {
  readonly jobs?: string;
  readonly leases?: string;
  readonly app?: Readonly<Record<string, TableDefinition>>;
}): TableSchema[] {
  const tables: TableSchema[] = [];
  if (names.jobs) {
    tables.push({
      name: names.jobs,
      partitionKey: { name: KEY_ATTRIBUTES.jobs, type: 'S' },
      indexes: [PROBLEMS_INDEX_SCHEMA],
      ttlAttribute: TTL_ATTRIBUTE,
    });
  }
  if (names.leases) {
    tables.push({
      name: names.leases,
      partitionKey: { name: KEY_ATTRIBUTES.leases, type: 'S' },
      ttlAttribute: TTL_ATTRIBUTE,
    });
  }
  for (const [name, def] of Object.entries(names.app ?? {})) {
    tables.push({
      name,
      partitionKey: keyPart(def.partitionKey),
      ...(def.sortKey ? { sortKey: keyPart(def.sortKey) } : {}),
      ...(def.ttlAttribute ? { ttlAttribute: def.ttlAttribute } : {}),
    });
  }
  return tables;
}

/** One table's items by key text ({@link Table.keyOf}). Items are stored as copies, never handed out. */
export class Table {
  readonly items = new Map<string, Item>();
  readonly keyNames: readonly string[];

  constructor(readonly schema: TableSchema) {
    this.keyNames = schema.sortKey
      ? [schema.partitionKey.name, schema.sortKey.name]
      : [schema.partitionKey.name];
  }

  /** The key text of a request's `Key` (exactly the key attributes, typed as the schema says). */
  keyOf(key: Item | undefined): string {
    if (key === undefined) throw validationException('The provided key element does not match the schema');
    let count = 0;
    for (const name in key) if (key[name] !== undefined) count += 1;
    if (count !== this.keyNames.length) {
      throw validationException('The provided key element does not match the schema');
    }
    return this.#text(key, 'key');
  }

  /** The key text of a whole item (a put): its key attributes must be there, typed as the schema says. */
  keyOfItem(item: Item): string {
    return this.#text(item, 'item');
  }

  /** The key attributes of an item. */
  keyAttributes(item: Item): Item {
    const key: Item = {};
    for (const name of this.keyNames) key[name] = item[name];
    return key;
  }

  #text(item: Item, what: 'key' | 'item'): string {
    const { partitionKey, sortKey } = this.schema;
    const pk = keyText(partitionKey, item[partitionKey.name], what);
    return sortKey ? `${pk}\u0000${keyText(sortKey, item[sortKey.name], what)}` : pk;
  }
}

function keyText(part: KeyPart, value: unknown, what: 'key' | 'item'): string {
  if (value === undefined && what === 'item') {
    throw validationException(
      `One or more parameter values were invalid: Missing the key ${part.name} in the item`,
    );
  }
  if (part.type === 'S' && typeof value === 'string') {
    if (value === '') {
      throw validationException(
        `One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: ${part.name}`,
      );
    }
    return value;
  }
  if (part.type === 'N' && (typeof value === 'number' || typeof value === 'bigint')) return String(value);
  if (part.type === 'B' && value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (what === 'key') throw validationException('The provided key element does not match the schema');
  throw validationException(
    `One or more parameter values were invalid: Type mismatch for key ${part.name} expected: ${part.type} actual: ${typedName(value)}`,
  );
}
