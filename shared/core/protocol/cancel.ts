// The cancel (docs/protocol.md, C1/C2): an unfinished job (or no item: a tombstone) becomes CANCELLED in
// one write; what its answer (ALL_OLD) and its refusal mean (finished, cancelled before, this very cancel
// whose answer was lost, or a full history to trim at the version read).

import {
  HISTORY_MAX,
  type HistoryEvent,
  PROBLEM_AT_ATTRIBUTE,
  PROBLEM_SHARD_ATTRIBUTE,
  problemShard,
} from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { CancelResult } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { historyAsRead, TRIMMED_SET, type TrimmedHistory, trimmedValues } from './history-writes.ts';
import { type JobItemUpdate, names, type RawItem, unmarshallItem } from './update.ts';

/** The cancel's history write: append `event`, or (history full) replace it with a trimmed copy read at `readVersion`. */
export type CancelHistory = { readonly event: HistoryEvent } | TrimmedHistory;

/**
 * A cancel (docs/protocol.md, C1/C2): an unfinished job becomes CANCELLED in place (owner and token stay,
 * so its holder's fence refuses it as cancelled), no item becomes a tombstone. One write, whose refusal
 * (ALL_OLD) tells a finished job, one cancelled before, or a full history (then `replace`, at the version
 * read). `version` counts the change; `token` starts from the clock on a tombstone like a claim's.
 */
export function cancelUpdate(
  tableName: string,
  dedupKey: string,
  write: { readonly now: number; readonly expiresAt: number; readonly history: CancelHistory },
): JobItemUpdate {
  const { history } = write;
  const replace = 'replace' in history;
  return {
    TableName: tableName,
    Key: { dedupKey },
    UpdateExpression:
      'SET #status = :cancelled, #token = if_not_exists(#token, :now), ' +
      '#version = if_not_exists(#version, :zero) + :one, #attempts = if_not_exists(#attempts, :zero), ' +
      '#leaseUntil = if_not_exists(#leaseUntil, :zero), #updatedAt = :now, #expiresAt = :expiresAt, ' +
      (replace
        ? `${TRIMMED_SET}, `
        : '#history = list_append(if_not_exists(#history, :noEvents), :events), ') +
      '#problemShard = :problemShard, #problemAt = :now',
    // A job whose dead-lettering began (its fence recorded `deadReason`) is not cancelled: its letter may
    // be on its way, so its end is decided (the refusal answers finished, DEAD).
    ConditionExpression: replace
      ? '#status IN (:inProgress, :retryWait) AND #version = :readVersion AND attribute_not_exists(#deadReason) ' +
        `AND ${historyAsRead(history.read)}`
      : '(attribute_not_exists(#dedupKey) OR #status IN (:inProgress, :retryWait)) ' +
        'AND attribute_not_exists(#deadReason) ' +
        'AND (attribute_not_exists(#history) OR size(#history) < :historyMax)',
    ExpressionAttributeNames: {
      ...names('status', 'token', 'version', 'attempts', 'leaseUntil', 'updatedAt', 'expiresAt', 'history'),
      '#problemShard': PROBLEM_SHARD_ATTRIBUTE,
      '#problemAt': PROBLEM_AT_ATTRIBUTE,
      ...names('deadReason'),
      ...(replace ? names('historyDropped') : names('dedupKey')),
    },
    ExpressionAttributeValues: {
      ':cancelled': JobStatus.Cancelled,
      ':inProgress': JobStatus.InProgress,
      ':retryWait': JobStatus.RetryWait,
      ':now': write.now,
      ':zero': 0,
      ':one': 1,
      ':expiresAt': write.expiresAt,
      ':problemShard': problemShard(dedupKey),
      ...(replace
        ? trimmedValues(history)
        : { ':noEvents': [], ':events': [history.event], ':historyMax': HISTORY_MAX }),
    },
  };
}

/** A cancel's answer from the item it replaced (ALL_OLD; undefined: there was none, a tombstone now). */
export function cancelAnswer(old: JobItem | undefined): CancelResult {
  return old === undefined ? { outcome: 'tombstone' } : cancelled(old.status === JobStatus.InProgress);
}

/**
 * A refused cancel: the job was finished, or cancelled before (the answer); or it is unfinished and only
 * its full history refused the append (`item`: the caller replaces the list at its version). A refusal by
 * this very cancel (its write landed, its answer was lost and the SDK sent it again: the item's last event
 * is `event`, written at its time) answers what that write did, read from the item it left. No item (only
 * a trimmed write, conditioned on the item read, is refused so): it went since (TTL), `item` undefined:
 * the caller cancels again, a tombstone now.
 */
export function refusedCancel(
  raw: RawItem | undefined,
  event?: HistoryEvent & { readonly e: 'cancelled' },
): CancelResult | { readonly item: JobItem | undefined } {
  if (raw === undefined) return { item: undefined };
  const item = unmarshallItem(raw);
  switch (item.status) {
    case JobStatus.Completed:
      return { outcome: 'finished', status: 'COMPLETED' };
    case JobStatus.Dead:
      return { outcome: 'finished', status: 'DEAD' };
    case JobStatus.Cancelled:
      return event && isOwnCancel(item, event)
        ? ownCancelAnswer(item)
        : { outcome: 'already-cancelled', status: 'CANCELLED' };
    default:
      // Its dead-lettering began (the fence recorded the cause): its end is decided.
      return item.deadReason !== undefined ? { outcome: 'finished', status: 'DEAD' } : { item };
  }
}

/** The item a cancel left is this cancel's: written at its time, its event last. */
function isOwnCancel(item: JobItem, event: HistoryEvent & { readonly e: 'cancelled' }): boolean {
  const last = item.history?.at(-1);
  return (
    item.updatedAt === event.at &&
    last?.e === 'cancelled' &&
    last.at === event.at &&
    last.by === event.by &&
    last.reason === event.reason
  );
}

/**
 * What this cancel's landed write did, from the item it left: a tombstone has no type (a job's first
 * claim writes one); a running job keeps its owner (a release removes it, so a waiting job has none).
 */
function ownCancelAnswer(item: JobItem): CancelResult {
  return item.type === undefined ? { outcome: 'tombstone' } : cancelled(item.owner !== undefined);
}

/** A cancel of an unfinished job: running (IN_PROGRESS) or waiting (RETRY_WAIT) before it. */
function cancelled(running: boolean): CancelResult {
  return { outcome: 'cancelled', status: running ? 'IN_PROGRESS' : 'RETRY_WAIT', wasRunning: running };
}
