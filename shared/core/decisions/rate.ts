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
 * Grants when fewer than `limit` of the logged grants are within the window ending at `now`, writing the
 * pruned log plus `now`; else the wait until enough of them leave the window. `log` undefined: no item.
 */
export function decideRate(
  log: RateLog | undefined,
  limit: number,
  perSeconds: number,
  now: number,
): RateDecision {
  const windowMs = perSeconds * 1000;
  const logged = [...(log?.grants ?? [])].sort((a, b) => a - b);
  // Decided no earlier than the newest grant logged: a take whose `now` is older (its request was slow,
  // or its worker's clock is behind) would otherwise miss grants an earlier write pruned by its own later
  // time, and the grants would stop being in order. So the log only grows at its end, and what it prunes
  // is out of every window a later decision can look at.
  const at = Math.max(now, logged.at(-1) ?? now);
  const recent = logged.filter((t) => t > at - windowMs);
  if (recent.length < limit) {
    return { grant: true, next: { version: (log?.version ?? 0) + 1, grants: [...recent, at] } };
  }
  // The grant whose leaving brings the count below the limit (more than `limit` after a limit was lowered).
  const leaving = recent[recent.length - limit] ?? at;
  return { grant: false, waitMs: Math.max(1, Math.ceil(leaving + windowMs - now)) };
}

/** The wait to suggest when tries ran out under contention: one emission interval, at least 50 ms. */
export function contendedWaitMs(limit: number, perSeconds: number): number {
  return Math.max(50, Math.ceil((perSeconds * 1000) / limit));
}
