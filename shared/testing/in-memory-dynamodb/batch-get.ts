// BatchGetItem on the in-memory tables: at most 100 keys, no key twice; with the per-partition limit on,
// a key whose partition is over its throughput is left in UnprocessedKeys, and a batch none of whose keys
// could be read is throttled as a whole, as DynamoDB does.

import type { Item } from '../dynamodb-expressions.ts';
import { consumed, readUnits, type Tally } from './capacity.ts';
import { metadata, partitionThrottled, sdkValidationException } from './errors.ts';
import { type PartitionLimits, partitionOf, throttlingReason } from './partition-limits.ts';
import type { Table } from './tables.ts';
import { copy, storedBytes } from './values.ts';

/** Serves one BatchGetCommand. */
export function batchGet(
  input: Record<string, unknown> & { readonly ReturnConsumedCapacity?: string },
  tableOf: (name: string) => Table,
  tally: Tally,
  partitions: PartitionLimits | undefined,
): unknown {
  const requests = (input.RequestItems ?? {}) as Record<string, { Keys?: Item[]; ConsistentRead?: boolean }>;
  const keys = Object.values(requests).reduce((n, r) => n + (r.Keys?.length ?? 0), 0);
  if (keys > 100) {
    throw sdkValidationException(
      "1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Member must have length less than or equal to 100",
    );
  }
  for (const [name, request] of Object.entries(requests)) {
    const table = tableOf(name);
    const texts = (request.Keys ?? []).map((key) => table.keyOf(key));
    if (new Set(texts).size !== texts.length) {
      throw sdkValidationException('Provided list of item keys contains duplicates');
    }
  }
  const responses: Record<string, Item[]> = {};
  const unprocessed: Record<string, { Keys: Item[] }> = {};
  const capacities: Record<string, unknown>[] = [];
  for (const [name, request] of Object.entries(requests)) {
    const table = tableOf(name);
    const found: Item[] = [];
    let units = 0;
    for (const key of request.Keys ?? []) {
      const item = table.items.get(table.keyOf(key));
      const keyUnits = readUnits(item ? storedBytes(item) : 0, request.ConsistentRead === true);
      const partition = partitionOf(table, key) as string;
      if (partitions?.take([{ table: name, partition, kind: 'read', units: keyUnits }])) {
        const left = unprocessed[name] ?? { Keys: [] };
        left.Keys.push(copy(key));
        unprocessed[name] = left;
        continue;
      }
      units += keyUnits;
      if (item) found.push(copy(item));
    }
    tally.add(name, 'BatchGetCommand', { read: units });
    responses[name] = found;
    capacities.push(consumed(name, { read: units }, input.ReturnConsumedCapacity));
  }
  const refused = Object.values(unprocessed).reduce((n, u) => n + u.Keys.length, 0);
  if (refused > 0 && refused === keys) {
    const first = Object.keys(unprocessed)[0] as string;
    throw partitionThrottled(throttlingReason({ table: first, partition: '', kind: 'read', units: 0 }));
  }
  const mode = input.ReturnConsumedCapacity;
  return {
    $metadata: metadata(),
    Responses: responses,
    UnprocessedKeys: unprocessed,
    ...(mode && mode !== 'NONE' ? { ConsumedCapacity: capacities } : {}),
  };
}
