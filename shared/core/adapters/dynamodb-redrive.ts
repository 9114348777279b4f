/**
 * The undo of a redrive's reset whose letter could not be sent back (docs/protocol.md, E10). The reset
 * itself is in dynamodb-operator-writes.ts.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { PROBLEM_AT_ATTRIBUTE } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import { JobStatus } from '../contract/statuses.ts';
import type { JobItemUpdate } from './dynamodb-job-expressions.ts';
import type { OperatorTable } from './dynamodb-operator-writes.ts';
import { guardStore } from './store-errors.ts';

/** The fields a redrive's reset removes or zeroes (redriveUpdate), which its undo puts back. */
const RESET_FIELDS = [
  'status',
  'leaseUntil',
  'attempts',
  'owner',
  'deadReason',
  'refunds',
  'conflicts',
  'deadAt',
  'deadKeyUntil',
  PROBLEM_AT_ATTRIBUTE,
] as const;

/** The undo of a redrive's reset at `resetVersion`: `before`'s fields back, while the item is as it left it. */
export function undoRedriveUpdate(
  tableName: string,
  before: JobItem,
  resetVersion: number,
  now: number,
): JobItemUpdate {
  const names: Record<string, string> = { '#version': 'version', '#updatedAt': 'updatedAt' };
  const values: Record<string, unknown> = {
    ':resetVersion': resetVersion,
    ':retryWait': JobStatus.RetryWait,
    ':zero': 0,
    ':one': 1,
    ':now': now,
  };
  const set = ['#version = #version + :one', '#updatedAt = :now'];
  const remove: string[] = [];
  RESET_FIELDS.forEach((field, i) => {
    names[`#f${i}`] = field;
    const value = (before as unknown as Record<string, unknown>)[field];
    if (value === undefined) remove.push(`#f${i}`);
    else {
      set.push(`#f${i} = :f${i}`);
      values[`:f${i}`] = value;
    }
  });
  return {
    TableName: tableName,
    Key: { dedupKey: before.dedupKey },
    UpdateExpression: `SET ${set.join(', ')}${remove.length > 0 ? ` REMOVE ${remove.join(', ')}` : ''}`,
    ConditionExpression: '#version = :resetVersion AND #f0 = :retryWait AND #f2 = :zero',
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
  };
}

/** JobStore.undoRedrive on DynamoDB: one conditional update. */
export async function undoRedrive(
  t: OperatorTable,
  before: JobItem,
  resetVersion: number,
  now: number,
): Promise<boolean> {
  try {
    await guardStore('undo-redrive', (http) =>
      t.doc.send(new UpdateCommand(undoRedriveUpdate(t.tableName, before, resetVersion, now)), http),
    );
    return true;
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
    // Its answer lost and the retry refused: undone when the item is `before` again at the next version.
    const item = await t.get(before.dedupKey);
    return item?.version === resetVersion + 1 && item.status === before.status && item.updatedAt === now;
  }
}
