// What every edge of docs/protocol.md's state machine shares: the shape of the job item's UpdateItem an
// edge builds, the old item a refusal returns (ALL_OLD), and the attribute-name fragments. This folder is
// pure (scripts/check-layers.mjs holds it so): each edge's file builds its request and reads its answer;
// the adapters (core/adapters/) only send them.

import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { JobItem } from '../contract/job-item.ts';
import type { Effect } from '../contract/job-store.ts';

/** An UpdateItem of one job item: sent alone, or as the first item of a transaction with effects. */
export type JobItemUpdate = NonNullable<Effect['Update']> & {
  Key: Record<string, unknown>;
  ExpressionAttributeValues: Record<string, unknown>;
};

/** A refusal's old item, in the low-level (typed) attribute form DynamoDB returns it in. */
export type RawItem = Record<string, unknown>;

/** `{ '#a': 'a', ... }`: the ExpressionAttributeNames of attributes named by themselves, in that order. */
export function names(...attributes: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const attribute of attributes) out[`#${attribute}`] = attribute;
  return out;
}

export function unmarshallItem(item: RawItem): JobItem {
  // ConditionalCheckFailedException.Item arrives in the low-level (typed) attribute form.
  return unmarshall(item as Parameters<typeof unmarshall>[0]) as unknown as JobItem;
}
