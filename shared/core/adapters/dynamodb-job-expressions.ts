// The DynamoDB expressions of the `jobs` table: the condition and update of every write the job store
// makes (docs/protocol.md, the state machine's edges), and the operator's scan, as plain inputs. Pure;
// the adapters send them and read the answers (dynamodb-refusals.ts for the refused writes). A write's
// history clauses are in dynamodb-history-expressions.ts.

import type { ScanCommandInput } from '@aws-sdk/lib-dynamodb';
import { ERROR_CLASS_MAX, storableText } from '../../errors.ts';
import {
  HISTORY_MAX,
  type HistoryEvent,
  PROBLEM_AT_ATTRIBUTE,
  PROBLEM_SHARD_ATTRIBUTE,
  problemShard,
} from '../contract/job-history.ts';
import type { Checkpoint, JobItem } from '../contract/job-item.ts';
import type { ClaimRequest, DeadLetterCause, Effect, JobLease } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { fenceCause, isMinimalCause } from './dynamodb-limits.ts';

/** An UpdateItem of one job item: sent alone, or as the first item of a transaction with effects. */
export type JobItemUpdate = NonNullable<Effect['Update']> & {
  Key: Record<string, unknown>;
  ExpressionAttributeValues: Record<string, unknown>;
};

// Every write after the claim: still my lease (owner + token) and the job still running. The status check
// keeps a COMPLETED job from being released or marked DEAD by its own owner after a commit whose answer
// was lost (the owner would otherwise hand a finished job out again).
export const FENCE = '#owner = :owner AND #token = :token AND #status = :inProgress';

/** What a fast commit writes besides the claim's attributes, and the attempt budget it checks. */
export interface ClaimCompletion {
  readonly result: unknown;
  readonly maxAttempts: number;
}

/**
 * The claim's write: takes the job if there is no item, or it is not finished, its lease is over and it
 * is a job of the request's type. Without `completion` it is a claim (IN_PROGRESS); with it, the fast
 * path's one-write commit (COMPLETED, with the result).
 */
export function claimUpdate(
  tableName: string,
  req: Omit<ClaimRequest, 'leaseMs'>,
  lease: { readonly leaseUntil: number; readonly expiresAt: number },
  completion?: ClaimCompletion,
): JobItemUpdate {
  const completes = completion !== undefined;
  const only = completes ? undefined : (req as Partial<ClaimRequest>).onlyIfMessageId;
  return {
    TableName: tableName,
    Key: { dedupKey: req.dedupKey },
    // The token starts from the clock when the item is new, so it keeps growing even after TTL
    // deleted an old item (whose tokens were all issued long before it expired).
    UpdateExpression:
      'SET #status = :status, #owner = :owner, #leaseUntil = :leaseUntil, ' +
      '#token = if_not_exists(#token, :now) + :one, #attempts = if_not_exists(#attempts, :zero) + :one, ' +
      '#version = if_not_exists(#version, :zero) + :one, #messageId = :messageId, #type = :type, ' +
      '#createdAt = if_not_exists(#createdAt, :createdAt), #claimedAt = :now, #updatedAt = :now, ' +
      '#expiresAt = :expiresAt' +
      (req.originId === undefined ? '' : ', #originId = :originId') +
      (completes ? ', #completedAt = :now, #result = :result' : '') +
      // The item names its message's origin only for a re-sent message: an earlier claimer's goes.
      claimRemoves(completes, req.originId !== undefined),
    // The item's type is the one its first claim wrote: a message of another type under the same key
    // must never take the job (it would run its own code on the job's checkpoint and complete it), so
    // the SET of #type below only ever rewrites the same value. A fast commit also refuses an item with
    // a checkpoint (its steps' effects are already committed, and only a leased run resumes from them),
    // one whose attempts are used up, and one whose dead-lettering is unfinished (a leased claim
    // dead-letters those).
    ConditionExpression: completes
      ? 'attribute_not_exists(#dedupKey) OR (NOT #status IN (:completed, :dead, :cancelled) AND #leaseUntil < :now ' +
        'AND #type = :type AND attribute_not_exists(#checkpoint) AND #attempts < :maxAttempts ' +
        'AND attribute_not_exists(#deadReason))'
      : only !== undefined
        ? // A refused payload's own job (E13): only the item that still names that message.
          'attribute_exists(#dedupKey) AND NOT #status IN (:completed, :dead, :cancelled) AND #leaseUntil < :now ' +
          'AND #type = :type AND #messageId = :onlyIfMessageId'
        : 'attribute_not_exists(#dedupKey) OR (NOT #status IN (:completed, :dead, :cancelled) AND #leaseUntil < :now ' +
          'AND #type = :type)',
    ExpressionAttributeNames: {
      '#dedupKey': 'dedupKey',
      '#status': 'status',
      '#owner': 'owner',
      '#leaseUntil': 'leaseUntil',
      '#token': 'token',
      '#attempts': 'attempts',
      '#version': 'version',
      '#messageId': 'messageId',
      '#type': 'type',
      '#createdAt': 'createdAt',
      '#claimedAt': 'claimedAt',
      '#updatedAt': 'updatedAt',
      '#expiresAt': 'expiresAt',
      '#originId': 'originId',
      ...(completes
        ? {
            '#completedAt': 'completedAt',
            '#result': 'result',
            '#checkpoint': 'checkpoint',
            '#deadReason': 'deadReason',
            '#lastError': 'lastError',
            '#lastErrorClass': 'lastErrorClass',
          }
        : {}),
    },
    ExpressionAttributeValues: {
      ':status': completes ? JobStatus.Completed : JobStatus.InProgress,
      ':completed': JobStatus.Completed,
      ':dead': JobStatus.Dead,
      ':cancelled': JobStatus.Cancelled,
      ':owner': req.owner,
      ':leaseUntil': lease.leaseUntil,
      ':now': req.now,
      ':one': 1,
      ':zero': 0,
      ':messageId': req.messageId,
      ...(req.originId === undefined ? {} : { ':originId': req.originId }),
      ':type': req.type,
      ':createdAt': req.createdAt,
      ':expiresAt': lease.expiresAt,
      ...(completes ? { ':result': completion.result ?? null, ':maxAttempts': completion.maxAttempts } : {}),
      ...(only !== undefined ? { ':onlyIfMessageId': only } : {}),
    },
  };
}

