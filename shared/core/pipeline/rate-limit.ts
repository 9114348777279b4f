// Rate limits (docs/jobs.md, "Rate limits"): before the fast path and the claim, a job takes one permit
// of each of its type's rate limits. A job over the rate waits for its permit: in the process when the
// wait is short, else its message goes back with the wait as its delay. Either way nothing is written
// to its job item, so no attempt is used. Permits are never given back: one stands for one start.
import { errorClass, StoreUnavailableError } from '../../errors.ts';
import type { AnyJobDefinition, RateLimit } from '../model/job-definition.ts';
import { rateLimitName, rateLimits } from '../model/rate-limit.ts';
import { MetricName } from '../observe/metric-names.ts';
import type { Job } from './attempt.ts';
import { letterRefusedJob } from './dead-letterer.ts';
import type { RecordAction } from './outcome.ts';
import type { Settings } from './settings.ts';

/** Longest key value a limit's key function may return (it becomes part of the item's key). */
export const MAX_LIMIT_KEY_LENGTH = 200;
/** Longest wait spent in the process; a longer one gives the message back with a delay. */
export const IN_PROCESS_WAIT_MAX_MS = 1000;
/** In-process waits one limit may take before the message goes back (other workers may keep winning). */
const IN_PROCESS_WAITS = 3;
/** Time kept in hand after an in-process wait: the shortest lease worth starting (DEFAULTS.minLeaseMs). */
const AFTER_WAIT_MS = 1000;

/** A limit's key function threw or returned something that cannot name a scope. Its text never holds the payload. */
export class LimitKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LimitKeyError';
  }
}

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
    if (!(error instanceof LimitKeyError)) throw error;
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
        return giveBackForRate(s, job, rateLimitName(definition.type, limit), waitMs);
      }
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
  return undefined;
}

/** `rate:<name or type>:<scope>`, scope `*` (type-wide) or `k:<key value>`. @throws LimitKeyError */
export function rateItemKey(type: string, limit: RateLimit, payload: unknown): string {
  const name = rateLimitName(type, limit);
  if (limit.key === undefined) return `rate:${name}:*`;
  return `rate:${name}:k:${checkedKey(`rate limit ${name}`, limit.key, payload)}`;
}

/** The value of a limit's key function, checked; the error names the limit and what was wrong, never the payload. */
export function checkedKey(what: string, key: (payload: never) => unknown, payload: unknown): string {
  let value: unknown;
  try {
    value = key(payload as never);
  } catch (error) {
    throw new LimitKeyError(`${what}: its key function threw ${errorClass(error)}`);
  }
  if (typeof value !== 'string') {
    throw new LimitKeyError(
      `${what}: its key function returned ${value === null ? 'null' : typeof value}, not a string`,
    );
  }
  if (value.length === 0) throw new LimitKeyError(`${what}: its key function returned an empty string`);
  if (value.length > MAX_LIMIT_KEY_LENGTH) {
    throw new LimitKeyError(
      `${what}: its key function returned ${value.length} characters (at most ${MAX_LIMIT_KEY_LENGTH})`,
    );
  }
  return value;
}

/**
 * Gives the message back until the next permit, using no attempt (the job item is not touched).
 * Stands in for the concurrency limits' `bounceForLimit(s, job, { kind: 'rate', limitKey, delayMs })`
 * (pipeline/limit-bounce.ts); the merge swaps this call for it.
 */
export async function giveBackForRate(
  s: Settings,
  job: Job,
  limitName: string,
  waitMs: number,
): Promise<RecordAction> {
  const seconds = Math.min(900, Math.max(1, Math.ceil(waitMs / 1000)));
  s.metrics.count(MetricName.HandBack);
  job.log.info('over its rate limit: job not started, giving the message back until the next permit', {
    limit: limitName,
    delaySeconds: seconds,
  });
  await job.message.giveBack(seconds, 'rate limited');
  return 'deferred';
}

async function giveBackUnavailable(s: Settings, job: Job, error: unknown): Promise<RecordAction> {
  const delay = s.backoffSeconds(job.message.receives);
  if (error instanceof StoreUnavailableError) {
    s.metrics.count(MetricName.StoreUnavailable);
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
  await job.message.giveBack(delay, 'rate permit failed');
  return 'store-unavailable';
}
