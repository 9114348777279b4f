// The DynamoDB expressions of the `jobs` table: the condition and update of every write the job store
// makes (docs/protocol.md, the state machine's edges), and the operator's scan, as plain inputs. Pure;
// the adapters send them and read the answers (dynamodb-refusals.ts for the refused writes).

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
import type { HistoryWrite } from '../decisions/history.ts';
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
      (completes ? ', #completedAt = :now, #result = :result REMOVE #lastError, #lastErrorClass' : ''),
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
      ':type': req.type,
      ':createdAt': req.createdAt,
      ':expiresAt': lease.expiresAt,
      ...(completes ? { ':result': completion.result ?? null, ':maxAttempts': completion.maxAttempts } : {}),
    },
  };
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
 * `update` with a history write added to the same request (docs/protocol.md, "History"): the events cost
 * item bytes, never a request. Appends with `list_append(if_not_exists(...))`, or replaces the list and
 * ADDs the dropped count when the writer's known list would pass HISTORY_MAX; a problem event also sets
 * the `problems` index keys. Without `history`, `update` unchanged.
 */
export function withHistory(update: JobItemUpdate, history: HistoryWrite | undefined): JobItemUpdate {
  if (history === undefined) return update;
  const sets =
    history.mode === 'append'
      ? ['#history = list_append(if_not_exists(#history, :noEvents), :events)']
      : ['#history = :events'];
  const names: Record<string, string> = { '#history': 'history' };
  const values: Record<string, unknown> =
    history.mode === 'append' ? { ':noEvents': [], ':events': history.events } : { ':events': history.list };
  if (history.problemShard !== undefined && history.problemAt !== undefined) {
    sets.push('#problemShard = :problemShard', '#problemAt = :problemAt');
    names['#problemShard'] = 'problemShard';
    names['#problemAt'] = 'problemAt';
    values[':problemShard'] = history.problemShard;
    values[':problemAt'] = history.problemAt;
  }
  let expression = addSets(update.UpdateExpression ?? '', sets.join(', '));
  if (history.mode === 'replace') {
    expression += ' ADD #historyDropped :historyDropped';
    names['#historyDropped'] = 'historyDropped';
    values[':historyDropped'] = history.dropped;
  }
  return {
    ...update,
    UpdateExpression: expression,
    ExpressionAttributeNames: { ...update.ExpressionAttributeNames, ...names },
    ExpressionAttributeValues: { ...update.ExpressionAttributeValues, ...values },
  };
}

/** `sets` added to the SET clause of `expression` (which starts with one). */
function addSets(expression: string, sets: string): string {
  if (!expression.startsWith('SET ')) throw new Error(`unreachable: no SET clause in ${expression}`);
  const remove = expression.indexOf(' REMOVE ');
  return remove < 0
    ? `${expression}, ${sets}`
    : `${expression.slice(0, remove)}, ${sets}${expression.slice(remove)}`;
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
      '#claimedAt = :now, #updatedAt = :now, #expiresAt = :expiresAt ' +
      'REMOVE #checkpoint, #deadReason, #deadAt, #deadKeyUntil, #lastError, #lastErrorClass, #refunds, #conflicts, #completedAt',
    // The dead job's own message back (its delete failed) is a copy, not a fresh send.
    ConditionExpression:
      '#status = :dead AND #deadKeyUntil < :now AND #token = :deadToken AND #type = :type ' +
      'AND #messageId <> :messageId',
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
    },
    ExpressionAttributeValues: {
      ':inProgress': JobStatus.InProgress,
      ':dead': JobStatus.Dead,
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

/**
 * Best effort, unfenced: a `lease-lost` event appended to the item if it exists and its history has room
 * (this write knows no list to cut, so it never passes HISTORY_MAX). No protocol field changes.
 */
export function leaseLostUpdate(
  tableName: string,
  dedupKey: string,
  event: HistoryEvent,
  problem: { readonly problemShard: string; readonly problemAt: number },
): JobItemUpdate {
  return {
    TableName: tableName,
    Key: { dedupKey },
    UpdateExpression:
      'SET #history = list_append(if_not_exists(#history, :noEvents), :events), ' +
      '#problemShard = :problemShard, #problemAt = :problemAt',
    ConditionExpression:
      'attribute_exists(#dedupKey) AND (attribute_not_exists(#history) OR size(#history) < :historyMax)',
    ExpressionAttributeNames: {
      '#dedupKey': 'dedupKey',
      '#history': 'history',
      '#problemShard': 'problemShard',
      '#problemAt': 'problemAt',
    },
    ExpressionAttributeValues: {
      ':noEvents': [],
      ':events': [event],
      ':historyMax': HISTORY_MAX,
      ':problemShard': problem.problemShard,
      ':problemAt': problem.problemAt,
    },
  };
}

/**
 * Best effort: one more dropped copy of the DEAD item `dead`: the last event (at `index`) replaced by the
 * grown `dropped` event when it is one, else the event appended (room permitting). Only while the item is
 * that DEAD item (same token) and, in place, its list is the one read (same length).
 */
export function droppedCopyUpdate(
  tableName: string,
  dead: Pick<JobItem, 'dedupKey' | 'token' | 'history'>,
  dropped: { readonly event: HistoryEvent; readonly index?: number },
): JobItemUpdate {
  const inPlace = dropped.index !== undefined;
  return {
    TableName: tableName,
    Key: { dedupKey: dead.dedupKey },
    UpdateExpression: inPlace
      ? `SET #history[${dropped.index}] = :event`
      : 'SET #history = list_append(if_not_exists(#history, :noEvents), :events)',
    ConditionExpression: inPlace
      ? '#status = :dead AND #token = :token AND size(#history) = :length'
      : '#status = :dead AND #token = :token AND (attribute_not_exists(#history) OR size(#history) < :length)',
    ExpressionAttributeNames: { '#status': 'status', '#token': 'token', '#history': 'history' },
    ExpressionAttributeValues: {
      ':dead': JobStatus.Dead,
      ':token': dead.token,
      ...(inPlace
        ? { ':event': dropped.event, ':length': (dead.history ?? []).length }
        : { ':noEvents': [], ':events': [dropped.event], ':length': HISTORY_MAX }),
    },
  };
}

/** The cancel's history write: append `event`, or (history full) replace it with a trimmed copy read at `readVersion`. */
export type CancelHistory =
  | { readonly event: HistoryEvent }
  | { readonly replace: readonly HistoryEvent[]; readonly dropped: number; readonly readVersion: number };

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
      ? '#status IN (:inProgress, :retryWait) AND #version = :readVersion AND attribute_not_exists(#deadReason)'
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
        ? { ':history': history.replace, ':dropped': history.dropped, ':readVersion': history.readVersion }
        : { ':noEvents': [], ':events': [history.event], ':historyMax': HISTORY_MAX }),
    },
  };
}
