// The operator's batched read of job items (the inspector's dead-letters page marks each letter by the
// state of its job): BatchGetItem, 100 keys a request, a projection without payload-sized fields.

import { BatchGetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { JobItem } from '../contract/job-item.ts';

/** What a letter's mark needs of its job item (dlq-redrive-plan.ts `letterOwner`): no result, no checkpoint. */
export type JobStateItem = Pick<JobItem, 'dedupKey' | 'status' | 'messageId' | 'attempts'> &
  Partial<Pick<JobItem, 'type' | 'history' | 'deadKeyUntil'>>;

/** Rounds of retries of keys DynamoDB leaves unprocessed (throttling) before they are given up. */
const UNPROCESSED_ROUNDS = 3;

/**
 * The job items of `keys` (distinct), eventually consistent (half the read units: a mark is a hint, a
 * redrive reads the item again). Keys still unprocessed after a few rounds are missing from the answer
 * and listed in `unread`.
 */
export async function getJobStates(
  doc: DynamoDBDocumentClient,
  tableName: string,
  keys: readonly string[],
): Promise<{ items: Map<string, JobStateItem>; unread: string[] }> {
  const items = new Map<string, JobStateItem>();
  const unread: string[] = [];
  const distinct = [...new Set(keys)];
  for (let at = 0; at < distinct.length; at += 100) {
    let pending: Record<string, unknown>[] = distinct.slice(at, at + 100).map((dedupKey) => ({ dedupKey }));
    for (let round = 0; pending.length > 0 && round < UNPROCESSED_ROUNDS; round++) {
      const out = await doc.send(
        new BatchGetCommand({
          RequestItems: {
            [tableName]: {
              Keys: pending,
              ProjectionExpression: '#k, #s, #m, #a, #t, #h, #d',
              ExpressionAttributeNames: {
                '#k': 'dedupKey',
                '#s': 'status',
                '#m': 'messageId',
                '#a': 'attempts',
                '#t': 'type',
                '#h': 'history',
                '#d': 'deadKeyUntil',
              },
            },
          },
        }),
      );
      for (const item of (out.Responses?.[tableName] ?? []) as JobStateItem[]) items.set(item.dedupKey, item);
      pending = (out.UnprocessedKeys?.[tableName]?.Keys ?? []) as Record<string, unknown>[];
    }
    unread.push(...pending.map((k) => String(k.dedupKey)));
  }
  return { items, unread };
}
