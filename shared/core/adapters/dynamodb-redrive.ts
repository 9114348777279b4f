/**
 * An operator's redrive on the jobs table (docs/protocol.md, E10): the reset that makes a job runnable
 * again, and its undo when the letter could not be sent back. DynamoDbJobStore delegates both here.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { StoreRefusedError } from '../../errors.ts';
import {
  HISTORY_MAX,
  type HistoryEvent,
  PROBLEM_AT_ATTRIBUTE,
  PROBLEM_SHARD_ATTRIBUTE,
  problemShard,
} from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import { type RedriveBy, redriveEvent } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import type { JobItemUpdate } from './dynamodb-job-expressions.ts';
import { guardStore } from './store-errors.ts';

/** What the redrive's writes need of the store: its client, table, TTL rule and strongly consistent read. */
export interface RedriveStoreIo {
  readonly doc: DynamoDBDocumentClient;
  readonly table: string;
  readonly expiresAt: (fromMs: number) => number;
  readonly get: (dedupKey: string) => Promise<JobItem | undefined>;
}

/** An operator's redrive: back to RETRY_WAIT with fresh attempts, unless finished or under a live lease. */
export function redriveUpdate(
  tableName: string,
  dedupKey: string,
  now: number,
  expiresAt: number,
  leaseEndedBefore = now,
  history: RedriveHistory = { event: { e: 'redrive', at: now, by: 'unknown' } },
  planned?: number,
): JobItemUpdate {
  // The event is appended while the history has room; a full one is replaced by the caller's trimmed
  // copy under a version condition (the caller read it), so the bound holds without a read on every redrive.
  // An item with no room for the event (refused for size) is redriven without it or the index keys: the
  // redrive the history came after, which never grew an item.
  const none = 'leaveOut' in history;
  const appendOrReplace = none
    ? ''
    : 'replace' in history
      ? ', #history = :history, #historyDropped = if_not_exists(#historyDropped, :zero) + :dropped'
      : ', #history = list_append(if_not_exists(#history, :emptyList), :event)';
  const historyCondition = none
    ? ''
    : 'replace' in history
      ? ' AND #version = :readVersion'
      : ' AND (attribute_not_exists(#history) OR size(#history) < :historyMax)';
  // The version the redrive planned from: a claim since (a fresh send's reset of a dead key, a copy's
  // takeover) makes the item another job's, or another run's, and refuses the reset. A replaced history
  // is written at the version read, which the caller makes the planned one.
  const plannedCondition = planned !== undefined && !('replace' in history) ? ' AND #version = :planned' : '';
  return {
    TableName: tableName,
    Key: { dedupKey },
    UpdateExpression:
      'SET #status = :retryWait, #leaseUntil = :zero, #attempts = :zero, #version = #version + :one, ' +
      `#updatedAt = :now, #expiresAt = :expiresAt${appendOrReplace}` +
      (none ? ' ' : ', #problemShard = :problemShard, #problemAt = :now ') +
      // A redriven job is no longer dead: a later dead marking sets both again (or leaves them unset).
      'REMOVE #owner, #deadReason, #refunds, #conflicts, #deadAt, #deadKeyUntil',
    // Not finished, and no live lease: DEAD, RETRY_WAIT, or IN_PROGRESS whose lease has ended. A cancelled
    // job stays cancelled (its letter, if the queue's own redrive made one, is stale).
    ConditionExpression:
      'attribute_exists(#status) AND NOT #status IN (:completed, :cancelled) AND ' +
      '(#status <> :inProgress OR #leaseUntil < :endedBefore)' +
      historyCondition +
      plannedCondition,
    ExpressionAttributeNames: {
      ...(none
        ? {}
        : {
            '#history': 'history',
            '#problemShard': PROBLEM_SHARD_ATTRIBUTE,
            '#problemAt': PROBLEM_AT_ATTRIBUTE,
          }),
      ...('replace' in history ? { '#historyDropped': 'historyDropped' } : {}),
      '#status': 'status',
      '#leaseUntil': 'leaseUntil',
      '#attempts': 'attempts',
      '#version': 'version',
      '#updatedAt': 'updatedAt',
      '#expiresAt': 'expiresAt',
      '#owner': 'owner',
      '#deadReason': 'deadReason',
      '#refunds': 'refunds',
      '#conflicts': 'conflicts',
      '#deadAt': 'deadAt',
      '#deadKeyUntil': 'deadKeyUntil',
    },
    ExpressionAttributeValues: {
      ':retryWait': JobStatus.RetryWait,
      ':completed': JobStatus.Completed,
      ':cancelled': JobStatus.Cancelled,
      ':inProgress': JobStatus.InProgress,
      ':zero': 0,
      ':one': 1,
      ':now': now,
      ':endedBefore': leaseEndedBefore,
      ':expiresAt': expiresAt,
      ...(plannedCondition ? { ':planned': planned } : {}),
      ...(none ? {} : { ':problemShard': problemShard(dedupKey) }),
      ...('replace' in history
        ? { ':history': history.replace, ':dropped': history.dropped, ':readVersion': history.readVersion }
        : 'event' in history
          ? { ':event': [history.event], ':emptyList': [], ':historyMax': HISTORY_MAX }
          : {}),
    },
  };
}

