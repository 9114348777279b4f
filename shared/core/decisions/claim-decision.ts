import type { JobItem } from '../contract/job-item.ts';
import type { ClaimKind, DeadLetterCause } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { deadKeyExpired } from './history-events.ts';
import { isClaimable, leasedRunOnly } from './lease-arithmetic.ts';
import {
  isOwnMessage,
  type MessageIdentity,
  type MessageRef,
  sentForAnotherLife,
  sentIdentity,
} from './message-identity.ts';

/** What a worker does with a message whose claim was refused. */
export type RefusalDecision =
  /** The job is done; this copy is a duplicate: delete it. */
  | { readonly kind: 'duplicate-completed' }
  /** Another message for the same job is being worked on (or waits for its retry): delete this copy. */
  | { readonly kind: 'duplicate-racing'; readonly owner?: string }
  /** Our own message came back while its lease (or backoff) still runs: hide it until then, keep it. */
  | { readonly kind: 'own-message-early'; readonly hideForMs: number }
  /** The job is dead-lettered and sits in the DLQ: delete this copy; redrive is how it runs again. */
  | { readonly kind: 'dead-copy' }
  /** The job was cancelled (or a cancel left a tombstone before it came): delete this copy, never run it. */
  | { readonly kind: 'cancelled-copy' }
  /**
   * A redrive sent this message for another life of the key (`life`), and the unfinished job is of a later
   * one (a fresh send reset the key since): not its copy; delete it, never run it.
   */
  | { readonly kind: 'other-life'; readonly life: number }
  /** The refusal is stale (lease ended between the write and now): give it back for a quick retry. */
  | { readonly kind: 'contended' };

/**
 * Decides the outcome of a refused claim from the item the store returned (ALL_OLD), this message's id
 * (its identity: a limit's bounce may have re-sent it under a new id, decisions/message-identity.ts; a bare
 * id is a message never re-sent) and the clock. Pure: the claim refusals of docs/protocol.md.
 */
export function decideRefusal(old: JobItem, message: MessageIdentity | string, now: number): RefusalDecision {
  const identity = typeof message === 'string' ? sentIdentity(message) : message;
  switch (old.status) {
    case JobStatus.Completed:
      return { kind: 'duplicate-completed' };
    case JobStatus.Dead:
      return { kind: 'dead-copy' };
    case JobStatus.Cancelled:
      return { kind: 'cancelled-copy' };
    case JobStatus.InProgress:
    case JobStatus.RetryWait: {
      // Before the lease: the claim refuses such a message whatever the lease says.
      if (identity.life !== undefined && sentForAnotherLife(old, identity)) {
        return { kind: 'other-life', life: identity.life };
      }
      if (old.leaseUntil < now) return { kind: 'contended' };
      if (isOwnMessage(old, identity)) {
        return { kind: 'own-message-early', hideForMs: old.leaseUntil - now };
      }
      return old.owner === undefined
        ? { kind: 'duplicate-racing' }
        : { kind: 'duplicate-racing', owner: old.owner };
    }
    default:
      return { kind: 'contended' };
  }
}

/**
 * True when the job item records another type than `type` (or none): the dedupKey belongs to another
 * job. The claim's and the fast commit's conditions (`#type = :type`) refuse such an item in every state,
 * so a message of another type never runs on it; it is dead-lettered as `dedup-key-collision`. A cancel's
 * tombstone (CANCELLED, no type yet) collides with nothing: every message under it is a cancelled copy.
 */
export function collides(old: JobItem | undefined, type: string): boolean {
  // A cancel's tombstone has no type: it stops whichever job comes under its key.
  if (old?.status === JobStatus.Cancelled && old.type === undefined) return false;
  return old !== undefined && old.type !== type;
}

/**
 * True when a refused claim was refused by this very claim: the item names our owner and message and
 * was claimed at our request's time. That is a claim whose answer was lost and which the SDK retried;
 * the job is ours, not someone else's and not our own message back early.
 */
export function isOwnClaim(
  old: JobItem,
  request: { readonly owner: string; readonly messageId: string; readonly now: number },
): boolean {
  return (
    old.status === JobStatus.InProgress &&
    old.owner === request.owner &&
    old.messageId === request.messageId &&
    old.claimedAt === request.now
  );
}

/**
 * `takeover` means the previous owner's lease ran out while IN_PROGRESS: that worker died or stalled
 * (metric LeaseExpired). `retry` follows a released attempt.
 */
export function classifyClaim(old: JobItem | undefined): ClaimKind {
  if (!old) return 'fresh';
  return old.status === JobStatus.InProgress ? 'takeover' : 'retry';
}

/**
 * True when a refused fast commit found a job only a leased claim may take, and whose lease is over so
 * a claim can take it now: one with a checkpoint (its steps' effects are committed; a leased run resumes
 * from them), or one whose attempts are used up (the claim then dead-letters it); or a DEAD one whose
 * `deadKeyUntil` passed (the leased claim resets it). The fast commit's
 * condition refuses exactly these besides the usual claim refusals (docs/protocol.md, edge E12).
 */
export function needsLeasedClaim(
  old: JobItem,
  maxAttempts: number,
  now: number,
  message?: MessageRef,
): boolean {
  // A DEAD key past its deadKeyUntil runs again, but only leased: its reset is the leased claim's.
  return (leasedRunOnly(old, maxAttempts) && isClaimable(old, now)) || deadKeyExpired(old, now, message);
}

/**
 * The cause an unfinished dead-lettering recorded at its fence (E9) on `previous`, the item a claim
 * replaced: the claim finishes that dead-lettering with it instead of running the job again.
 */
export function recordedDeadCause(previous: JobItem | undefined): DeadLetterCause | undefined {
  if (previous?.deadReason === undefined) return undefined;
  return {
    reason: previous.deadReason,
    errorClass: previous.lastErrorClass ?? 'unknown',
    errorMessage: previous.lastError ?? '',
  };
}
