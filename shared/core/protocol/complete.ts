// The completion (docs/protocol.md, E6): the fenced commit of a leased run, and the fast path's one-write
// commit (E12, the claim's write with the result, claim.ts); what a refused or cancelled fast commit means.

import type { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import type { JobItem } from '../contract/job-item.ts';
import type { FastCommitRequest, FastCommitResult, JobLease } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { type ClaimCompletion, claimUpdate } from './claim.ts';
import { effectCancellation, fencedUpdate } from './fence.ts';
import { type JobItemUpdate, names, type RawItem, unmarshallItem } from './update.ts';

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
    ExpressionAttributeNames: names(
      'deadReason',
      'version',
      'updatedAt',
      'completedAt',
      'result',
      'expiresAt',
      'lastError',
      'lastErrorClass',
    ),
    ExpressionAttributeValues: {
      ':completed': JobStatus.Completed,
      ':one': 1,
      ':now': write.now,
      ':result': write.result ?? null,
      ':expiresAt': write.expiresAt,
    },
  });
}

/** The fast commit (E12): the claim's write, COMPLETED with the result, its lease ending as it starts. */
export function fastCommitUpdate(
  tableName: string,
  req: FastCommitRequest,
  expiresAt: number,
  completion: ClaimCompletion,
): JobItemUpdate {
  return claimUpdate(tableName, req, { leaseUntil: req.now, expiresAt }, completion);
}

/** A refused fast commit without effects: refused, unless it was this very commit. */
export function refusedFastCommit(item: RawItem, req: FastCommitRequest): FastCommitResult {
  const existing = unmarshallItem(item);
  // Refused by itself: the answer was lost and the SDK retried a write that went through.
  if (isOwnFastCommit(existing, req)) return { ok: true };
  return { ok: false, reason: 'refused', existing };
}

/** A cancelled fast commit with effects: the claim's condition refused it, or an effect's did. */
export function cancelledFastCommit(error: TransactionCanceledException): FastCommitResult {
  const first = error.CancellationReasons?.[0];
  if (first?.Code === 'ConditionalCheckFailed' && first.Item) {
    return { ok: false, reason: 'refused', existing: unmarshallItem(first.Item) };
  }
  return effectCancellation('claim-and-complete', error);
}

/** A refused fast commit that was this very commit: COMPLETED by our owner and message at our time. */
function isOwnFastCommit(old: JobItem, req: FastCommitRequest): boolean {
  return (
    old.status === JobStatus.Completed &&
    old.owner === req.owner &&
    old.messageId === req.messageId &&
    old.claimedAt === req.now
  );
}