/** The redrive's history write: append `event`, or (history full) replace it with a trimmed copy read at `readVersion`. */
export type RedriveHistory =
  | { readonly event: HistoryEvent & { readonly e: 'redrive' } }
  | { readonly replace: readonly HistoryEvent[]; readonly dropped: number; readonly readVersion: number }
  | { readonly leaveOut: true };

/** JobStore.resetForRedrive on DynamoDB: one conditional update (a full history: replaced, read first). */
export async function resetForRedrive(
  io: RedriveStoreIo,
  dedupKey: string,
  now: number,
  leaseEndedBefore: number,
  by: RedriveBy,
  planned: number | undefined,
): Promise<boolean> {
  const event = redriveEvent(now, by);
  const send = (history: RedriveHistory) =>
    guardStore('reset-for-redrive', () =>
      io.doc.send(
        new UpdateCommand(
          redriveUpdate(io.table, dedupKey, now, io.expiresAt(now), leaseEndedBefore, history, planned),
        ),
      ),
    );
  // No room in the item for the event: redriven without it (the redrive must never fail for it).
  const attempt = (history: RedriveHistory) =>
    send(history).catch((error: unknown) => {
      if (error instanceof StoreRefusedError && error.problem === 'item-too-large') {
        return send({ leaveOut: true });
      }
      throw error;
    });
  try {
    await attempt({ event });
    return true;
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
  }
  // Refused: finished, under a live lease, absent, moved since the plan's read, its history is full, or
  // (with a planned version) this very reset landed and its answer was lost, the SDK's retry refused.
  // Only a full history is retried, with the oldest events dropped, at the version read (or planned).
  const item = await io.get(dedupKey);
  if (!item) return false;
  if (planned !== undefined && ownRedriveReset(item, planned, now)) return true;
  if (planned !== undefined && item.version !== planned) return false;
  if ((item.history?.length ?? 0) < HISTORY_MAX) return false;
  const history = [...(item.history ?? []), event];
  try {
    await attempt({
      replace: history.slice(-HISTORY_MAX),
      dropped: history.length - HISTORY_MAX,
      readVersion: item.version,
    });
    return true;
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
    // The replace's answer lost: its retry refused at the version it moved.
    return planned !== undefined && ownRedriveReset(await io.get(dedupKey), planned, now);
  }
}

/**
 * Whether `item` is as the redrive reset planned at version `planned` at `now` left it: the version after
 * it, RETRY_WAIT with no attempt, written at `now` (the reset's own updatedAt). A claim or any other write
 * since moves the version on, so this is the reset's own write whose answer was lost.
 */
function ownRedriveReset(item: JobItem | undefined, planned: number, now: number): boolean {
  return (
    item !== undefined &&
    item.version === planned + 1 &&
    item.status === JobStatus.RetryWait &&
    item.attempts === 0 &&
    item.updatedAt === now
  );
}

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
  io: RedriveStoreIo,
  before: JobItem,
  resetVersion: number,
  now: number,
): Promise<boolean> {
  try {
    await guardStore('undo-redrive', () =>
      io.doc.send(new UpdateCommand(undoRedriveUpdate(io.table, before, resetVersion, now))),
    );
    return true;
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
    // Its answer lost and the retry refused: undone when the item is `before` again at the next version.
    const item = await io.get(before.dedupKey);
    return item?.version === resetVersion + 1 && item.status === before.status && item.updatedAt === now;
  }
}
