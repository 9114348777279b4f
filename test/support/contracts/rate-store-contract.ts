import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateStore, RateTake } from '../../../shared/core/contract/rate-store.ts';

/** What a backend gives the rate store contract. */
export interface RateStoreFixture {
  /** `n` clients of one store, as `n` workers would hold (each DynamoDB client remembers its own view). */
  clients(n: number): RateStore[];
  /** The grant times stored for `key` (undefined: no item). */
  storedGrants(key: string): Promise<number[] | undefined>;
  cleanup(): Promise<void> | void;
}

const granted = (takes: readonly RateTake[]) => takes.filter((t) => t.granted).length;

/**
 * The observable semantics of {@link RateStore}, registered as vitest blocks. Every test uses fresh keys
 * and passes `now` explicitly, so windows pass without sleeping.
 */
export function rateStoreContract(name: string, setup: () => Promise<RateStoreFixture>): void {
  describe(`Contract: RateStore (${name})`, () => {
    let f: RateStoreFixture;

    beforeAll(async () => {
      f = await setup();
    });
    afterAll(async () => {
      await f?.cleanup();
    });

    const fresh = () => `rate:contract:k:${randomUUID()}`;

    it('grants exactly `limit` of a burst of concurrent takes from several clients', async () => {
      // Prepare
      const key = fresh();
      const clients = f.clients(3);
      const now = Date.now();

      // Act: 12 takes at once, 4 per client.
      const takes = await Promise.all(
        Array.from({ length: 12 }, (_, i) => (clients[i % 3] as RateStore).take(key, 5, 10, now + (i % 4))),
      );

      // Assess
      expect(granted(takes)).toBe(5);
      for (const take of takes) {
        if (!take.granted) expect(take.waitMs).toBeGreaterThan(0);
      }
      expect(await f.storedGrants(key)).toHaveLength(5);
    });

    it('counts a sliding window: a permit frees when the grant `limit` back leaves the window', async () => {
      // Prepare
      const key = fresh();
      const [store] = f.clients(1) as [RateStore];
      const t0 = Date.now();
      expect(await store.take(key, 2, 1, t0)).toEqual({ granted: true });
      expect(await store.take(key, 2, 1, t0 + 500)).toEqual({ granted: true });

      // Act and assess: full until t0 leaves [t, t + 1 s); then only one place, until t0 + 500 leaves.
      expect(await store.take(key, 2, 1, t0 + 999)).toEqual({ granted: false, waitMs: 1 });
      expect(await store.take(key, 2, 1, t0 + 1000)).toEqual({ granted: true });
      expect(await store.take(key, 2, 1, t0 + 1000)).toEqual({ granted: false, waitMs: 500 });
      expect(await store.take(key, 2, 1, t0 + 1500)).toEqual({ granted: true });
      expect(await f.storedGrants(key)).toEqual([t0 + 1000, t0 + 1500]);
    });

    it('never lets a client with an out-of-date view grant past the limit', async () => {
      // Prepare: a has seen 2 grants, then b takes the last place.
      const key = fresh();
      const [a, b] = f.clients(2) as [RateStore, RateStore];
      const now = Date.now();
      await a.take(key, 3, 60, now);
      await a.take(key, 3, 60, now);
      expect(await b.take(key, 3, 60, now + 1)).toEqual({ granted: true });

      // Act
      const late = await a.take(key, 3, 60, now + 2);

      // Assess: a learns of b's grant and waits for the first grant to leave the window.
      expect(late).toEqual({ granted: false, waitMs: 60_000 - 2 });
      expect(await f.storedGrants(key)).toHaveLength(3);
    });

    it('keeps keys apart, and one item per key whose log never outgrows the limit', async () => {
      // Prepare
      const [hot, cold] = [fresh(), fresh()];
      const [store] = f.clients(1) as [RateStore];
      const t0 = Date.now();

      // Act: the hot key at its limit for 10 windows, the cold one once.
      let hotGrants = 0;
      for (let i = 0; i < 40; i++) {
        if ((await store.take(hot, 3, 1, t0 + i * 250)).granted) hotGrants++;
      }
      const coldTake = await store.take(cold, 3, 1, t0);

      // Assess
      expect(hotGrants).toBe(30);
      expect(coldTake).toEqual({ granted: true });
      const kept = await f.storedGrants(hot);
      expect(kept?.length).toBeLessThanOrEqual(3);
      expect(await f.storedGrants(cold)).toEqual([t0]);
    });

    it('counts grants stamped ahead of its clock (a worker whose clock runs fast) as recent', async () => {
      // Prepare
      const key = fresh();
      const [fast, slow] = f.clients(2) as [RateStore, RateStore];
      const now = Date.now();
      expect(await fast.take(key, 1, 1, now + 300)).toEqual({ granted: true });

      // Act
      const take = await slow.take(key, 1, 1, now);

      // Assess
      expect(take).toEqual({ granted: false, waitMs: 1300 });
    });

    it('is not stalled for everyone by one worker whose clock runs 10 minutes fast (issue 31 item 8)', async () => {
      // Prepare: the fast worker takes the two permits of a 2-per-second key, stamped 10 minutes ahead.
      const key = fresh();
      const [fast, other] = f.clients(2) as [RateStore, RateStore];
      const now = Date.now();
      expect(await fast.take(key, 2, 1, now + 600_000)).toEqual({ granted: true });
      expect(await fast.take(key, 2, 1, now + 600_000)).toEqual({ granted: true });

      // Act: a worker with the right clock, at once and after the fast one took its next window.
      const first = await other.take(key, 2, 1, now);
      const second = await other.take(key, 2, 1, now + 10);
      const third = await other.take(key, 2, 1, now + 20);
      expect(await fast.take(key, 2, 1, now + 601_000)).toEqual({ granted: true });

      // Assess: its own two permits of the window, then a wait of its own window, not of the skew.
      expect([first, second]).toEqual([{ granted: true }, { granted: true }]);
      expect(third).toEqual({ granted: false, waitMs: 980 });
      expect(await other.take(key, 2, 1, now + 1000)).toEqual({ granted: true });
    });
  });
}
