import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { queryProblemShard } from '../../shared/core/adapters/dynamodb-problems.ts';
import { problemShard } from '../../shared/core/contract/job-history.ts';

/**
 * Waits until the `problems` index shows every key of `keys` (with `status`, when given): a global
 * secondary index is eventually consistent, so a listing right after a write may miss it on AWS. Call
 * it after seeding or changing job items and before a listing is asserted; throws after `timeoutMs`,
 * naming the keys the index still lacks.
 */
export async function untilIndexed(
  doc: DynamoDBDocumentClient,
  tableName: string,
  keys: readonly string[],
  options: { readonly status?: string; readonly timeoutMs?: number } = {},
): Promise<void> {
  const end = Date.now() + (options.timeoutMs ?? 30_000);
  let missing = [...keys];
  for (;;) {
    const shards = [...new Set(missing.map(problemShard))];
    const seen = new Set<string>();
    for (const shard of shards) {
      let startKey: Readonly<Record<string, string | number>> | undefined;
      do {
        const page = await queryProblemShard(doc, tableName, {
          shard,
          pageSize: 100,
          ...(startKey ? { startKey } : {}),
        });
        for (const item of page.items) {
          if (options.status === undefined || item.status === options.status) seen.add(item.dedupKey);
        }
        startKey = page.lastKey;
      } while (startKey);
    }
    missing = missing.filter((key) => !seen.has(key));
    if (missing.length === 0) return;
    if (Date.now() > end)
      throw new Error(`untilIndexed: the problems index still lacks ${missing.join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
