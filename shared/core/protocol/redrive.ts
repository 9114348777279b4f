// The operator's redrive (docs/protocol.md, E10): the reset of a job whose letter is sent back (fresh
// attempts, RETRY_WAIT, unless finished or under a live lease), what its refusal means (its own write
// whose answer was lost, a change since the plan, or a full history to trim), and the undo of a reset
// whose letter could not be sent.

import {
  HISTORY_MAX,
  type HistoryEvent,
  PROBLEM_AT_ATTRIBUTE,
  PROBLEM_SHARD_ATTRIBUTE,
  problemShard,
} from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import { JobStatus } from '../contract/statuses.ts';
import {
  historyAsRead,
  TRIMMED_SET,
  type TrimmedHistory,
  trimmedHistory,
  trimmedValues,
} from './history-writes.ts';
import { type JobItemUpdate, names } from './update.ts';

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
  // `planned`: the version the redrive planned from; a claim since (a fresh send's reset of a dead key, a
  // copy's takeover) refuses the reset. A replaced history is written at the version read, the planned one.
  const plannedCondition = planned !== undefined && !('replace' in history) ? ' AND #version = :planned' : '';
  // The event is appended while the history has room; a full one is replaced by the caller's trimmed
  // copy under a version condition (the caller read it), so the bound holds without a read on every redrive.
  // An item with no room for the event (refused for size) is redriven without it, keeping the index keys
  // (a redriven job is a problem job still); with no room for those either, without them: the redrive
  // the history came after, which never grew an item.
  const none = 'leaveOut' in history;
  const keys = !('leaveOut' in history) || history.leaveOut === 'events';
  const appendOrReplace = none
    ? ''
    : 'replace' in history
      ? `, ${TRIMMED_SET}`
      : ', #history = list_append(if_not_exists(#history, :emptyList), :event)';
  const historyCondition = none
    ? ''
    : 'replace' in history
      ? ` AND #version = :readVersion AND ${historyAsRead(history.read)}`
      : ' AND (attribute_not_exists(#history) OR size(#history) < :historyMax)';
  return {
    TableName: tableName,
    Key: { dedupKey },
    UpdateExpression:
      'SET #status = :retryWait, #leaseUntil = :zero, #attempts = :zero, #version = #version + :one, ' +
      `#updatedAt = :now, #expiresAt = :expiresAt${appendOrReplace}` +
      (keys ? ', #problemShard = :problemShard, #problemAt = :now ' : ' ') +
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
      ...(none ? {} : names('history')),
      ...(keys ? { '#problemShard': PROBLEM_SHARD_ATTRIBUTE, '#problemAt': PROBLEM_AT_ATTRIBUTE } : {}),
      ...('replace' in history ? names('historyDropped') : {}),
      ...names('status', 'leaseUntil', 'attempts', 'version', 'updatedAt', 'expiresAt', 'owner'),
      ...names('deadReason', 'refunds', 'conflicts', 'deadAt', 'deadKeyUntil'),
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
      ...(keys ? { ':problemShard': problemShard(dedupKey) } : {}),
      ...('replace' in history
        ? trimmedValues(history)
        : 'event' in history
          ? { ':event': [history.event], ':emptyList': [], ':historyMax': HISTORY_MAX }
          : {}),
    },
  };
}

/**
 * The redrive's history write: append `event`, or (history full) replace it with a trimmed copy read at
 * `readVersion`; or, no room in the item, leave the event out (`events`: the index keys are still set) or
 * the keys too (`all`).
 */
export type RedriveHistory =
  | { readonly event: HistoryEvent & { readonly e: 'redrive' } }
  | TrimmedHistory
  | { readonly leaveOut: 'events' | 'all' };

/**
 * A refused reset read again (`item`, consistent): refused because finished, under a live lease, absent,
 * moved since the plan's read (`planned`) or its history full; or, with `planned`, this very reset landed
 * and its answer was lost (the SDK's retry refused): true. Only a full history is tried again (the history
 * to write, trimmed over the version and the list read); anything else: false.
 */
export function refusedRedrive(
  item: JobItem | undefined,
  event: HistoryEvent & { readonly e: 'redrive' },
  planned: number | undefined,
  now: number,
): boolean | TrimmedHistory {
  if (planned !== undefined && ownRedriveReset(item, planned, now)) return true;
  if (planned !== undefined && item?.version !== planned) return false;
  if (!item || (item.history?.length ?? 0) < HISTORY_MAX) return false;
  return trimmedHistory(item, event);
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

/** A refused undo read again: undone after all (its answer lost, the retry refused) when `item` is `before` again at the next version. */
export function isOwnUndo(
  item: JobItem | undefined,
  before: JobItem,
  resetVersion: number,
  now: number,
): boolean {
  return item?.version === resetVersion + 1 && item.status === before.status && item.updatedAt === now;
}
