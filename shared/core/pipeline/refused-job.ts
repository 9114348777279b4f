// E13, a job refused before its claim (a payload its schema refuses, a claim-check object gone, a limit key
// that cannot be computed): a copy of a job another message guards is lettered alone (attempts 0, the
// item untouched), but the job's own message, the one its item waits for, ends the job DEAD with the
// refusal's reason (a claim conditioned on the item still naming that message, then E9), so no job is
// left waiting for a message that is gone (docs/protocol.md, "A refused job's own message").

import { errorClass } from '../../error-text.ts';
import { StoreUnavailableError } from '../../errors.ts';
import { DEFAULTS } from '../contract/defaults.ts';
import type { JobItem } from '../contract/job-item.ts';
import { JobStatus } from '../contract/statuses.ts';
import { collides, recordedDeadCause } from '../decisions/claim-decision.ts';
import { deadKeyExpired } from '../decisions/history-events.ts';
import { leaseOver } from '../decisions/lease-arithmetic.ts';
import { capLeaseToDeadline } from '../decisions/lease-timing.ts';
import { isOwnMessage, sentForAnotherLife } from '../decisions/message-identity.ts';
import { boundedSignal } from '../leases/timeout-signal.ts';
import type { AnyJobDefinition } from '../model/job-definition.ts';
import { MetricName } from '../observe/metric-names.ts';
import { noteStoreUnavailable } from '../observe/store-throttle.ts';
import type { Job } from './attempt.ts';
import { claim, startAttempt } from './claim.ts';
import { type DeadLetterer, letterRefusedJob } from './dead-letterer.ts';
import type { RecordAction } from './outcome.ts';
import type { RecordMessage } from './record-message.ts';
import { actOnRefusal } from './refusal.ts';
import type { Settings } from './settings.ts';

/** What a refused message is to the job item under its key. */
export type RefusedMessageTarget =
  /** No item, another type's, one another message guards, or a dead key a fresh send may reset: a copy. */
  | { readonly kind: 'copy' }
  /**
   * A finished job (COMPLETED, CANCELLED, DEAD and not open to this message), or one of another life than
   * the message's: the copy is dropped as a refused claim drops it (refusal.ts), with no letter: the job
   * can never take it, and a dead job's own message back (a second delivery, a failed delete) would letter
   * one death twice.
   */
  | { readonly kind: 'finished'; readonly item: JobItem }
  /** The item waits for this message, and a live lease (or its backoff) holds it: hide the message. */
  | { readonly kind: 'wait'; readonly hideForMs: number }
  /** The item waits for this message (`messageId`, as the item names it) and nothing holds it: take it. */
  | { readonly kind: 'take'; readonly messageId: string };

/**
 * Pure: whether the item `item` waits for the refused message: an unfinished job of its type whose item
 * names it (by any id it had: `isOwnMessage`, decisions/message-identity.ts), and then whether a lease
 * holds it at `now`.
 */
export function refusedMessageTarget(
  item: JobItem | undefined,
  message: Pick<RecordMessage, 'identity'>,
  type: string,
  now: number,
): RefusedMessageTarget {
  if (item === undefined || collides(item, type)) return { kind: 'copy' };
  if (
    item.status === JobStatus.Completed ||
    item.status === JobStatus.Cancelled ||
    (item.status === JobStatus.Dead && !deadKeyExpired(item, now, message.identity))
  ) {
    return { kind: 'finished', item };
  }
  if (item.status !== JobStatus.RetryWait && item.status !== JobStatus.InProgress) return { kind: 'copy' };
  // A redrive's message of another life of the key: dropped as its claim would drop it, no letter (the
  // job it was sent for died again and has its own).
  if (sentForAnotherLife(item, message.identity)) return { kind: 'finished', item };
  if (!isOwnMessage(item, message.identity)) return { kind: 'copy' };
  return leaseOver(item.leaseUntil, now)
    ? { kind: 'take', messageId: item.messageId }
    : { kind: 'wait', hideForMs: item.leaseUntil - now };
}

