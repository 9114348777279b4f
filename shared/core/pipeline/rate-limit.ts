// Rate limits (docs/jobs.md, "Rate limits"): before the fast path and the claim, a job takes one permit
// of each of its type's rate limits. A job over the rate waits for its permit: in the process when the
// wait is short, else its message goes back with the wait as its delay. Either way nothing is written
// to its job item, so no attempt is used. Permits are never given back: one stands for one start.
import { StoreUnavailableError } from '../../errors.ts';
import { RATE_ITEM_PREFIX } from '../contract/rate-store.ts';
import type { AnyJobDefinition, RateLimit } from '../model/job-definition.ts';
import { rateLimitName, rateLimits } from '../model/rate-limit.ts';
import { MetricName } from '../observe/metric-names.ts';
import { noteStoreUnavailable } from '../observe/store-throttle.ts';
import type { Job } from './attempt.ts';
import { letterRefusedJob } from './dead-letterer.ts';
import { bounceForLimit, fifoWaitMs } from './limit-bounce.ts';
import { InvalidLimitKeyError, limitKeyValue } from './limits.ts';
import type { RecordAction } from './outcome.ts';
import type { Settings } from './settings.ts';

/** Longest wait spent in the process; a longer one gives the message back with a delay. */
export const IN_PROCESS_WAIT_MAX_MS = 1000;
/** In-process waits one limit may take before the message goes back (other workers may keep winning). */
const IN_PROCESS_WAITS = 3;
/** Time kept in hand after an in-process wait: the shortest lease worth starting (DEFAULTS.minLeaseMs). */
const AFTER_WAIT_MS = 1000;

/**
 * Takes a permit of every rate limit of `definition` for `job`. Undefined: all granted, go on. Else the
 * action the record ended with: given back to wait, dead-lettered `invalid-limit-key`, or the store did
 * not answer (given back with a backoff).
 */
export async function takeRatePermits(
  s: Settings,
  job: Job,
  definition: AnyJobDefinition,
  deadline: number | undefined,
): Promise<RecordAction | undefined> {
  const limits = rateLimits(definition);
  if (limits.length === 0) return undefined;
  const rates = s.rates;
  if (!rates) throw new Error('unreachable: a rate-limited type passed settings without a rate store');
  // Every key first: a bad key function dead-letters the job before any permit is spent on it.
  let keys: string[];
  try {
    keys = limits.map((limit) => rateItemKey(definition.type, limit, job.payload));
  } catch (error) {
    if (!(error instanceof InvalidLimitKeyError)) throw error;
    return (await letterRefusedJob(s, job, 'invalid-limit-key', error)).action;
  }
  for (const [i, limit] of limits.entries()) {
    const key = keys[i] as string;
    for (let waits = 0; ; waits++) {
      let take: Awaited<ReturnType<typeof rates.take>>;
      try {
        take = await rates.take(key, limit.limit, limit.perSeconds, s.now());
      } catch (error) {
        return giveBackUnavailable(s, job, error);
      }
      if (take.granted) break;
      const now = s.now();
      // A little jitter, so workers that waited for the same permit do not all ask at once.
      const waitMs = take.waitMs + Math.floor(s.random() * Math.min(50, take.waitMs / 10 + 1));
      const inTime = deadline === undefined || now + waitMs + AFTER_WAIT_MS <= deadline;
      if (waitMs > IN_PROCESS_WAIT_MAX_MS || !inTime || waits >= IN_PROCESS_WAITS) {
        return bounceForLimit(s, job, {
          kind: 'rate',
          limitKey: rateLimitName(definition.type, limit),
          // A FIFO head holds its group's place as a slot's wait does (fifoWaitMs): hidden only until the
          // next permit, a head that keeps losing it to other groups would spend the receives before its
          // re-send to the group's tail in seconds.
          delayMs: job.message.fifo ? Math.max(waitMs, fifoWaitMs(job.message.receives)) : waitMs,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
  return undefined;
}

/** `rate:<name or type>:<scope>`, scope `*` (type-wide) or `k:<key value>`. @throws InvalidLimitKeyError */
export function rateItemKey(type: string, limit: RateLimit, payload: unknown): string {
  const name = rateLimitName(type, limit);
  if (limit.key === undefined) return `${RATE_ITEM_PREFIX}${name}:*`;
  return `${RATE_ITEM_PREFIX}${name}:k:${limitKeyValue(`rate limit ${name}`, limit.key, payload)}`;
}

async function giveBackUnavailable(s: Settings, job: Job, error: unknown): Promise<RecordAction> {
  const delay = s.backoffSeconds(job.message.receives);
  if (error instanceof StoreUnavailableError) {
    noteStoreUnavailable(s.metrics, job.log, error);
    job.log.warn('store unavailable taking a rate permit: job not run; giving the message back', {
      delaySeconds: delay,
      error: s.errorText(error),
    });
  } else {
    job.log.error(
      'taking a rate permit failed (not an outage: check permissions and table names); giving the message back',
      {
        delaySeconds: delay,
        error: s.errorText(error),
      },
    );
  }
  s.metrics.count(MetricName.HandBack);
  await job.message.giveBack(delay, 'rate permit failed');
  return 'store-unavailable';
}
