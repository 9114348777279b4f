/** Settings of the local cache of dedup keys known COMPLETED. */
export interface CompletedCacheOptions {
  /** Entries kept at most; the least recently used goes first. @default 10000 */
  readonly maxEntries?: number;
  /** How long an entry is trusted. @default 300000 (5 min) */
  readonly ttlMs?: number;
  /** Clock, injectable for tests. @default Date.now */
  readonly now?: () => number;
}

/**
 * In-process TTL + LRU set of dedup keys this worker has seen COMPLETED. It only lets a worker skip the
 * claim write for a repeated duplicate; it is never the source of truth (a miss always goes to the store)
 * and is never used for leases. COMPLETED is terminal until an operator redrive, so a stale hit can at
 * worst drop a copy of a job that the store also calls done.
 */
export class CompletedCache {
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, number>();

  constructor(options: CompletedCacheOptions = {}) {
    this.#max = options.maxEntries ?? 10_000;
    this.#ttlMs = options.ttlMs ?? 300_000;
    this.#now = options.now ?? Date.now;
  }

  /** True when `key` is known COMPLETED and the entry has not expired. */
  has(key: string): boolean {
    const until = this.#entries.get(key);
    if (until === undefined) return false;
    if (until <= this.#now()) {
      this.#entries.delete(key);
      return false;
    }
    // Re-insert to mark as most recently used (Map keeps insertion order).
    this.#entries.delete(key);
    this.#entries.set(key, until);
    return true;
  }

  add(key: string): void {
    this.#entries.delete(key);
    this.#entries.set(key, this.#now() + this.#ttlMs);
    while (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) break;
      this.#entries.delete(oldest.value);
    }
  }

  /** Forgets a key, e.g. after an operator redrive reset it. */
  delete(key: string): void {
    this.#entries.delete(key);
  }

  get size(): number {
    return this.#entries.size;
  }
}
