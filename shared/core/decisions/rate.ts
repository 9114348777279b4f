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
  // Grants stamped ahead of `now` (another worker's clock runs ahead) stay in: they count as recent.
  const recent = (log?.grants ?? []).filter((t) => t > now - windowMs).sort((a, b) => a - b);
  if (recent.length < limit) {
    const grants = [...recent, now].sort((a, b) => a - b);
    return { grant: true, next: { version: (log?.version ?? 0) + 1, grants } };
  }
  // The grant whose leaving brings the count below the limit (more than `limit` after a limit was lowered).
  const leaving = recent[recent.length - limit] ?? now;
  return { grant: false, waitMs: Math.max(1, Math.ceil(leaving + windowMs - now)) };
}

/** The wait to suggest when tries ran out under contention: one emission interval, at least 50 ms. */
export function contendedWaitMs(limit: number, perSeconds: number): number {
  return Math.max(50, Math.ceil((perSeconds * 1000) / limit));
}