/**
 * Acts on a job refused before its claim for `reason` (`invalid-bad-payload`, `invalid-payload-missing`,
 * `invalid-limit-key`, ...). Reads the job item (one strongly consistent read, on this rare path only) to
 * tell the job's own message from a copy; never throws.
 */
export async function refuseJob(
  s: Settings,
  job: Job,
  definition: AnyJobDefinition,
  refusal: { readonly reason: string; readonly error: unknown },
  deadLetterer: DeadLetterer,
  deadline: number | undefined,
): Promise<RecordAction> {
  const { envelope, message, log } = job;
  const bound = boundedSignal(s.leaseMs, 'the read of a refused job');
  let item: JobItem | undefined;
  try {
    item = await s.store.get(envelope.dedupKey, { signal: bound.signal });
  } catch (error) {
    // Not knowing whether the item waits for it, the message is kept: it is judged again when it returns.
    const delay = s.backoffSeconds(message.receives);
    if (error instanceof StoreUnavailableError) noteStoreUnavailable(s.metrics, log, error);
    log.warn('a refused job: the job item could not be read; giving the message back', {
      reason: refusal.reason,
      delaySeconds: delay,
      error: s.errorText(error),
    });
    s.metrics.count(MetricName.HandBack);
    await message.giveBack(delay, 'store unavailable');
    return 'store-unavailable';
  } finally {
    bound.clear();
  }
  const target = refusedMessageTarget(item, message, envelope.type, s.now());
  if (target.kind !== 'take') return actOnTarget(s, job, refusal, target);

  const now = s.now();
  const leaseMs = capLeaseToDeadline(s.leaseMs, now, deadline);
  if (leaseMs < DEFAULTS.minLeaseMs) {
    s.metrics.count(MetricName.HandBack);
    await message.giveBack(0, 'too close to the invocation deadline to start');
    return 'deadline';
  }
  // Conditioned on the item still naming the message it named when read: never a job that another
  // message claimed (or a redrive reset) in between, never a new item.
  const claimed = await claim(s, job, leaseMs, now, target.messageId);
  if (claimed === undefined) return 'store-unavailable';
  if (!claimed.claimed) {
    const again = refusedMessageTarget(claimed.existing, message, envelope.type, s.now());
    if (again.kind !== 'take') return actOnTarget(s, job, refusal, again);
    s.metrics.count(MetricName.HandBack);
    await message.giveBack(1, 'claim refused by a lease that just ended');
    return 'contended';
  }
  const attempt = startAttempt(s, job, definition, claimed, { leaseMs, claimedAt: now, deadline });
  // A dead-lettering cut short after its fence is finished with the cause it recorded (E9).
  const cause = recordedDeadCause(claimed.previous) ?? {
    reason: refusal.reason,
    errorClass: errorClass(refusal.error),
    errorMessage: s.errorText(refusal.error),
  };
  log.warn("the job's own message was refused before it ran: dead-lettering the job", {
    reason: cause.reason,
    error: cause.errorMessage,
  });
  return (await deadLetterer.claimed(attempt, cause)).action;
}

/**
 * A copy is lettered alone (the item untouched); a finished job's copy dropped as a refused claim drops
 * it; the job's own message under a live lease is hidden.
 */
async function actOnTarget(
  s: Settings,
  job: Job,
  refusal: { readonly reason: string; readonly error: unknown },
  target: Exclude<RefusedMessageTarget, { kind: 'take' }>,
): Promise<RecordAction> {
  if (target.kind === 'copy') return (await letterRefusedJob(s, job, refusal.reason, refusal.error)).action;
  if (target.kind === 'finished') return actOnRefusal(s, job, target.item);
  // Its holder's guard: deleting it would leave the job with no message if the holder then fails. It
  // comes back when the lease (or backoff) ends and is judged again.
  const seconds = Math.ceil(target.hideForMs / 1000) + 1;
  s.metrics.count(MetricName.OwnMessageEarly);
  s.metrics.count(MetricName.HandBack);
  job.log.info(
    'a refused job whose own message came back while its lease runs: hiding it until the lease ends',
    {
      reason: refusal.reason,
      hideSeconds: seconds,
    },
  );
  await job.message.giveBack(seconds, 'own message early');
  return 'own-message-early';
}
