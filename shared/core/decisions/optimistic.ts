import type { Effect } from '../contract/job-store.ts';

/**
 * A Put of application state guarded by optimistic locking: it applies only if the item's `version` is
 * still the one read (`seenVersion`; `undefined` means the item must not exist yet). The new item gets
 * version + 1. Used as an effect, so it commits with the job's checkpoint or completion, or not at all.
 */
export function versionedPut(input: {
  tableName: string;
  key: Record<string, unknown>;
  seenVersion: number | undefined;
  item: Record<string, unknown>;
  /** Name of the version attribute. @default 'version' */
  versionAttribute?: string;
  /** The table's partition key, checked absent for a first write. @default the first attribute of `key` */
  partitionKey?: string;
}): Effect {
  const versionAttr = input.versionAttribute ?? 'version';
  const nextVersion = (input.seenVersion ?? 0) + 1;
  const firstKey = input.partitionKey ?? Object.keys(input.key)[0] ?? 'pk';
  return {
    Put: {
      TableName: input.tableName,
      Item: { ...input.item, ...input.key, [versionAttr]: nextVersion },
      ConditionExpression: input.seenVersion === undefined ? 'attribute_not_exists(#k)' : '#v = :seen',
      ExpressionAttributeNames: input.seenVersion === undefined ? { '#k': firstKey } : { '#v': versionAttr },
      ...(input.seenVersion === undefined
        ? {}
        : { ExpressionAttributeValues: { ':seen': input.seenVersion } }),
    },
  };
}

/** Waits a short random time between in-process optimistic retries so contenders spread out. */
export function conflictPause(tryNumber: number, random: () => number = Math.random): Promise<void> {
  const ms = Math.round(random() * Math.min(200, 10 * 2 ** tryNumber));
  return new Promise((resolve) => setTimeout(resolve, ms));
}
