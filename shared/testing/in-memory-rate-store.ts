import type { RateStore, RateTake } from '../core/contract/rate-store.ts';
import { decideRate, type RateLog } from '../core/decisions/rate.ts';
import { StoreFaults } from './store-faults.ts';

/** The operation name the DynamoDB rate store reports in `StoreUnavailableError.operation`. */
export type RateStoreOperation = 'rate-take';

/**
 * A {@link RateStore} over a Map, for unit tests and `runJob`: the same decision as `DynamoDbRateStore`
 * (decisions/rate.ts), taken atomically (one process), so the same contract holds; never a source of
 * truth in production.
 */
export class InMemoryRateStore implements RateStore {
  readonly #logs = new Map<string, RateLog>();
  /** Injects store outages (see {@link StoreFaults}). */
  readonly faults = new StoreFaults<RateStoreOperation>();
  /** Test hook: told of every grant with the stamp it was logged at, when it is decided (answered or not). */
  onGrant?: (key: string, at: number) => void;

  async take(key: string, limit: number, perSeconds: number, now: number): Promise<RateTake> {
    // A take whose request was slow (an injected delay), or whose `now` was read before a stall, is
    // judged against the time it arrived.
    const started = Date.now();
    return this.faults.run('rate-take', (): RateTake => {
      const latest = Math.max(now + Date.now() - started, Date.now());
      const decision = decideRate(this.#logs.get(key), limit, perSeconds, now, latest);
      if (!decision.grant) return { granted: false, waitMs: decision.waitMs };
      this.#logs.set(key, decision.next);
      this.onGrant?.(key, decision.next.grants.at(-1) ?? now);
      return { granted: true };
    });
  }

  /** Test hook: the grant times kept for `key` (within its last window), ascending. */
  grants(key: string): number[] {
    return [...(this.#logs.get(key)?.grants ?? [])];
  }

  /** Test hook: removes a key's item the way TTL would. Returns whether there was one. */
  delete(key: string): boolean {
    return this.#logs.delete(key);
  }
}
