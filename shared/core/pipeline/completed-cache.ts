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
 * In-process TTL + LRU set of dedup keys this worker has seen COMPLETED, with the job's type. It only lets a worker skip the
 * claim write for a repeated duplicate; it is never the source of truth (a miss always goes to the store)
 * and is never used for leases. COMPLETED is terminal until an operator redrive, so a stale hit can at
 * worst drop a copy of a job that the store also calls done.
 */
export class CompletedCache {
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, { readonly until: number; readonly type: string | undefined }>();

  constructor(options: CompletedCacheOptions = {}) {
    this.#max = options.maxEntries ?? 10_000;
    this.#ttlMs = options.ttlMs ?? 300_000;
    this.#now = options.now ?? Date.now;
  }

  /**
   * True when `key` is known COMPLETED (as a job of `type`, when both name one) and the entry has not
   * expired. A message of another type is no copy: it misses, and the store refuses it as a collision.
   */
  has(key: string, type?: string): boolean {
    const entry = this.#entries.get(key);
    if (entry === undefined) return false;
    if (entry.until <= this.#now()) {
      this.#entries.delete(key);
      return false;
    }
    if (type !== undefined && entry.type !== undefined && entry.type !== type) return false;
    // Re-insert to mark as most recently used (Map keeps insertion order).
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return true;
  }

  add(key: string, type?: string): void {
    this.#entries.delete(key);
    this.#entries.set(key, { until: this.#now() + this.#ttlMs, type });
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
