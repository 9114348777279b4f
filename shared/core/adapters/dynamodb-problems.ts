// Reads of the sparse `problems` index (job-history.ts) for the operator's listings. Only jobs that had a
// problem are in it, so a listing reads those and never the table's completed-first-time majority.

import type { AttributeDefinition, CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { QueryCommand, type QueryCommandInput } from '@aws-sdk/lib-dynamodb';
import {
  PROBLEM_AT_ATTRIBUTE,
  PROBLEM_SHARD_ATTRIBUTE,
  PROBLEMS_INDEX,
  PROBLEMS_PROJECTION,
} from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { JobStatus } from '../contract/statuses.ts';

/** One entry of the index: the table and index keys plus the projected attributes. */
export type ProblemIndexItem = Pick<JobItem, 'dedupKey' | 'status' | 'leaseUntil' | 'attempts'> &
  Partial<Pick<JobItem, (typeof PROBLEMS_PROJECTION)[number]>> & {
    readonly problemShard: string;
    readonly problemAt: number;
  };

/** Where a shard's query resumes: the index's last evaluated key (table key plus index keys). */
export type ProblemShardKey = Readonly<Record<string, string | number>>;

export interface ProblemShardQuery {
  readonly shard: string;
  /** Only entries whose last problem is at or after this (epoch ms). */
  readonly since?: number;
  /** Server-side filters: they cut what travels, not what is read (a filter does not lower the RCU). */
  readonly statuses?: readonly JobStatus[];
  readonly type?: string;
  /** Entries evaluated per page (DynamoDB's `Limit`, counted before the filter). */
  readonly pageSize: number;
  readonly startKey?: ProblemShardKey;
}

export interface ProblemShardPage {
  readonly items: ProblemIndexItem[];
  /** Undefined when the shard has no more entries. */
  readonly lastKey?: ProblemShardKey;
  /** Read capacity units the page consumed (the index's; the table is not read). */
  readonly readUnits: number;
  /** Entries read before the filter. */
  readonly scanned: number;
}

/** The query of one page of one index shard, newest problem first. */
export function problemShardQuery(tableName: string, q: ProblemShardQuery): QueryCommandInput {
  const names: Record<string, string> = { '#shard': PROBLEM_SHARD_ATTRIBUTE };
  const values: Record<string, unknown> = { ':shard': q.shard };
  let keyCondition = '#shard = :shard';
  if (q.since !== undefined) {
    names['#problemAt'] = PROBLEM_AT_ATTRIBUTE;
    values[':since'] = q.since;
    keyCondition += ' AND #problemAt >= :since';
  }
  const filters: string[] = [];
  if (q.statuses && q.statuses.length > 0) {
    names['#status'] = 'status';
    const placeholders = q.statuses.map((s, i) => {
      values[`:status${i}`] = s;
      return `:status${i}`;
    });
    filters.push(`#status IN (${placeholders.join(', ')})`);
  }
  if (q.type !== undefined) {
    names['#type'] = 'type';
    values[':type'] = q.type;
    filters.push('#type = :type');
  }
  return {
    TableName: tableName,
    IndexName: PROBLEMS_INDEX,
    KeyConditionExpression: keyCondition,
    ...(filters.length > 0 ? { FilterExpression: filters.join(' AND ') } : {}),
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
    ScanIndexForward: false,
    Limit: q.pageSize,
    ReturnConsumedCapacity: 'INDEXES',
    ...(q.startKey ? { ExclusiveStartKey: { ...q.startKey } } : {}),
  };
}

/** Reads one page of one shard of the `problems` index. */
export async function queryProblemShard(
  doc: DynamoDBDocumentClient,
  tableName: string,
  q: ProblemShardQuery,
  options: { readonly abortSignal?: AbortSignal } = {},
): Promise<ProblemShardPage> {
  const out = await doc.send(new QueryCommand(problemShardQuery(tableName, q)), {
    ...(options.abortSignal ? { abortSignal: options.abortSignal } : {}),
  });
  return {
    items: (out.Items ?? []) as ProblemIndexItem[],
    ...(out.LastEvaluatedKey ? { lastKey: out.LastEvaluatedKey as ProblemShardKey } : {}),
    readUnits: out.ConsumedCapacity?.CapacityUnits ?? 0,
    scanned: out.ScannedCount ?? out.Count ?? 0,
  };
}

/**
 * The `problems` index as CreateTable takes it, for code that makes a `jobs` table without the stack (the
 * stack's construct, infra/constructs/state-tables.ts, is the source local provisioning copies).
 */
export function problemsIndexOfJobsTable(): Pick<
  CreateTableCommandInput,
  'AttributeDefinitions' | 'GlobalSecondaryIndexes'
> & { AttributeDefinitions: AttributeDefinition[] } {
  return {
    AttributeDefinitions: [
      { AttributeName: PROBLEM_SHARD_ATTRIBUTE, AttributeType: 'S' },
      { AttributeName: PROBLEM_AT_ATTRIBUTE, AttributeType: 'N' },
    ],
    GlobalSecondaryIndexes: [
      {
        IndexName: PROBLEMS_INDEX,
        KeySchema: [
          { AttributeName: PROBLEM_SHARD_ATTRIBUTE, KeyType: 'HASH' },
          { AttributeName: PROBLEM_AT_ATTRIBUTE, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...PROBLEMS_PROJECTION] },
      },
    ],
  };
}