/** The REMOVE clause of a claim: a completion's last error, and an earlier claimer's origin unless it is set. */
function claimRemoves(completes: boolean, setsOrigin: boolean): string {
  const names = [
    ...(completes ? ['#lastError', '#lastErrorClass'] : []),
    ...(setsOrigin ? [] : ['#originId']),
  ];
  return names.length === 0 ? '' : ` REMOVE ${names.join(', ')}`;
}

/**
 * A renewal: the new lease end, never backwards (a renewal landing after a later one changes nothing).
 * With `deadLetter`, the dead-letter fence (E9): it also records the cause, and sets the lease end as
 * given (capped to the deadline, it may be sooner than a heartbeat's).
 */
export function renewUpdate(
  tableName: string,
  lease: JobLease,
  leaseUntil: number,
  expiresAt: number,
  deadLetter?: DeadLetterCause,
): JobItemUpdate {
  if (deadLetter !== undefined) {
    const cause = fenceCause(lease, deadLetter);
    // A minimal fence (no error text or class, see RenewOptions) leaves the item's last error as it was.
    const withError = !isMinimalCause(cause);
    return fencedUpdate(tableName, lease, {
      UpdateExpression:
        'SET #leaseUntil = :leaseUntil, #expiresAt = :expiresAt, #deadReason = :deadReason' +
        (withError ? ', #lastError = :lastError, #lastErrorClass = :lastErrorClass' : ''),
      ExpressionAttributeNames: {
        '#leaseUntil': 'leaseUntil',
        '#expiresAt': 'expiresAt',
        '#deadReason': 'deadReason',
        ...(withError ? { '#lastError': 'lastError', '#lastErrorClass': 'lastErrorClass' } : {}),
      },
      ExpressionAttributeValues: {
        ':leaseUntil': leaseUntil,
        ':expiresAt': expiresAt,
        ':deadReason': cause.reason,
        ...(withError ? { ':lastError': cause.errorMessage, ':lastErrorClass': cause.errorClass } : {}),
      },
    });
  }
  return fencedUpdate(tableName, lease, {
    UpdateExpression: 'SET #leaseUntil = :leaseUntil, #expiresAt = :expiresAt',
    ConditionSuffix: ' AND #leaseUntil <= :leaseUntil',
    ExpressionAttributeNames: { '#leaseUntil': 'leaseUntil', '#expiresAt': 'expiresAt' },
    ExpressionAttributeValues: { ':leaseUntil': leaseUntil, ':expiresAt': expiresAt },
  });
}

