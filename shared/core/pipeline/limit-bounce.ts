// The bounce of a job that found its limit full (a concurrency slot or a rate permit): the message goes
// back with a delay and the job item is not touched, so no attempt is used. Shared by limits.ts and the
// rate limit.
import { REDRIVE_MARGIN } from '../../resources.ts';
import { MetricName } from '../observe/metric-names.ts';
import type { Job } from './attempt.ts';
import type { Settings } from './settings.ts';

/** What a job waited for: the limit's kind, its scope (slot or permit name, never the payload) and a delay. */
export interface LimitWait {
  readonly kind: 'concurrency' | 'rate';
  readonly limitKey: string;
  /**
   * How long to wait before trying again, in whole seconds from 1 to 900: a concurrency wait jittered up
   * to 1.5x (bounced copies spread out), a rate wait as given (the time to the next permit).
   */
  readonly delayMs: number;
}

/**
 * Receives at which a bounce re-sends the message instead of hiding it: bounces are receives that are no
 * attempt, and the queue's redrive (maxAttempts + REDRIVE_MARGIN receives) must not count them, or a job
 * kept waiting by a busy tenant would reach the DLQ through SQS with no reason.
 */
export const RESEND_AT_RECEIVES = Math.max(2, Math.floor(REDRIVE_MARGIN / 2));

/** The bounce's delay in seconds: `delayMs` jittered up by up to half (copies spread out), ceil, 1-900. */
export function bounceSeconds(delayMs: number, random: () => number): number {
  const jittered = Math.max(0, delayMs) * (1 + random() / 2);
  return Math.max(1, Math.min(900, Math.ceil(jittered / 1000)));
}

/**
 * Gives the message back for the limit's delay, with no attempt used (the job item is not touched) and
 * never waiting in the worker: the slot may stay busy for long, and a worker blocked on it would keep
 * other keys' jobs from running. Under {@link RESEND_AT_RECEIVES} receives it only changes the message's
 * visibility (one SQS request); from there it sends the body again as a new message with the delay and
 * deletes this one (two requests), which starts the receive count afresh. FIFO queues take no
 * per-message delay, so there it always changes the visibility (their redrive count is higher).
 */
export async function bounceForLimit(s: Settings, job: Job, what: LimitWait): Promise<'limited'> {
  const { message, log } = job;
  // A rate wait is already the time to the next permit (jittered by the rate step); waiting half as long
  // again would only waste the permit's window.
  const seconds =
    what.kind === 'rate'
      ? Math.max(1, Math.min(900, Math.ceil(what.delayMs / 1000)))
      : bounceSeconds(what.delayMs, s.random);
  s.metrics.count(MetricName.LimitWait, 1, { kind: what.kind });
  const resent = message.receives >= RESEND_AT_RECEIVES && (await message.resend(seconds));
  log.info(`${what.kind} limit reached; trying again later without using an attempt`, {
    limit: what.limitKey,
    delaySeconds: seconds,
    receives: message.receives,
    ...(resent ? { resent: true } : {}),
  });
  if (!resent) await message.giveBack(seconds, `${what.kind} limited`);
  return 'limited';
}
