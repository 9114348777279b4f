import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LeaseStore, NamedLease } from '../../../shared/core/contract/lease-store.ts';
import { LeaseLostError } from '../../../shared/errors.ts';

/** What a backend gives the lease store contract. */
export interface LeaseStoreFixture {
  readonly store: LeaseStore;
  /** Removes a lease item the way TTL would. */
  deleteItem(key: string): Promise<void>;
  cleanup(): Promise<void> | void;
}

const LEASE_MS = 10_000;

/**
 * The observable semantics of {@link LeaseStore}, registered as vitest blocks. `setup` runs once per suite;
 * every test uses fresh keys and passes `now` explicitly, so lease expiry needs no sleeping.
 */
export function leaseStoreContract(name: string, setup: () => Promise<LeaseStoreFixture>): void {
  describe(`Contract: LeaseStore (${name})`, () => {
    let f: LeaseStoreFixture;

    beforeAll(async () => {
      f = await setup();
    });
    afterAll(async () => {
      await f?.cleanup();
    });

    const fresh = (label: string) => `${label}#${randomUUID()}`;

    async function acquire(key: string, owner: string, now: number): Promise<NamedLease> {
      const result = await f.store.tryAcquire(key, owner, LEASE_MS, now);
      if (!result.acquired)
        throw new Error(`expected to acquire ${key}, holder is ${JSON.stringify(result.holder)}`);
      return result.lease;
    }

    async function leaseLost(write: Promise<unknown>): Promise<void> {
      const error = await write.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(LeaseLostError);
      expect((error as LeaseLostError).completedByThisLease).toBe(false);
    }

    describe('Method: tryAcquire', () => {
      it('acquires a free key: token now + 1, lease until now + leaseMs', async () => {
        // Prepare
        const key = fresh('account');
        const now = Date.now();
        expect(await f.store.get(key)).toBeUndefined();

        // Act
        const result = await f.store.tryAcquire(key, 'worker-a', LEASE_MS, now);

        // Assess
        expect(result).toEqual({
          acquired: true,
          lease: { key, owner: 'worker-a', token: now + 1, leaseUntil: now + LEASE_MS },
        });
        const item = await f.store.get(key);
        expect(item).toMatchObject({
          leaseKey: key,
          owner: 'worker-a',
          token: now + 1,
          leaseUntil: now + LEASE_MS,
          acquiredAt: now,
        });
        expect(item?.expiresAt).toBeGreaterThanOrEqual(Math.ceil((now + LEASE_MS) / 1000));
      });

      it('refuses a live lease (other owner, same owner, at the exact end) and names the holder', async () => {
        // Prepare
        const key = fresh('account');
        const t0 = Date.now();
        const lease = await acquire(key, 'worker-a', t0);
        const before = await f.store.get(key);

        // Act
        const answers = await Promise.all([
          f.store.tryAcquire(key, 'worker-b', LEASE_MS, t0 + 1),
          f.store.tryAcquire(key, 'worker-a', LEASE_MS, t0 + 2),
          f.store.tryAcquire(key, 'worker-c', LEASE_MS, lease.leaseUntil),
        ]);

        // Assess
        for (const answer of answers) expect(answer).toEqual({ acquired: false, holder: before });
        expect(await f.store.get(key)).toEqual(before);
      });

      it('takes an expired lease over with token + 1', async () => {
        const key = fresh('account');
        const t0 = Date.now();
        const a = await acquire(key, 'worker-a', t0);

        const b = await acquire(key, 'worker-b', a.leaseUntil + 1);

        expect(b).toEqual({
          key,
          owner: 'worker-b',
          token: a.token + 1,
          leaseUntil: a.leaseUntil + 1 + LEASE_MS,
        });
        expect(await f.store.get(key)).toMatchObject({ owner: 'worker-b', token: a.token + 1 });
      });

      it('lets exactly one of 10 concurrent acquires win; every refusal names the winner', async () => {
        // Prepare
        const key = fresh('account');
        const now = Date.now();

        // Act
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) => f.store.tryAcquire(key, `worker-${i}`, LEASE_MS, now)),
        );

        // Assess
        const winners = results.flatMap((r) => (r.acquired ? [r.lease] : []));
        expect(winners).toHaveLength(1);
        const winner = winners[0];
        for (const r of results) {
          if (!r.acquired) expect(r.holder).toMatchObject({ owner: winner?.owner, token: now + 1 });
        }
        expect(await f.store.get(key)).toMatchObject({ owner: winner?.owner, token: now + 1 });
      });
      it('answers a repeat of an acquire that landed (a retry after a lost answer) as acquired, same token', async () => {
        // Prepare: the first write went through; its answer never reached the caller.
        const key = fresh('account');
        const now = Date.now();
        const first = await acquire(key, 'worker-a', now);

        // Act: the SDK sends the very same request again.
        const again = await f.store.tryAcquire(key, 'worker-a', LEASE_MS, now);

        // Assess
        expect(again).toEqual({ acquired: true, lease: first });
        expect(await f.store.get(key)).toMatchObject({ owner: 'worker-a', token: first.token });
      });
    });

    describe('Method: renew', () => {
      it('extends the lease, in the store and on the lease object', async () => {
        const key = fresh('account');
        const t0 = Date.now();
        const a = await acquire(key, 'worker-a', t0);

        await f.store.renew(a, LEASE_MS, t0 + 5000);

        expect(a.leaseUntil).toBe(t0 + 5000 + LEASE_MS);
        expect(await f.store.get(key)).toMatchObject({
          owner: 'worker-a',
          token: a.token,
          leaseUntil: a.leaseUntil,
        });
        const late = await f.store.tryAcquire(key, 'worker-b', LEASE_MS, t0 + LEASE_MS + 1);
        expect(late.acquired).toBe(false);
      });

      it('never moves the lease end backwards: a delayed renewal that lands late changes nothing', async () => {
        const key = fresh('account');
        const t0 = Date.now();
        const a = await acquire(key, 'worker-a', t0);
        await f.store.renew(a, LEASE_MS, t0 + 5000);

        // A renewal sent at t0 + 1000 that was held up in the network, arriving after the later one.
        await f.store.renew(a, LEASE_MS, t0 + 1000);

        expect(a.leaseUntil).toBe(t0 + 5000 + LEASE_MS);
        expect((await f.store.get(key))?.leaseUntil).toBe(t0 + 5000 + LEASE_MS);
      });

      it('renews a lapsed lease nobody took yet (owner and token still match)', async () => {
        const key = fresh('account');
        const t0 = Date.now();
        const a = await acquire(key, 'worker-a', t0);
        await f.store.renew(a, LEASE_MS, a.leaseUntil + 1000);
        expect((await f.store.get(key))?.leaseUntil).toBe(t0 + LEASE_MS + 1000 + LEASE_MS);
      });

      it('is fenced: another owner took over, the lease was released, the item was deleted', async () => {
        // Prepare
        const t0 = Date.now();
        const takenKey = fresh('account');
        const taken = await acquire(takenKey, 'worker-a', t0);
        const b = await acquire(takenKey, 'worker-b', taken.leaseUntil + 1);
        const releasedKey = fresh('account');
        const released = await acquire(releasedKey, 'worker-a', t0);
        await f.store.release({ ...released });
        const deletedKey = fresh('account');
        const deleted = await acquire(deletedKey, 'worker-a', t0);
        await f.deleteItem(deletedKey);

        // Act + Assess
        await leaseLost(f.store.renew(taken, LEASE_MS, b.leaseUntil));
        await leaseLost(f.store.renew(released, LEASE_MS, t0 + 1));
        await leaseLost(f.store.renew(deleted, LEASE_MS, t0 + 1));
        expect(taken.leaseUntil).toBe(t0 + LEASE_MS);
        expect(await f.store.get(takenKey)).toMatchObject({ owner: 'worker-b', leaseUntil: b.leaseUntil });
        expect((await f.store.get(releasedKey))?.owner).toBeUndefined();
        expect(await f.store.get(deletedKey)).toBeUndefined();
      });
    });

    describe('Method: release', () => {
      it('frees the key at once and keeps the token, so the next holder gets a larger one', async () => {
        // Prepare
        const key = fresh('account');
        const t0 = Date.now();
        const a = await acquire(key, 'worker-a', t0);

        // Act
        await f.store.release(a);

        // Assess
        const item = await f.store.get(key);
        expect(item).toMatchObject({ leaseKey: key, leaseUntil: 0, token: a.token });
        expect(item?.owner).toBeUndefined();
        const b = await acquire(key, 'worker-b', t0 + 1);
        expect(b.token).toBe(a.token + 1);
      });

      it('is a no-op for a lost lease: the new holder keeps it, a deleted item stays deleted', async () => {
        // Prepare
        const t0 = Date.now();
        const key = fresh('account');
        const a = await acquire(key, 'worker-a', t0);
        const b = await acquire(key, 'worker-b', a.leaseUntil + 1);
        const goneKey = fresh('account');
        const gone = await acquire(goneKey, 'worker-a', t0);
        await f.deleteItem(goneKey);

        // Act
        await f.store.release(a);
        await f.store.release(a);
        await f.store.release(gone);

        // Assess
        expect(await f.store.get(key)).toMatchObject({
          owner: 'worker-b',
          token: b.token,
          leaseUntil: b.leaseUntil,
        });
        expect(await f.store.get(goneKey)).toBeUndefined();
      });
    });

    describe('Fencing tokens', () => {
      it('keep growing after the item was deleted (as TTL does)', async () => {
        // Prepare
        const key = fresh('account');
        const t0 = Date.now();
        const a = await acquire(key, 'worker-a', t0);
        await f.store.release(a);
        const b = await acquire(key, 'worker-b', t0 + 1);
        await f.store.release(b);
        await f.deleteItem(key);

        // Act
        const c = await acquire(key, 'worker-c', t0 + 2);

        // Assess
        expect(b.token).toBe(a.token + 1);
        expect(c.token).toBeGreaterThan(b.token);
        await leaseLost(f.store.renew(b, LEASE_MS, t0 + 2));
      });
    });
  });
}
