/** SQS refuses a visibility timeout above 12 hours; stay a minute below it. */
export const SQS_MAX_VISIBILITY_SECONDS = 12 * 60 * 60;
const HARD_CAP_SECONDS = SQS_MAX_VISIBILITY_SECONDS - 60;

export interface BackoffPolicy {
  /** Delay scale for the first retry. @default 2 */
  readonly baseSeconds: number;
  /** Largest delay; clamped below the SQS 12 h limit. @default 900 */
  readonly capSeconds: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseSeconds: 2, capSeconds: 900 };

/**
 * Exponential backoff with full jitter: a delay drawn uniformly from [0, min(cap, base * 2^(attempt-1))],
 * in whole seconds (the unit of SQS visibility). Full jitter spreads a burst of failing jobs so a systemic
 * failure is not hammered in lock-step. `random` is injectable for tests and returns [0, 1).
 *
 * @param attempt 1 for the first retry.
 */
export function backoffSeconds(
  attempt: number,
  policy: BackoffPolicy = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  const cap = Math.min(Math.max(policy.capSeconds, 0), HARD_CAP_SECONDS);
  const exponent = Math.max(0, Math.floor(attempt) - 1);
  // 2^exponent overflows to Infinity for huge attempts; Math.min keeps it at the cap.
  const ceiling = Math.min(cap, policy.baseSeconds * 2 ** exponent);
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.min(HARD_CAP_SECONDS, Math.round(ceiling * r));
}

/**
 * The delay after an optimistic conflict (another writer changed the row first): 2 s base, 60 s cap, so
 * a hot row's losers come back spread out, soon and then more slowly as their conflicts add up (a
 * 1 s base brought a burst's losers back too close together in the hot-row burst test). The job's own
 * failures use {@link DEFAULT_BACKOFF}, whose cap is 15 minutes: a conflict says nothing about the job.
 */
export const CONFLICT_BACKOFF: BackoffPolicy = { baseSeconds: 2, capSeconds: 60 };