/** A checkpoint: only over the version this lease last wrote, so a lost answer is never written twice. */
export function checkpointUpdate(tableName: string, lease: JobLease, checkpoint: Checkpoint): JobItemUpdate {
  return fencedUpdate(tableName, lease, {
    UpdateExpression: 'SET #checkpoint = :checkpoint, #version = #version + :one, #updatedAt = :now',
    ConditionSuffix: ' AND #version = :version',
    ExpressionAttributeNames: {
      '#checkpoint': 'checkpoint',
      '#version': 'version',
      '#updatedAt': 'updatedAt',
    },
    ExpressionAttributeValues: {
      ':checkpoint': checkpoint,
      ':one': 1,
      ':now': checkpoint.at,
      ':version': lease.version,
    },
  });
}

/**
 * The completion: COMPLETED with the result; owner and token stay (a later copy meets them). A recorded
 * dead-letter cause goes: a completed job is no dead-lettering left to finish.
 */
export function completeUpdate(
  tableName: string,
  lease: JobLease,
  write: { readonly result: unknown; readonly now: number; readonly expiresAt: number },
): JobItemUpdate {
  return fencedUpdate(tableName, lease, {
    UpdateExpression:
      'SET #status = :completed, #version = #version + :one, #updatedAt = :now, #completedAt = :now, ' +
      '#result = :result, #expiresAt = :expiresAt REMOVE #lastError, #lastErrorClass, #deadReason',
    ExpressionAttributeNames: {
      '#deadReason': 'deadReason',
      '#version': 'version',
      '#updatedAt': 'updatedAt',
      '#completedAt': 'completedAt',
      '#result': 'result',
      '#expiresAt': 'expiresAt',
      '#lastError': 'lastError',
      '#lastErrorClass': 'lastErrorClass',
    },
    ExpressionAttributeValues: {
      ':completed': JobStatus.Completed,
      ':one': 1,
      ':now': write.now,
      ':result': write.result ?? null,
      ':expiresAt': write.expiresAt,
    },
  });
}

/** What the end of an attempt that did not complete writes (a release or a dead marking). */
export interface GiveUpWrite {
  readonly status: JobStatus;
  readonly leaseUntil: number;
  readonly now: number;
  readonly error: { readonly message: string; readonly errorClass: string };
  /** The attempt was not the job's failure (a store outage): count it back, and count the refund. */
  readonly refundAttempt: boolean;
  /** The attempt ended in an optimistic conflict: count it back, and count it in `conflicts` (not `refunds`). */
  readonly conflict?: boolean;
  readonly expiresAt: number;
  /** A DEAD marking: `deadAt` is `now`, and copies are dropped until `deadKeyUntil` (absent: until TTL). */
  readonly dead?: { readonly deadKeyUntil?: number };
}

