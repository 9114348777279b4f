// The events a job's writes append to its history (contract/job-history.ts, docs/protocol.md "History"),
// and the dead key's time a DEAD marking records beside them. Pure; history.ts keeps the list within
// HISTORY_MAX and carries a lease's events into its writes.

import { storableText } from '../../error-text.ts';
import { HISTORY_MESSAGE_MAX, type HistoryEvent } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { JobLease } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { isOwnMessage, type MessageRef } from './message-identity.ts';

/**
 * Whether a checkpoint appends a `step` event. Off: the checkpoint's `done` list already tells every
 * step, and the event would only add item bytes to every step of every job (docs/protocol.md, "History").
 */
export const STEP_EVENTS = false;

/** Who wrote an event: the lease's owner, token and attempt. */
export function attemptOf(lease: Pick<JobLease, 'owner' | 'token' | 'attempts'>): {
  owner: string;
  token: number;
  attempt: number;
} {
  return { owner: lease.owner, token: lease.token, attempt: lease.attempts };
}

/** An error message as an event keeps it: valid text, at most HISTORY_MESSAGE_MAX characters. */
export function eventMessage(message: string): string {
  return storableText(message, HISTORY_MESSAGE_MAX);
}

/**
 * The event a claim that took over an ended lease owes (written by the lease's next write): whose lease
 * it took, from `previous`, the item as the claim found it.
 */
export function takeoverEvent(
  previous: JobItem,
  lease: Pick<JobLease, 'owner' | 'token' | 'attempts'>,
  now: number,
): HistoryEvent {
  return {
    e: 'takeover',
    at: now,
    ...attemptOf(lease),
    ...(previous.owner === undefined ? {} : { fromOwner: previous.owner }),
    fromToken: previous.token,
    leaseEndedAt: previous.leaseUntil,
    ...(previous.claimedAt === undefined ? {} : { fromClaimedAt: previous.claimedAt }),
    fromAttempt: previous.attempts,
  };
}

/**
 * The history fields a claim's lease starts with: the item's events, and a takeover's pending event.
 * A first-time claim or a retry owes nothing.
 */
export function claimHistory(
  previous: JobItem | undefined,
  lease: Pick<JobLease, 'owner' | 'token' | 'attempts'>,
  takeover: boolean,
  now: number,
): Pick<JobLease, 'history' | 'pendingHistory'> {
  return {
    ...(previous?.history?.length ? { history: [...previous.history] } : {}),
    ...(takeover && previous ? { pendingHistory: [takeoverEvent(previous, lease, now)] } : {}),
  };
}

/**
 * True when `item` is a DEAD job whose key has been dead for its type's `deadKeyTtl`, so a fresh send
 * (`message`) runs. The dead job's own message (its delete failed and it came back, perhaps re-sent by a
 * limit's bounce under another id) is never one: same origin (decisions/message-identity.ts); nor is a
 * message a redrive sent for a life of the key (`life`): it was sent to run that job, not a new one.
 */
export function deadKeyExpired(
  item: Pick<JobItem, 'status' | 'deadKeyUntil' | 'messageId' | 'originId'> | undefined,
  now: number,
  message?: MessageRef,
): boolean {
  return (
    item?.status === JobStatus.Dead &&
    item.deadKeyUntil !== undefined &&
    item.deadKeyUntil < now &&
    message?.life === undefined &&
    !(message !== undefined && isOwnMessage(item, message))
  );
}

/**
 * The `dropped` event counting one more dropped copy: the last event grown when it is a `dropped` one
 * of the same kind (`index` is its position, to update in place), else a new one to append. `life`: a
 * redrive's message of that earlier life of the key, dropped by a later life's job.
 */
export function droppedCopyEvent(
  history: readonly HistoryEvent[] | undefined,
  messageId: string,
  now: number,
  life?: number,
): { readonly event: HistoryEvent; readonly index?: number } {
  const events = history ?? [];
  const last = events[events.length - 1];
  const of = life === undefined ? {} : { life };
  if (last?.e === 'dropped' && last.life === life) {
    return {
      event: { e: 'dropped', at: now, count: last.count + 1, messageId, ...of },
      index: events.length - 1,
    };
  }
  return { event: { e: 'dropped', at: now, count: 1, messageId, ...of } };
}

/**
 * The events a release (`failed`) or a DEAD marking (`dead`) appends, after a `lease-lost` one when the
 * attempt ended because its lease ran out (`leaseLost`: why).
 */
export function giveUpEvents(
  lease: Pick<JobLease, 'owner' | 'token' | 'attempts'>,
  status: JobStatus,
  retryAt: number,
  error: { readonly message: string; readonly errorClass: string; readonly reason?: string },
  refunded: boolean,
  leaseLost: string | undefined,
  now: number,
): HistoryEvent[] {
  const who = attemptOf(lease);
  const errorClass = eventMessage(error.errorClass);
  const message = eventMessage(error.message);
  const events: HistoryEvent[] =
    leaseLost === undefined ? [] : [{ e: 'lease-lost', at: now, ...who, why: eventMessage(leaseLost) }];
  events.push(
    status === JobStatus.Dead
      ? { e: 'dead', at: now, ...who, reason: error.reason ?? 'unknown', errorClass, message }
      : {
          e: 'failed',
          at: now,
          ...who,
          errorClass,
          message,
          retryAt,
          ...(refunded ? { refunded: true } : {}),
        },
  );
  return events;
}

/** What a DEAD marking at `now` records of the type's `deadKeyTtl` (seconds; absent: nothing). */
export function deadKeyUntilOf(
  now: number,
  deadKeyTtlSeconds: number | undefined,
): { deadKeyUntil?: number } {
  return deadKeyTtlSeconds === undefined ? {} : { deadKeyUntil: now + deadKeyTtlSeconds * 1000 };
}
