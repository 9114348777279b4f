// The renewal (docs/protocol.md, E4): the heartbeat's new lease end, never backwards; and the dead-letter
// fence (E9's first step), the renewal that records the cause. Its refusal is the fence's (fence.ts), but
// for a later renewal of this same lease that landed first ({@link laterRenewal}).

import { ERROR_CLASS_MAX, storableText } from '../../error-text.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { DeadLetterCause, JobLease } from '../contract/job-store.ts';
import { holdsFence } from '../decisions/fence-decision.ts';
import { fencedUpdate } from './fence.ts';
import { giveUpError } from './give-up.ts';
import { utf8 } from './item-size.ts';
import { type JobItemUpdate, names } from './update.ts';

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
        ...names('leaseUntil', 'expiresAt', 'deadReason'),
        ...(withError ? names('lastError', 'lastErrorClass') : {}),
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
    ExpressionAttributeNames: names('leaseUntil', 'expiresAt'),
    ExpressionAttributeValues: { ':leaseUntil': leaseUntil, ':expiresAt': expiresAt },
  });
}

/**
 * The cause the dead-letter fence (E9) records: its reason capped (ERROR_CLASS_MAX), and its error text
 * and class shortened like {@link giveUpError}'s, counting the reason in the item: a fence that grew an
 * item past 400 KB would be refused on every try, and the job would run again instead of going to the DLQ.
 */
export function fenceCause(lease: JobLease, cause: DeadLetterCause): DeadLetterCause {
  const reason = storableText(cause.reason, ERROR_CLASS_MAX);
  const error = giveUpError(
    lease,
    { message: cause.errorMessage, errorClass: cause.errorClass },
    utf8('deadReason') + 3 * reason.length,
  );
  return { reason, errorClass: error.errorClass, errorMessage: error.message };
}

/** A fence's cause with no error text or class: the minimal fence, which leaves the last error as it was. */
export function isMinimalCause(cause: DeadLetterCause): boolean {
  return cause.errorMessage === '' && cause.errorClass === '';
}

/**
 * A refused renewal's old item that is no loss: a later renewal of this same lease already landed (its
 * lease end, which the lease takes), else undefined. The dead-letter fence has no such condition: its
 * refusal is always the fence's.
 */
export function laterRenewal(
  old: JobItem,
  lease: JobLease,
  leaseUntil: number,
  deadLetter: DeadLetterCause | undefined,
): number | undefined {
  if (deadLetter || !holdsFence(old, lease) || old.leaseUntil <= leaseUntil) return undefined;
  return old.leaseUntil;
}
