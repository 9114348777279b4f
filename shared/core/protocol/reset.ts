// The reset of a dead key (docs/protocol.md, "Dead keys"): a fresh send of a DEAD key whose
// `deadKeyUntil` passed claims it in one write, the item reset (attempts 1, a new token, no checkpoint
// or dead-letter cause, the key's next `life`) and its history kept with a `reset` event. A message a
// redrive sent for a life of the key (`life`) is never a fresh send. Asked for by a refused claim
// ({@link deadKeyToReset}); its own refusal is read by {@link refusedReset}.

import type { HistoryEvent } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { ClaimRequest, ClaimResult, JobLease } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { afterHistoryWrite, historyWrite } from '../decisions/history.ts';
import { attemptOf, deadKeyExpired } from '../decisions/history-events.ts';
import { refusedClaim } from './claim.ts';
import { withHistory } from './history-writes.ts';
import { type JobItemUpdate, names, type RawItem } from './update.ts';

/** The DEAD item a refused claim (`refused`) may reset: a fresh send of its type past `deadKeyUntil`. */
export function deadKeyToReset(refused: ClaimResult, req: ClaimRequest): JobItem | undefined {
  if (refused.claimed || req.onlyIfMessageId !== undefined) return undefined;
  const dead = refused.existing;
  return dead.type === req.type && deadKeyExpired(dead, req.now, req) ? dead : undefined;
}

/**
 * The reset claim of `dead` with its `reset` event, and the claim it answers when it goes through. Over
 * the DEAD item's list as refused (its token is the condition): a refusal here would drop the fresh send
 * as a dead copy, so a dropped copy counted in between may be written over.
 */
export function resetClaim(
  tableName: string,
  req: ClaimRequest,
  dead: JobItem,
  lease: { readonly leaseUntil: number; readonly expiresAt: number },
): { readonly update: JobItemUpdate; readonly answer: ClaimResult } {
  const claimed: JobLease = {
    dedupKey: req.dedupKey,
    owner: req.owner,
    token: dead.token + 1,
    attempts: 1,
    messageId: req.messageId,
    version: dead.version + 1,
    leaseUntil: lease.leaseUntil,
  };
  const reset: HistoryEvent = { e: 'reset', at: req.now, ...attemptOf(claimed), wasDeadAt: dead.deadAt ?? 0 };
  const history = historyWrite(req.dedupKey, dead.history, [reset], req.now);
  const update = withHistory(resetClaimUpdate(tableName, req, dead, lease), history, {
    overKnownList: false,
  });
  const known = afterHistoryWrite(dead.history, history);
  if (known?.length) claimed.history = known;
  return { update, answer: { claimed: true, lease: claimed, kind: 'fresh', wasDeadAt: dead.deadAt ?? 0 } };
}

/**
 * A refused reset claim of `dead` (`item`: its refusal's old item; undefined: there is none). Another
 * copy reset it first: that refusal. This very reset landed and only its answer was lost (the SDK sent
 * it again): the claim it made, as when it answers (`wasDeadAt` too). No item: TTL deleted the DEAD item
 * since the refused claim read it, the key is absent (`gone`: the caller claims it as a new job).
 */
export function refusedReset(
  item: RawItem | undefined,
  req: ClaimRequest,
  dead: JobItem,
): ClaimResult | 'gone' {
  if (item === undefined) return 'gone';
  const refused = refusedClaim(item, req);
  return refused.claimed ? { ...refused, wasDeadAt: dead.deadAt ?? 0 } : refused;
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
      '#claimedAt = :now, #updatedAt = :now, #expiresAt = :expiresAt, ' +
      '#life = if_not_exists(#life, :zero) + :one' +
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
      ...names('status', 'owner', 'leaseUntil', 'token', 'attempts', 'version', 'messageId', 'createdAt'),
      ...names('claimedAt', 'updatedAt', 'expiresAt', 'checkpoint', 'deadReason', 'deadAt', 'deadKeyUntil'),
      ...names('lastError', 'lastErrorClass', 'refunds', 'conflicts', 'completedAt', 'type', 'originId'),
      ...names('life'),
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
      ':zero': 0,
      ':messageId': req.messageId,
      ':createdAt': req.createdAt,
      ':now': req.now,
      ':expiresAt': lease.expiresAt,
      ':type': req.type,
    },
  };
}
