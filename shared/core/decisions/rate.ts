// The rate limit's decision, pure: a sliding log of the last grants of one key. At most `limit` grants
// fall in any window of `perSeconds` (half-open, [t, t + perSeconds)), and a burst of `limit` is granted
// at once. One number (GCRA's theoretical arrival time) cannot give both: with a burst tolerance of
// `perSeconds - T` it admits a burst of `limit` and then one every T, up to 2 * limit - 1 in one window.

/** What a store holds for one key: a version for its conditional writes and the grant times still in the window. */
export interface RateLog {
  readonly version: number;
  /** Epoch ms of the grants within the last window, ascending (older ones are pruned on the next write). */
  readonly grants: readonly number[];
}

export type RateDecision =
  | { readonly grant: true; readonly next: RateLog }
  | { readonly grant: false; readonly waitMs: number };

/**
 * How far ahead of the deciding worker's clock a logged grant may be stamped and still count, at the
 * least (the key's window, when longer, is the bound: {@link countedAheadMs}). Workers whose clocks agree
 * never log a grant ahead of a later decision (a take decides after it read the log, and `latest` covers
 * the time its own requests took), so a stamp further ahead comes from a clock that runs fast. A grant up
 * to a window ahead counts at its stamp: the fast worker's grant then keeps the others waiting up to its
 * skew longer, and the limit holds for any window of `perSeconds` less the skew (docs/jobs.md, "Rate
 * limits"). A grant further ahead is left out of the decision (and kept in the log for its own worker): a
 * worker 10 minutes fast can then take up to `limit` permits a window beside the others, its own grants
 * uncounted by them, instead of stamping the window 10 minutes ahead and stalling every other worker for
 * that long. A worker whose clock runs slow is in the same place: the others' grants are ahead of it.
 */
export const MAX_AHEAD_MS = 1000;

/**
 * How far ahead a grant may be stamped and count for a key of `windowMs`: the window, at least
 * {@link MAX_AHEAD_MS}. Counting a stamp up to a window ahead costs at most a window's extra wait; leaving
 * it out would let a worker a second or two off double a long window's limit.
 */
export function countedAheadMs(windowMs: number): number {
  return Math.max(MAX_AHEAD_MS, windowMs);
}

/**
 * Grants when fewer than `limit` of the logged grants are within the window ending at `now`, writing the
 * pruned log plus `now`; else the wait until enough of them leave the window. `log` undefined: no item.
 * `latest`: the deciding worker's clock now (at least `now`, which was read when its take began); grants
 * logged more than {@link countedAheadMs} after it are not counted, and are written back as they were.
 */
export function decideRate(
  log: RateLog | undefined,
  limit: number,
  perSeconds: number,
  now: number,
  latest: number = now,
): RateDecision {
  const windowMs = perSeconds * 1000;
  const bound = Math.max(now, latest) + countedAheadMs(windowMs);
  const sorted = [...(log?.grants ?? [])].sort((a, b) => a - b);
  const logged = sorted.filter((t) => t <= bound);
  const ahead = sorted.filter((t) => t > bound);
  // Decided no earlier than the newest grant counted: a take whose `now` is older (its request was slow,
  // or its worker's clock is a little behind) would otherwise miss grants an earlier write pruned by its
  // own later time, and the grants would stop being in order. So the counted log only grows at its end,
  // and what it prunes is out of every window a later decision can look at.
  // Stamped no more than MAX_AHEAD_MS before `latest` either: a take whose `now` was read before a stall
  // (or whose requests were slow) starts its job later still, and a grant stamped at that old `now` would
  // leave the window early by the stall, letting the next start in that much sooner. Within the second,
  // as between clocks, the stamp stays the caller's `now`.
  const at = Math.max(now, latest - MAX_AHEAD_MS, logged.at(-1) ?? now);
  const recent = logged.filter((t) => t > at - windowMs);
  if (recent.length < limit) {
    return { grant: true, next: { version: (log?.version ?? 0) + 1, grants: [...recent, at, ...ahead] } };
  }
  // The grant whose leaving brings the count below the limit (more than `limit` after a limit was lowered).
  const leaving = recent[recent.length - limit] ?? at;
  return { grant: false, waitMs: Math.max(1, Math.ceil(leaving + windowMs - now)) };
}

/** The wait to suggest when tries ran out under contention: one emission interval, at least 50 ms. */
export function contendedWaitMs(limit: number, perSeconds: number): number {
  return Math.max(50, Math.ceil((perSeconds * 1000) / limit));
}
