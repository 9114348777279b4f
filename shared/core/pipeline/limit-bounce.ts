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

/**
 * The same on FIFO, where a re-send moves the job to the tail of its group (its later messages then run
 * first): it holds its place longer, with hides that double per receive (fifoWaitMs), so it is re-sent
 * only after about 3 minutes of waiting. Below REDRIVE_MARGIN, which every FIFO redrive count exceeds
 * (attempts x batch size + margin); each hide hands the head's batch-mates back once, so they gain fewer
 * receives than that too.
 */
export const FIFO_RESEND_AT_RECEIVES = REDRIVE_MARGIN;

/**
 * The receive at which a bounce re-sends: {@link RESEND_AT_RECEIVES} (FIFO: {@link FIFO_RESEND_AT_RECEIVES}),
 * and below the queue's own `maxReceiveCount` when the worker knows it (a smaller redrive count).
 */
export function resendAtReceives(fifo: boolean, maxReceiveCount: number | undefined): number {
  const at = fifo ? FIFO_RESEND_AT_RECEIVES : RESEND_AT_RECEIVES;
  return maxReceiveCount === undefined ? at : Math.max(1, Math.min(at, maxReceiveCount - 1));
}

/** The longest hide of a FIFO head waiting for a limit: its whole group sleeps with it. */
export const FIFO_HOLD_MAX_MS = 30_000;

/**
 * How long a FIFO head waits for a slot before its next try: 2 s after its first receive, doubling per
 * receive up to FIFO_HOLD_MAX_MS (30 s). The hides grow faster than on a standard queue (concurrencyWaitMs)
 * to spend few receives, but no further: a head hidden for minutes keeps its whole group asleep for up to
 * that long after its slot came free (with 15-minute hides, the chaos FIFO run's last tenant job started
 * minutes after its slot was free). The receives before the re-send cover about 3 minutes.
 */
export function fifoWaitMs(receives: number): number {
  return Math.min(FIFO_HOLD_MAX_MS, 1000 * 2 ** Math.max(1, Math.min(receives, 10)));
}

/** The bounce's delay in seconds: `delayMs` jittered up by up to half (copies spread out), ceil, 1-900. */
export function bounceSeconds(delayMs: number, random: () => number): number {
  const jittered = Math.max(0, delayMs) * (1 + random() / 2);
  return Math.max(1, Math.min(900, Math.ceil(jittered / 1000)));
}

/**
 * Gives the message back for the limit's delay, with no attempt used (the job item is not touched) and
 * never waiting in the worker: the slot may stay busy for long, and a worker blocked on it would keep
 * other keys' jobs from running. Under {@link resendAtReceives} receives it only changes the message's
 * visibility (one SQS request); from there it sends the body again as a new message with the delay and
 * deletes this one (two requests), which starts the receive count afresh: `resent`. On FIFO the head
 * stays hidden at the head of its group (fifoWaitMs) until then; its re-send goes to the group's tail,
 * visible at once (no per-message delay), and the group goes on without it.
 */
export async function bounceForLimit(s: Settings, job: Job, what: LimitWait): Promise<'limited' | 'resent'> {
  const { message, log } = job;
  // A rate wait is already the time to the next permit (jittered by the rate step); waiting half as long
  // again would only waste the permit's window.
  const seconds =
    what.kind === 'rate'
      ? Math.max(1, Math.min(900, Math.ceil(what.delayMs / 1000)))
      : bounceSeconds(what.delayMs, s.random);
  s.metrics.count(MetricName.LimitWait, 1, { kind: what.kind });
  const resent =
    message.receives >= resendAtReceives(message.fifo, s.maxReceiveCount) && (await message.resend(seconds));
  log.info(`${what.kind} limit reached; trying again later without using an attempt`, {
    limit: what.limitKey,
    delaySeconds: seconds,
    receives: message.receives,
    ...(resent ? { resent: true } : {}),
  });
  if (resent) {
    if (message.fifo) {
      log.warn(`${what.kind} limit still reached: moved to the tail of its FIFO group, the group goes on`, {
        limit: what.limitKey,
        receives: message.receives,
      });
    }
    return 'resent';
  }
  await message.giveBack(seconds, `${what.kind} limited`);
  return 'limited';
}