/** Fenced end of an attempt that did not complete: new status, lease end, last error; owner removed. */
export function giveUpUpdate(tableName: string, lease: JobLease, write: GiveUpWrite): JobItemUpdate {
  const counter = write.conflict ? 'conflicts' : write.refundAttempt ? 'refunds' : undefined;
  return fencedUpdate(tableName, lease, {
    UpdateExpression:
      'SET #status = :status, #leaseUntil = :leaseUntil, #version = #version + :one, #updatedAt = :now, ' +
      '#lastError = :lastError, #lastErrorClass = :lastErrorClass, #expiresAt = :expiresAt' +
      (counter
        ? `, #attempts = #attempts - :one, #${counter} = if_not_exists(#${counter}, :zero) + :one`
        : '') +
      (write.dead ? ', #deadAt = :now' : '') +
      (write.dead?.deadKeyUntil !== undefined ? ', #deadKeyUntil = :deadKeyUntil' : '') +
      // A type without deadKeyTtl (now) keeps its copies dropped: no earlier death's deadKeyUntil stays.
      (write.dead && write.dead.deadKeyUntil === undefined
        ? ' REMOVE #owner, #deadKeyUntil'
        : ' REMOVE #owner'),
    ExpressionAttributeNames: {
      ...(counter ? { '#attempts': 'attempts', [`#${counter}`]: counter } : {}),
      ...(write.dead ? { '#deadAt': 'deadAt' } : {}),
      ...(write.dead ? { '#deadKeyUntil': 'deadKeyUntil' } : {}),
      '#leaseUntil': 'leaseUntil',
      '#version': 'version',
      '#updatedAt': 'updatedAt',
      '#lastError': 'lastError',
      '#lastErrorClass': 'lastErrorClass',
      '#expiresAt': 'expiresAt',
    },
    ExpressionAttributeValues: {
      ':status': write.status,
      ':leaseUntil': write.leaseUntil,
      ':one': 1,
      ':now': write.now,
      ':lastError': storableText(write.error.message),
      ':lastErrorClass': storableText(write.error.errorClass, ERROR_CLASS_MAX),
      ':expiresAt': write.expiresAt,
      ...(counter ? { ':zero': 0 } : {}),
      ...(write.dead?.deadKeyUntil !== undefined ? { ':deadKeyUntil': write.dead.deadKeyUntil } : {}),
    },
  });
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
      ? ', #history = :history, #historyDropped = if_not_exists(#historyDropped, :zero) + :dropped'
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
      ...(none ? {} : { '#history': 'history' }),
      ...(keys ? { '#problemShard': PROBLEM_SHARD_ATTRIBUTE, '#problemAt': PROBLEM_AT_ATTRIBUTE } : {}),
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
      ...(keys ? { ':problemShard': problemShard(dedupKey) } : {}),
      ...('replace' in history
        ? {
            ':history': history.replace,
            ':dropped': history.dropped,
            ':readVersion': history.readVersion,
            ...historyAsReadValues(history.read),
          }
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
 * A full history replaced by its trimmed copy (`replace`, `dropped` more in `historyDropped`), read at
 * `readVersion` with the list `read`: written only over that very list. The version alone does not tell
 * it: a heartbeat's event (renewals keep the version), a lost lease's event and a dropped copy's count
 * change the list and not the version, and the replace would write them over.
 */
export interface TrimmedHistory {
  readonly replace: readonly HistoryEvent[];
  readonly dropped: number;
  readonly readVersion: number;
  readonly read: readonly HistoryEvent[];
}

/**
 * The condition that the item's history is still the list `read` (not empty): as long, and ending in the
 * same event. Any write since appended to it (longer), trimmed it (another last event: every trim ends
 * in the events it added) or grew its last `dropped` event (another count). One event in the request,
 * not the list.
 */
function historyAsRead(read: readonly HistoryEvent[]): string {
  return `size(#history) = :readLength AND #history[${Math.max(0, read.length - 1)}] = :readLast`;
}

function historyAsReadValues(read: readonly HistoryEvent[]): Record<string, unknown> {
  return { ':readLength': read.length, ':readLast': read[read.length - 1] ?? null };
}

/** An update of this lease's item under the {@link FENCE} (and `ConditionSuffix`, `' AND ...'`). */
function fencedUpdate(
  tableName: string,
  lease: JobLease,
  parts: {
    readonly UpdateExpression: string;
    readonly ConditionSuffix?: string;
    readonly ExpressionAttributeNames: Record<string, string>;
    readonly ExpressionAttributeValues: Record<string, unknown>;
  },
): JobItemUpdate {
  return {
    TableName: tableName,
    Key: { dedupKey: lease.dedupKey },
    UpdateExpression: parts.UpdateExpression,
    ConditionExpression: FENCE + (parts.ConditionSuffix ?? ''),
    ExpressionAttributeNames: {
      ...parts.ExpressionAttributeNames,
      '#owner': 'owner',
      '#token': 'token',
      '#status': 'status',
    },
    ExpressionAttributeValues: {
      ...parts.ExpressionAttributeValues,
      ':owner': lease.owner,
      ':token': lease.token,
      ':inProgress': JobStatus.InProgress,
    },
  };
}

/**
 * The operator's scan of the `jobs` table: a projection onto the fields of `JobSummaryItem`
 * (dynamodb-scans.ts), so no payloads, results or checkpoint data travel; with `status`, only those items.
 */
export function jobSummaryScan(tableName: string, status?: JobStatus): ScanCommandInput {
  return {
    TableName: tableName,
    ProjectionExpression:
      '#dedupKey, #status, #owner, #leaseUntil, #token, #attempts, #type, #claimedAt, #createdAt, #updatedAt, ' +
      '#checkpoint.#at, #checkpoint.#step',
    ExpressionAttributeNames: {
      '#dedupKey': 'dedupKey',
      '#status': 'status',
      '#owner': 'owner',
      '#leaseUntil': 'leaseUntil',
      '#token': 'token',
      '#attempts': 'attempts',
      '#type': 'type',
      '#claimedAt': 'claimedAt',
      '#createdAt': 'createdAt',
      '#updatedAt': 'updatedAt',
      '#checkpoint': 'checkpoint',
      '#at': 'at',
      '#step': 'step',
    },
    ...(status
      ? { FilterExpression: '#status = :status', ExpressionAttributeValues: { ':status': status } }
      : {}),
  };
}

/**
 * The claim of a DEAD key whose `deadKeyUntil` passed (a fresh send runs it): the item as `dead` (the
 * refused claim's old item) is reset and claimed in one write: attempts 1, a new token, no checkpoint,
 * dead-letter cause, last error or refunds; its history is kept, with a `reset` event (in `history`).
 * Only over that very item: still DEAD with the same token, so two copies cannot both reset it.
 */
export function resetClaimUpdate(
  tableName: string,
  req: Omit<ClaimRequest, 'leaseMs'>,
  dead: Pick<JobItem, 'token' | 'version'>,
  lease: { readonly leaseUntil: number; readonly expiresAt: number },
): JobItemUpdate {
  return {
    TableName: tableName,
    Key: { dedupKey: req.dedupKey },
    UpdateExpression:
      'SET #status = :inProgress, #owner = :owner, #leaseUntil = :leaseUntil, #token = :newToken, ' +
      '#attempts = :one, #version = :newVersion, #messageId = :messageId, #createdAt = :createdAt, ' +
      '#claimedAt = :now, #updatedAt = :now, #expiresAt = :expiresAt' +
      (req.originId === undefined ? '' : ', #originId = :originId') +
      ' REMOVE #checkpoint, #deadReason, #deadAt, #deadKeyUntil, #lastError, #lastErrorClass, #refunds, #conflicts, #completedAt' +
      (req.originId === undefined ? ', #originId' : ''),
    // The dead job's own message back (its delete failed), under any id a limit's re-send gave it, is a
    // copy, not a fresh send: the item's origin (`originId`, else `messageId`) differs from this one's.
    ConditionExpression:
      '#status = :dead AND #deadKeyUntil < :now AND #token = :deadToken AND #type = :type ' +
      'AND #messageId <> :messageId AND ((attribute_exists(#originId) AND #originId <> :origin) OR ' +
      '(attribute_not_exists(#originId) AND #messageId <> :origin))',
    ExpressionAttributeNames: {
      '#status': 'status',
      '#owner': 'owner',
      '#leaseUntil': 'leaseUntil',
      '#token': 'token',
      '#attempts': 'attempts',
      '#version': 'version',
      '#messageId': 'messageId',
      '#createdAt': 'createdAt',
      '#claimedAt': 'claimedAt',
      '#updatedAt': 'updatedAt',
      '#expiresAt': 'expiresAt',
      '#checkpoint': 'checkpoint',
      '#deadReason': 'deadReason',
      '#deadAt': 'deadAt',
      '#deadKeyUntil': 'deadKeyUntil',
      '#lastError': 'lastError',
      '#lastErrorClass': 'lastErrorClass',
      '#refunds': 'refunds',
      '#conflicts': 'conflicts',
      '#completedAt': 'completedAt',
      '#type': 'type',
      '#originId': 'originId',
    },
    ExpressionAttributeValues: {
      ':inProgress': JobStatus.InProgress,
      ':dead': JobStatus.Dead,
      ':origin': req.originId ?? req.messageId,
      ...(req.originId === undefined ? {} : { ':originId': req.originId }),
      ':owner': req.owner,
      ':leaseUntil': lease.leaseUntil,
      ':newToken': dead.token + 1,
      ':deadToken': dead.token,
      ':one': 1,
      ':newVersion': dead.version + 1,
      ':messageId': req.messageId,
      ':createdAt': req.createdAt,
      ':now': req.now,
      ':expiresAt': lease.expiresAt,
      ':type': req.type,
    },
  };
}

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
        ? '#history = :history, #historyDropped = if_not_exists(#historyDropped, :zero) + :dropped, '
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
      '#status': 'status',
      '#token': 'token',
      '#version': 'version',
      '#attempts': 'attempts',
      '#leaseUntil': 'leaseUntil',
      '#updatedAt': 'updatedAt',
      '#expiresAt': 'expiresAt',
      '#history': 'history',
      '#problemShard': PROBLEM_SHARD_ATTRIBUTE,
      '#problemAt': PROBLEM_AT_ATTRIBUTE,
      '#deadReason': 'deadReason',
      ...(replace ? { '#historyDropped': 'historyDropped' } : { '#dedupKey': 'dedupKey' }),
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
        ? {
            ':history': history.replace,
            ':dropped': history.dropped,
            ':readVersion': history.readVersion,
            ...historyAsReadValues(history.read),
          }
        : { ':noEvents': [], ':events': [history.event], ':historyMax': HISTORY_MAX }),
    },
  };
}
