/** The start of every rate limit's item key on the leases table (`rate:<type or name>:<scope>`). */
export const RATE_ITEM_PREFIX = 'rate:';

/** What {@link RateStore.take} answers: a permit, or how long until the next one may be free. */
export type RateTake =
  | { readonly granted: true }
  | {
      readonly granted: false;
      /** Milliseconds (>= 1) until a permit may be free, as the store saw it; another worker may take it first. */
      readonly waitMs: number;
    };

/**
 * The port for rate limits shared by every worker: at most `limit` permits of a key in any window of
 * `perSeconds` (docs/jobs.md, "Rate limits"). A permit is never given back: it stands for a job start.
 */
export interface RateStore {
  /**
   * Takes one permit of `key` at `now` (epoch ms), or answers how long to wait. Conditional writes only:
   * two takes never both count against the same free place.
   * @throws StoreUnavailableError when the store does not answer (nothing was granted).
   */
  take(key: string, limit: number, perSeconds: number, now: number): Promise<RateTake>;
}
