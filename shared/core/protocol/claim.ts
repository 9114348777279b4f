// The claim (docs/protocol.md, E1-E3 and E13's claim of its own item): takes a job that is new, or
// unfinished with its lease over; the lease its answer (ALL_OLD) gives, and what its refusal means; and
// the best-effort count of a dead copy a refused claim drops. The fast commit is this write too, with the
// completion (complete.ts); a DEAD key open to a fresh send is claimed by reset.ts.

import { HISTORY_MAX, type HistoryEvent } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { ClaimRequest, ClaimResult, JobLease } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { classifyClaim, isOwnClaim } from '../decisions/claim-decision.ts';
import { claimHistory } from '../decisions/history-events.ts';
import { claimCounters } from '../decisions/lease-arithmetic.ts';
import { type JobItemUpdate, names, type RawItem, unmarshallItem } from './update.ts';

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
  // A message a redrive sent for one life of the key takes an item of that life only (or none).
  const life = req.life;
  const ofLife =
    life === undefined ? '' : life === 0 ? ' AND attribute_not_exists(#life)' : ' AND #life = :life';
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
        `AND attribute_not_exists(#deadReason)${ofLife})`
      : only !== undefined
        ? // A refused payload's own job (E13): only the item that still names that message.
          'attribute_exists(#dedupKey) AND NOT #status IN (:completed, :dead, :cancelled) AND #leaseUntil < :now ' +
          `AND #type = :type AND #messageId = :onlyIfMessageId${ofLife}`
        : 'attribute_not_exists(#dedupKey) OR (NOT #status IN (:completed, :dead, :cancelled) AND #leaseUntil < :now ' +
          `AND #type = :type${ofLife})`,
    ExpressionAttributeNames: {
      ...names('dedupKey', 'status', 'owner', 'leaseUntil', 'token', 'attempts', 'version', 'messageId'),
      ...names('type', 'createdAt', 'claimedAt', 'updatedAt', 'expiresAt', 'originId'),
      ...(life === undefined ? {} : names('life')),
      ...(completes
        ? names('completedAt', 'result', 'checkpoint', 'deadReason', 'lastError', 'lastErrorClass')
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
      ...(life ? { ':life': life } : {}),
    },
  };
}

/** The REMOVE clause of a claim: a completion's last error, and an earlier claimer's origin unless it is set. */
function claimRemoves(completes: boolean, setsOrigin: boolean): string {
  const removed = [
    ...(completes ? ['#lastError', '#lastErrorClass'] : []),
    ...(setsOrigin ? [] : ['#originId']),
  ];
  return removed.length === 0 ? '' : ` REMOVE ${removed.join(', ')}`;
}

/**
 * A claim that went through: `previous` is the item it replaced (ALL_OLD on success), from which the new
 * values follow exactly as the update expression computes them; it tells fresh, retry and takeover apart.
 */
export function claimAnswer(
  req: ClaimRequest,
  previous: JobItem | undefined,
  leaseUntil: number,
): ClaimResult {
  const counted = claimCounters(previous, req.now);
  const kind = classifyClaim(previous);
  const lease = leaseOf(req, { ...counted, leaseUntil }, previous);
  Object.assign(
    lease,
    claimHistory(previous, { owner: req.owner, ...counted }, kind === 'takeover', req.now),
  );
  return previous ? { claimed: true, lease, kind, previous } : { claimed: true, lease, kind: 'fresh' };
}

/** A refused claim: someone else's job, unless the refusal was of this very claim (then we hold it). */
export function refusedClaim(item: RawItem, req: ClaimRequest): ClaimResult {
  const existing = unmarshallItem(item);
  if (!isOwnClaim(existing, req)) return { claimed: false, existing };
  // Our claim went through and only its answer was lost (the SDK retried it): hold it.
  const lease: JobLease = {
    ...leaseOf(req, existing, existing),
    // The claim wrote no event: the list is the item's, so this lease's appends keep within the bound.
    ...(existing.history?.length ? { history: [...existing.history] } : {}),
  };
  // `previous` is the item as the claim left it: what the claim does not write (a recorded dead-letter
  // cause, the last error) is as it was before, and the processor must see it (a recorded cause is
  // finished, not run again).
  return { claimed: true, lease, kind: existing.attempts > 1 ? 'retry' : 'fresh', previous: existing };
}

/** The lease of a claim: `req`'s owner and message, `counts`, and what it keeps of `item` (counts given back, the checkpoint). */
function leaseOf(
  req: ClaimRequest,
  counts: Pick<JobLease, 'token' | 'attempts' | 'version' | 'leaseUntil'>,
  item: JobItem | undefined,
): JobLease {
  const { token, attempts, version, leaseUntil } = counts;
  return {
    dedupKey: req.dedupKey,
    owner: req.owner,
    token,
    attempts,
    messageId: req.messageId,
    version,
    leaseUntil,
    ...(item?.refunds ? { refunds: item.refunds } : {}),
    ...(item?.conflicts ? { conflicts: item.conflicts } : {}),
    ...(item?.checkpoint ? { checkpoint: item.checkpoint } : {}),
  };
}

/**
 * Best effort, after a refused claim of a DEAD item `dead` dropped a copy (or of a waiting item, RETRY_WAIT,
 * a message sent for another life of its key: `dead.status`): one more dropped copy, the last event (at
 * `index`) replaced by the grown `dropped` event when it is one, else the event appended (room
 * permitting). Only while the item is that item (same status and token) and, in place, its list is the
 * one read (same length); refused, the item changed since (a redrive, a claim, another copy counted): not
 * counted here.
 */
export function droppedCopyUpdate(
  tableName: string,
  dead: Pick<JobItem, 'dedupKey' | 'token' | 'history'> & { readonly status?: JobStatus },
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
      ? '#status = :status AND #token = :token AND size(#history) = :length'
      : '#status = :status AND #token = :token AND (attribute_not_exists(#history) OR size(#history) < :length)',
    ExpressionAttributeNames: names('status', 'token', 'history'),
    ExpressionAttributeValues: {
      ':status': dead.status ?? JobStatus.Dead,
      ':token': dead.token,
      ...(inPlace
        ? { ':event': dropped.event, ':length': (dead.history ?? []).length }
        : { ':noEvents': [], ':events': [dropped.event], ':length': HISTORY_MAX }),
    },
  };
}
