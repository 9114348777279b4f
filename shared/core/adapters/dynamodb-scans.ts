// Whole-table reads for the operator's overview commands (status, leases, inspect): the `jobs` table
// through a projection, the `leases` table as it is. Workers never scan; these are for people.

import {
  type DynamoDBDocumentClient,
  paginateScan,
  ScanCommand,
  type ScanCommandInput,
} from '@aws-sdk/lib-dynamodb';
import type { JobItem } from '../contract/job-item.ts';
import type { LeaseItem } from '../contract/lease-store.ts';
import { RATE_ITEM_PREFIX } from '../contract/rate-store.ts';
import type { JobStatus } from '../contract/statuses.ts';
import { names } from '../protocol/update.ts';

/** The fields of a job item the overview commands read (a projection, so scans stay small). */
export type JobSummaryItem = Pick<JobItem, 'dedupKey' | 'status' | 'leaseUntil' | 'token' | 'attempts'> &
  Partial<Pick<JobItem, 'owner' | 'type' | 'claimedAt' | 'createdAt' | 'updatedAt'>> & {
    readonly checkpoint?: { readonly step?: string; readonly at?: number };
  };

/**
 * Scans the `jobs` table with a projection (no payloads, results or checkpoint data). A scan reads the
 * whole table: fine for local and demo sizes, slow and costly for millions of items (use metrics there).
 */
export async function* scanJobSummaries(
  doc: DynamoDBDocumentClient,
  tableName: string,
  options: { readonly status?: JobStatus } = {},
): AsyncGenerator<JobSummaryItem> {
  for await (const page of paginateScan({ client: doc }, jobSummaryScan(tableName, options.status))) {
    for (const item of page.Items ?? []) yield item as JobSummaryItem;
  }
}

/**
 * Scans the `leases` table for its named leases (small: one item per shared resource ever locked, until
 * TTL tidies it). Rate limits' permit items share the table but are no leases (no owner, token or
 * `leaseUntil`): they are left out, or the overview would list each as a free lease.
 */
export async function* scanLeaseItems(
  doc: DynamoDBDocumentClient,
  tableName: string,
  options: { readonly owner?: string } = {},
): AsyncGenerator<LeaseItem> {
  const input: ScanCommandInput = {
    TableName: tableName,
    ...(options.owner
      ? {
          FilterExpression: '#owner = :owner',
          ExpressionAttributeNames: { '#owner': 'owner' },
          ExpressionAttributeValues: { ':owner': options.owner },
        }
      : {}),
  };
  for await (const page of paginateScan({ client: doc }, input)) {
    for (const item of page.Items ?? []) {
      if (String(item.leaseKey).startsWith(RATE_ITEM_PREFIX)) continue;
      yield item as LeaseItem;
    }
  }
}

/** One page of a bounded read: at most `limit` items read, and whether the table holds more. */
export interface ScanPage<T> {
  readonly items: T[];
  /** True when the table holds items past this page (DynamoDB gave a LastEvaluatedKey). */
  readonly more: boolean;
}

export interface ScanPageOptions {
  /** Items read at most (DynamoDB's `Limit`, counted before any filter). */
  readonly limit: number;
  readonly abortSignal?: AbortSignal;
}

/**
 * The first page of the operator's scan of the `jobs` table: one request reading at most `limit` items,
 * whatever the table's size (the overview's bounded sample; a table of at most `limit` items is read whole).
 */
export async function scanJobSummaryPage(
  doc: DynamoDBDocumentClient,
  tableName: string,
  options: ScanPageOptions,
): Promise<ScanPage<JobSummaryItem>> {
  const out = await doc.send(new ScanCommand({ ...jobSummaryScan(tableName), Limit: options.limit }), {
    ...(options.abortSignal ? { abortSignal: options.abortSignal } : {}),
  });
  return { items: (out.Items ?? []) as JobSummaryItem[], more: out.LastEvaluatedKey !== undefined };
}

/** The first page of the `leases` table (named leases; rate permits left out), one request of `limit` items. */
export async function scanLeasePage(
  doc: DynamoDBDocumentClient,
  tableName: string,
  options: ScanPageOptions,
): Promise<ScanPage<LeaseItem>> {
  const out = await doc.send(new ScanCommand({ TableName: tableName, Limit: options.limit }), {
    ...(options.abortSignal ? { abortSignal: options.abortSignal } : {}),
  });
  const items = (out.Items ?? []).filter((item) => !String(item.leaseKey).startsWith(RATE_ITEM_PREFIX));
  return { items: items as LeaseItem[], more: out.LastEvaluatedKey !== undefined };
}

/**
 * The operator's scan of the `jobs` table: a projection onto the fields of `JobSummaryItem`
 * (below), so no payloads, results or checkpoint data travel; with `status`, only those items.
 */
export function jobSummaryScan(tableName: string, status?: JobStatus): ScanCommandInput {
  return {
    TableName: tableName,
    ProjectionExpression:
      '#dedupKey, #status, #owner, #leaseUntil, #token, #attempts, #type, #claimedAt, #createdAt, #updatedAt, ' +
      '#checkpoint.#at, #checkpoint.#step',
    ExpressionAttributeNames: {
      ...names('dedupKey', 'status', 'owner', 'leaseUntil', 'token', 'attempts', 'type', 'claimedAt'),
      ...names('createdAt', 'updatedAt', 'checkpoint', 'at', 'step'),
    },
    ...(status
      ? { FilterExpression: '#status = :status', ExpressionAttributeValues: { ':status': status } }
      : {}),
  };
}
