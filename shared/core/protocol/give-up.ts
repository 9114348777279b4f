// The end of an attempt that did not complete (docs/protocol.md, E7, E8, E8c and E9's marking): a
// release to RETRY_WAIT (an attempt, a refund or a conflict's give-back) or the dead marking, under the
// fence; the error it stores sized so the write always fits, and the history events it can carry. Its
// refusal is the fence's (fence.ts).

import { ERROR_CLASS_MAX, ERROR_TEXT_MAX, storableText } from '../../error-text.ts';
import { type HistoryEvent, PROBLEM_KEYS_UPPER_BYTES } from '../contract/job-history.ts';
import type { JobLease } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { type CarriedHistory, carryHistory, eventsLeftOut, historyUpperBytes } from '../decisions/history.ts';
import { deadKeyUntilOf, giveUpEvents } from '../decisions/history-events.ts';
import { fencedUpdate } from './fence.ts';
import { checkpointUpperBytes, MAX_ITEM_BYTES, utf8 } from './item-size.ts';
import { type JobItemUpdate, names } from './update.ts';

/** What ends an attempt that did not complete: a release (`leaseUntil`, the retry time) or a marking. */
export type GiveUpRequest = Omit<GiveUpWrite, 'error' | 'conflict' | 'dead'> & {
  readonly error: GiveUpWrite['error'] & { readonly reason?: string; readonly deadKeyTtlSeconds?: number };
  readonly conflict: boolean;
  /** Why the lease was lost, when a lost lease ended the attempt (its `lease-lost` event). */
  readonly leaseLost: string | undefined;
};

/**
 * The give-up's write and the history it carries: near 400 KB the new events are left out (their
 * `problems` index keys still written: a DEAD job must be listed). The adapter sends
 * `withHistory(update, carried.write)` (history-writes.ts) and settles `carried` by the answer.
 */
export function giveUp(
  tableName: string,
  lease: JobLease,
  req: GiveUpRequest,
): { readonly update: JobItemUpdate; readonly carried: CarriedHistory } {
  const { status, leaseUntil, now, error } = req;
  const backed = req.refundAttempt || req.conflict;
  const events = giveUpEvents(lease, status, leaseUntil, error, backed, req.leaseLost, now);
  const fit = giveUpWithHistory(lease, error, events);
  const carried = fit.withEvents
    ? carryHistory(lease, events, now)
    : eventsLeftOut(lease.dedupKey, events, now);
  const { leaseLost: _, ...write } = req;
  const update = giveUpUpdate(tableName, lease, {
    ...write,
    error: fit.error,
    ...(status === JobStatus.Dead ? { dead: deadKeyUntilOf(now, error.deadKeyTtlSeconds) } : {}),
  });
  return { update, carried };
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
      ...(counter ? names('attempts', counter) : {}),
      ...(write.dead ? names('deadAt', 'deadKeyUntil') : {}),
      ...names('leaseUntil', 'version', 'updatedAt', 'lastError', 'lastErrorClass', 'expiresAt'),
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

/**
 * The error a release or dead marking stores and the history events it can carry (the release's or
 * marking's own, after the lease's pending ones): the stored list counts against the error's room
 * always; the new events only when the error keeps all the text it would have without them. Near
 * 400 KB they are left out (the lease keeps its pending ones) rather than cut the error or make the
 * write too large: the write that ends the attempt must fit. Its index keys always count.
 */
export function giveUpWithHistory(
  lease: JobLease,
  error: { readonly message: string; readonly errorClass: string },
  events: readonly HistoryEvent[],
): { readonly error: { message: string; errorClass: string }; readonly withEvents: boolean } {
  const stored = historyUpperBytes(lease.history) + PROBLEM_KEYS_UPPER_BYTES;
  const plain = giveUpError(lease, error, stored);
  const carried = giveUpError(lease, error, stored + historyUpperBytes(lease.pendingHistory, events));
  const fits = carried.message === plain.message && carried.errorClass === plain.errorClass;
  return fits ? { error: carried, withEvents: true } : { error: plain, withEvents: false };
}

/**
 * The error text and class a release or dead marking stores, capped (ERROR_TEXT_MAX, ERROR_CLASS_MAX)
 * and, for an item its checkpoint fills to near 400 KB, shortened to what is left of it after this
 * lease's checkpoint and the item's other attributes (upper bounds, 3 bytes a character), class first.
 * So the write that ends the attempt always fits; at worst the text is empty.
 */
export function giveUpError(
  lease: JobLease,
  error: { readonly message: string; readonly errorClass: string },
  reservedBytes = 0,
): { message: string; errorClass: string } {
  const known = utf8(lease.dedupKey) + utf8(lease.owner) + utf8(lease.messageId) + reservedBytes;
  // Every other attribute of the job item, at most: 18 names (~170 bytes), 7 numbers (21 bytes each),
  // status, type (128 ASCII characters) and createdAt (an ISO date), with room to spare.
  const others = 640;
  const checkpoint = lease.checkpoint ? checkpointUpperBytes(lease.checkpoint) : 0;
  const room = Math.max(0, Math.floor((MAX_ITEM_BYTES - known - others - checkpoint) / 3));
  const errorClass = storableText(error.errorClass, Math.min(ERROR_CLASS_MAX, room));
  return {
    errorClass,
    message: storableText(error.message, Math.min(ERROR_TEXT_MAX, room - errorClass.length)),
  };
}
