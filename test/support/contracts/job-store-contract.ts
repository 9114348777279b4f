import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HISTORY_MAX } from '../../../shared/core/contract/job-history.ts';
import type { Checkpoint } from '../../../shared/core/contract/job-item.ts';
import type { ClaimRequest, Effect, JobLease, JobStore } from '../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { JobCancelledError, LeaseLostError, StoreRefusedError } from '../../../shared/errors.ts';

/** What a backend gives the job store contract. */
export interface JobStoreFixture {
  readonly store: JobStore;
  /**
   * A `versionedPut` effect on the application-state table (pk `account`): writes `balance`, applies only if
   * the account's version is still `seenVersion` (`undefined`: the account must not exist yet).
   */
  ledgerPut(account: string, seenVersion: number | undefined, balance: number): Effect;
  /** Reads one account of the application-state table (strongly consistent). */
  ledgerGet(account: string): Promise<{ balance: number; version: number } | undefined>;
  /** Removes a job item the way TTL would. */
  deleteItem(dedupKey: string): Promise<void>;
  cleanup(): Promise<void> | void;
}

const LEASE_MS = 10_000;
const boom = { message: 'boom', errorClass: 'Error' };

/**
 * The observable semantics of {@link JobStore}, registered as vitest blocks. `setup` runs once per suite;
 * every test uses fresh keys and passes `now` explicitly, so lease expiry needs no sleeping.
 */
export function jobStoreContract(name: string, setup: () => Promise<JobStoreFixture>): void {
  describe(`Contract: JobStore (${name})`, () => {
    let f: JobStoreFixture;

    beforeAll(async () => {
      f = await setup();
    });
    afterAll(async () => {
      await f?.cleanup();
    });

    const fresh = (label: string) => `${label}-${randomUUID()}`;

    function request(dedupKey: string, owner: string, now: number, overrides: Partial<ClaimRequest> = {}) {
      return {
        dedupKey,
        owner,
        messageId: `m-${owner}`,
        type: 'contract',
        createdAt: new Date(now).toISOString(),
        leaseMs: LEASE_MS,
        now,
        ...overrides,
      } satisfies ClaimRequest;
    }

    async function claim(req: ClaimRequest): Promise<JobLease> {
      const result = await f.store.claim(req);
      if (!result.claimed) throw new Error(`expected a claim, item is ${JSON.stringify(result.existing)}`);
      return result.lease;
    }

    /** A lease that expired: `owner` claimed at `t0`; the result's `after` is when anyone may take it. */
    async function claimAt(dedupKey: string, owner: string, t0: number) {
      const lease = await claim(request(dedupKey, owner, t0));
      return { lease, after: lease.leaseUntil + 1 };
    }

    function step(stepName: string, done: string[], at: number, data?: unknown): Checkpoint {
      return { step: stepName, done, at, ...(data === undefined ? {} : { data }) };
    }

    async function leaseLost(write: Promise<unknown>, completedByThisLease: boolean): Promise<void> {
      const error = await write.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(LeaseLostError);
      expect((error as LeaseLostError).completedByThisLease).toBe(completedByThisLease);
    }

    describe('Method: claim', () => {
      it('claims an absent item: token now + 1, attempts 1, version 1, lease until now + leaseMs', async () => {
        // Prepare
        const key = fresh('fresh');
        const now = Date.now();
        expect(await f.store.get(key)).toBeUndefined();

        // Act
        const result = await f.store.claim(request(key, 'worker-a', now, { messageId: 'm1' }));

        // Assess
        expect(result).toEqual({
          claimed: true,
          kind: 'fresh',
          lease: {
            dedupKey: key,
            owner: 'worker-a',
            token: now + 1,
            attempts: 1,
            messageId: 'm1',
            version: 1,
            leaseUntil: now + LEASE_MS,
          },
        });
        const item = await f.store.get(key);
        expect(item).toMatchObject({
          dedupKey: key,
          status: JobStatus.InProgress,
          owner: 'worker-a',
          leaseUntil: now + LEASE_MS,
          token: now + 1,
          attempts: 1,
          version: 1,
          messageId: 'm1',
          type: 'contract',
          createdAt: new Date(now).toISOString(),
          claimedAt: now,
          updatedAt: now,
        });
        expect(item?.checkpoint).toBeUndefined();
        expect(item?.expiresAt).toBeGreaterThanOrEqual(Math.ceil((now + LEASE_MS) / 1000));
      });

      it('refuses a live lease (other owner, same owner, and at the exact lease end) returning the item', async () => {
        // Prepare
        const key = fresh('live');
        const t0 = Date.now();
        const lease = await claim(request(key, 'worker-a', t0));
        const before = await f.store.get(key);

        // Act
        const other = await f.store.claim(request(key, 'worker-b', t0 + 1));
        const same = await f.store.claim(request(key, 'worker-a', t0 + 2));
        const atEnd = await f.store.claim(request(key, 'worker-c', lease.leaseUntil));

        // Assess: the refusal carries the item as stored, and nothing changed.
        for (const refused of [other, same, atEnd]) {
          expect(refused.claimed).toBe(false);
          if (!refused.claimed) expect(refused.existing).toEqual(before);
        }
        expect(await f.store.get(key)).toEqual(before);
      });

      it('takes an expired lease over: token + 1, attempts + 1, checkpoint kept, previous item returned', async () => {
        // Prepare: A claims and checkpoints one step, then its lease runs out.
        const key = fresh('takeover');
        const t0 = Date.now();
        const { lease: a, after } = await claimAt(key, 'worker-a', t0);
        const debit = step('debit', ['debit'], t0 + 5, { debit: 5 });
        expect(await f.store.checkpoint(a, debit)).toEqual({ ok: true });
        const beforeTakeover = await f.store.get(key);

        // Act
        const result = await f.store.claim(request(key, 'worker-b', after, { messageId: 'm-b' }));

        // Assess
        expect(result.claimed).toBe(true);
        if (!result.claimed) return;
        expect(result.kind).toBe('takeover');
        expect(result.previous).toEqual(beforeTakeover);
        expect(result.lease).toEqual({
          dedupKey: key,
          owner: 'worker-b',
          token: a.token + 1,
          attempts: 2,
          messageId: 'm-b',
          version: a.version + 1,
          leaseUntil: after + LEASE_MS,
          checkpoint: debit,
          // The claim cannot know it takes over; the lease's next write records it (docs/protocol.md, "History").
          pendingHistory: [
            {
              e: 'takeover',
              at: after,
              owner: 'worker-b',
              token: a.token + 1,
              attempt: 2,
              fromOwner: 'worker-a',
              fromToken: a.token,
              leaseEndedAt: beforeTakeover?.leaseUntil,
              fromClaimedAt: beforeTakeover?.claimedAt,
              fromAttempt: 1,
            },
          ],
        });
        expect(await f.store.get(key)).toMatchObject({
          status: JobStatus.InProgress,
          owner: 'worker-b',
          token: a.token + 1,
          attempts: 2,
          version: a.version + 1,
          messageId: 'm-b',
          checkpoint: debit,
          createdAt: new Date(t0).toISOString(),
          claimedAt: after,
        });
      });

      it('refuses COMPLETED and DEAD items, however late the claim', async () => {
        // Prepare
        const t0 = Date.now();
        const done = fresh('done');
        const dead = fresh('dead');
        const doneLease = await claim(request(done, 'worker-a', t0));
        expect(await f.store.complete(doneLease, { ok: true })).toEqual({ ok: true });
        const deadLease = await claim(request(dead, 'worker-a', t0));
        await f.store.markDead(deadLease, boom);
        const late = t0 + 100 * LEASE_MS;

        // Act
        const again = await f.store.claim(request(done, 'worker-b', late));
        const copy = await f.store.claim(request(dead, 'worker-b', late));

        // Assess
        expect(again.claimed).toBe(false);
        if (!again.claimed)
          expect(again.existing).toMatchObject({ status: JobStatus.Completed, owner: 'worker-a' });
        expect(copy.claimed).toBe(false);
        if (!copy.claimed) expect(copy.existing).toMatchObject({ status: JobStatus.Dead, attempts: 1 });
        expect(await f.store.get(done)).toMatchObject({ status: JobStatus.Completed, attempts: 1 });
        expect(await f.store.get(dead)).toMatchObject({ status: JobStatus.Dead, attempts: 1 });
      });

      it("resets a DEAD key past its deadKeyUntil for a fresh send only, never for the dead job's own message under a re-send's id", async () => {
        // Prepare: one job claimed by its message re-sent (origin m-1), another by its first message; both die.
        const t0 = Date.now();
        const viaResend = fresh('dead-resent');
        const viaFirst = fresh('dead-first');
        const ttl = { message: 'no more', errorClass: 'PermanentJobError', deadKeyTtlSeconds: 1 };
        const a = await claim(request(viaResend, 'worker-a', t0, { messageId: 'm-2', originId: 'm-1' }));
        expect(await f.store.get(viaResend)).toMatchObject({ messageId: 'm-2', originId: 'm-1' });
        await f.store.markDead(a, ttl);
        const b = await claim(request(viaFirst, 'worker-a', t0, { messageId: 'm-1' }));
        await f.store.markDead(b, ttl);
        const late = t0 + 100 * LEASE_MS;

        // Act: the dead jobs' own messages, under other ids, after deadKeyUntil; then a fresh send.
        const copies = await Promise.all([
          f.store.claim(request(viaResend, 'worker-b', late, { messageId: 'm-3', originId: 'm-1' })),
          f.store.claim(request(viaResend, 'worker-b', late, { messageId: 'm-1' })),
          f.store.claim(request(viaFirst, 'worker-b', late, { messageId: 'm-4', originId: 'm-1' })),
        ]);
        const freshSend = await f.store.claim(request(viaResend, 'worker-c', late + 1, { messageId: 'm-9' }));

        // Assess: the copies were refused and changed nothing; the fresh send reset the key, and its item
        // names no origin (the message is its own).
        expect(copies.map((c) => c.claimed)).toEqual([false, false, false]);
        expect(await f.store.get(viaFirst)).toMatchObject({ status: JobStatus.Dead, messageId: 'm-1' });
        expect(freshSend.claimed).toBe(true);
        const reset = await f.store.get(viaResend);
        expect(reset).toMatchObject({ status: JobStatus.InProgress, messageId: 'm-9', attempts: 1 });
        expect(reset?.originId).toBeUndefined();
      });

      it("refuses a message sent for an earlier life of the key (a redrive's `life`) in every unfinished state, and never lets it reset a dead key", async () => {
        // Prepare: life 0 dies; after its deadKeyUntil a fresh send resets the key (life 1), which fails
        // once and waits for its retry.
        const t0 = Date.now();
        const key = fresh('older-life');
        const ttl = { message: 'no more', errorClass: 'PermanentJobError', deadKeyTtlSeconds: 1 };
        await f.store.markDead(await claim(request(key, 'worker-a', t0, { messageId: 'm-1' })), ttl);
        const t1 = t0 + 100 * LEASE_MS;
        const reset = await claim(request(key, 'worker-b', t1, { messageId: 'm-2' }));
        expect(await f.store.get(key)).toMatchObject({ status: JobStatus.InProgress, messageId: 'm-2' });
        await f.store.release(reset, t1 + 1, boom);
        const waiting = await f.store.get(key);

        // Act: a redrive's message of life 0 (re-sent in place of m-1), after the retry time; then one of life 1.
        const older = await f.store.claim(
          request(key, 'worker-c', t1 + 2, { messageId: 'm-3', originId: 'm-1', life: 0 }),
        );
        const unchanged = await f.store.get(key);
        const own = await f.store.claim(
          request(key, 'worker-c', t1 + 3, { messageId: 'm-4', originId: 'm-1', life: 1 }),
        );

        // Assess: refused with the item, which it left as it was; the message of the item's life claims it.
        expect(older).toMatchObject({ claimed: false, existing: { status: JobStatus.RetryWait, life: 1 } });
        expect(unchanged).toEqual(waiting);
        expect(own).toMatchObject({ claimed: true, kind: 'retry', lease: { attempts: 2 } });

        // A dead key past its deadKeyUntil: a message of a life (a redrive's) is a copy, not a fresh send.
        const dead = fresh('older-life-dead');
        await f.store.markDead(await claim(request(dead, 'worker-a', t0, { messageId: 'm-1' })), ttl);
        const before = await f.store.get(dead);
        const stale = await f.store.claim(
          request(dead, 'worker-b', t1, { messageId: 'm-5', originId: 'm-0', life: 0 }),
        );
        expect(stale).toMatchObject({ claimed: false, existing: { status: JobStatus.Dead } });
        expect(await f.store.get(dead)).toEqual(before);
      });

      it('lets exactly one of 20 concurrent claims win; every refusal names the winner', async () => {
        // Prepare
        const key = fresh('race');
        const now = Date.now();
        const requests = Array.from({ length: 20 }, (_, i) => request(key, `worker-${i}`, now));

        // Act
        const results = await Promise.all(requests.map((r) => f.store.claim(r)));

        // Assess
        const winners = results.flatMap((r) => (r.claimed ? [r.lease] : []));
        expect(winners).toHaveLength(1);
        const winner = winners[0];
        for (const r of results) {
          if (!r.claimed) expect(r.existing).toMatchObject({ owner: winner?.owner, token: winner?.token });
        }
        expect(await f.store.get(key)).toMatchObject({ owner: winner?.owner, token: now + 1, attempts: 1 });
      });

      it('claims a released job only once its retry time has passed, as a retry', async () => {
        // Prepare
        const key = fresh('retry');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        const first = step('one', ['one'], t0 + 1);
        await f.store.checkpoint(a, first);
        const retryAt = t0 + 3 * LEASE_MS;
        await f.store.release(a, retryAt, boom);

        // Act
        const early = await f.store.claim(request(key, 'worker-b', retryAt - 1));
        const due = await f.store.claim(request(key, 'worker-b', retryAt + 1));

        // Assess
        expect(early.claimed).toBe(false);
        if (!early.claimed)
          expect(early.existing).toMatchObject({ status: JobStatus.RetryWait, leaseUntil: retryAt });
        expect(due.claimed).toBe(true);
        if (!due.claimed) return;
        expect(due.kind).toBe('retry');
        expect(due.lease).toMatchObject({ token: a.token + 1, attempts: 2, checkpoint: first });
      });

      it('refuses a message of another type in every state, however late, and leaves the item as it was (issue 18)', async () => {
        // Prepare: one job of type `contract` in each state a claim could otherwise take or meet.
        const t0 = Date.now();
        const waiting = fresh('other-waiting');
        const a = await claim(request(waiting, 'worker-a', t0));
        await f.store.checkpoint(a, step('debit', ['debit'], t0 + 1));
        await f.store.release(a, t0 + 2, boom);
        const expired = fresh('other-expired');
        await claim(request(expired, 'worker-a', t0));
        const done = fresh('other-done');
        await f.store.complete(await claim(request(done, 'worker-a', t0)), 'ok');
        const dead = fresh('other-dead');
        await f.store.markDead(await claim(request(dead, 'worker-a', t0)), boom);
        const late = t0 + 100 * LEASE_MS;

        // Act + Assess: refused with the item (naming its own type); no token, attempt or type changed.
        for (const key of [waiting, expired, done, dead]) {
          const before = await f.store.get(key);
          const result = await f.store.claim(request(key, 'worker-b', late, { type: 'contract.other' }));
          expect(result).toMatchObject({ claimed: false, existing: { type: 'contract' } });
          expect(await f.store.get(key)).toEqual(before);
        }
        // The job's own type still takes the unfinished ones.
        const own = await f.store.claim(request(waiting, 'worker-b', late));
        expect(own).toMatchObject({ claimed: true, kind: 'retry', lease: { checkpoint: { step: 'debit' } } });
      });
    });

    describe('Method: renew', () => {
      it('extends the lease without bumping the version', async () => {
        // Prepare
        const key = fresh('renew');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));

        // Act
        await f.store.renew(a, LEASE_MS, t0 + 5000);

        // Assess: a later claim is refused until the new end; a checkpoint still matches the version.
        expect(a.leaseUntil).toBe(t0 + 5000 + LEASE_MS);
        expect(await f.store.get(key)).toMatchObject({
          leaseUntil: a.leaseUntil,
          version: 1,
          owner: 'worker-a',
        });
        expect((await f.store.claim(request(key, 'worker-b', t0 + LEASE_MS + 1))).claimed).toBe(false);
        expect(await f.store.checkpoint(a, step('s', ['s'], t0 + 6000))).toEqual({ ok: true });
      });

      it('never moves the lease back: a late renewal after a later one changes nothing and is not a loss', async () => {
        // Prepare: two renewals of one lease; the one sent first lands last.
        const key = fresh('late-renew');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        await f.store.renew({ ...a }, LEASE_MS, t0 + 2000);

        // Act
        await f.store.renew(a, LEASE_MS, t0 + 1000);

        // Assess: the stored lease keeps the later end, and the caller's copy learns it.
        expect((await f.store.get(key))?.leaseUntil).toBe(t0 + 2000 + LEASE_MS);
        expect(a.leaseUntil).toBe(t0 + 2000 + LEASE_MS);
      });

      it('renews a lapsed lease nobody took yet (owner and token still match)', async () => {
        const key = fresh('lapsed');
        const t0 = Date.now();
        const { lease: a, after } = await claimAt(key, 'worker-a', t0);
        await f.store.renew(a, LEASE_MS, after + 1000);
        expect((await f.store.get(key))?.leaseUntil).toBe(after + 1000 + LEASE_MS);
      });

      it('is fenced: another owner, an old token of the same owner, after release, after deletion', async () => {
        // Prepare: four jobs, each lost a different way.
        const t0 = Date.now();
        const takenKey = fresh('taken');
        const { lease: taken, after } = await claimAt(takenKey, 'worker-a', t0);
        await claim(request(takenKey, 'worker-b', after));
        const reclaimedKey = fresh('reclaimed');
        const { lease: oldToken } = await claimAt(reclaimedKey, 'worker-a', t0);
        await claim(request(reclaimedKey, 'worker-a', after));
        const releasedKey = fresh('released');
        const released = await claim(request(releasedKey, 'worker-a', t0));
        await f.store.release(released, t0 + 1, boom);
        const deletedKey = fresh('deleted');
        const deleted = await claim(request(deletedKey, 'worker-a', t0));
        await f.deleteItem(deletedKey);

        // Act + Assess
        await leaseLost(f.store.renew(taken, LEASE_MS, after), false);
        await leaseLost(f.store.renew(oldToken, LEASE_MS, after), false);
        await leaseLost(f.store.renew(released, LEASE_MS, t0 + 2), false);
        await leaseLost(f.store.renew(deleted, LEASE_MS, t0 + 2), false);
        expect(await f.store.get(takenKey)).toMatchObject({
          owner: 'worker-b',
          leaseUntil: after + LEASE_MS,
        });
        expect(await f.store.get(deletedKey)).toBeUndefined();
      });

      it('after the same lease completed the job, says so (completedByThisLease)', async () => {
        const key = fresh('renew-done');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        await f.store.complete({ ...a }, 'done');
        await leaseLost(f.store.renew(a, LEASE_MS, t0 + 1), true);
      });
    });

    describe('Method: checkpoint', () => {
      it('stores the checkpoint, bumps the version and moves the lease along', async () => {
        // Prepare
        const key = fresh('cp');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        const cp = step('debit', ['debit'], t0 + 10, { amount: 5, nested: { list: [1, 2] } });

        // Act
        const result = await f.store.checkpoint(a, cp);

        // Assess
        expect(result).toEqual({ ok: true });
        expect(a.version).toBe(2);
        expect(a.checkpoint).toEqual(cp);
        expect(await f.store.get(key)).toMatchObject({ checkpoint: cp, version: 2, updatedAt: t0 + 10 });
      });

      it('refuses a stale version (a second copy of the lease) with LeaseLostError', async () => {
        // Prepare
        const key = fresh('stale');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        const copy: JobLease = { ...a };
        const first = step('one', ['one'], t0 + 1);
        await f.store.checkpoint(a, first);

        // Act + Assess
        await leaseLost(f.store.checkpoint(copy, step('other', ['other'], t0 + 2)), false);
        expect(copy.version).toBe(1);
        expect(await f.store.get(key)).toMatchObject({ checkpoint: first, version: 2, owner: 'worker-a' });
      });

      it('is fenced: another owner, and after the same lease completed', async () => {
        const t0 = Date.now();
        const takenKey = fresh('cp-taken');
        const { lease: a, after } = await claimAt(takenKey, 'worker-a', t0);
        await claim(request(takenKey, 'worker-b', after));
        await leaseLost(f.store.checkpoint(a, step('late', ['late'], after)), false);
        expect((await f.store.get(takenKey))?.checkpoint).toBeUndefined();

        const doneKey = fresh('cp-done');
        const b = await claim(request(doneKey, 'worker-a', t0));
        await f.store.complete(b, 'done');
        await leaseLost(f.store.checkpoint(b, step('late', ['late'], t0 + 1)), true);
      });

      it('commits its effects with the checkpoint, or neither', async () => {
        // Prepare
        const key = fresh('cp-fx');
        const account = fresh('acct');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        const debit = step('debit', ['debit'], t0 + 1);

        // Act: the first checkpoint creates the account; the second carries a stale version.
        const ok = await f.store.checkpoint(a, debit, [f.ledgerPut(account, undefined, 90)]);
        const conflict = await f.store.checkpoint(a, step('credit', ['debit', 'credit'], t0 + 2), [
          f.ledgerPut(account, 7, 80),
        ]);

        // Assess
        expect(ok).toEqual({ ok: true });
        expect(conflict).toEqual({ ok: false, reason: 'effect-conflict', index: 0 });
        expect(a.version).toBe(2);
        expect(a.checkpoint).toEqual(debit);
        expect(await f.ledgerGet(account)).toMatchObject({ balance: 90, version: 1 });
        expect(await f.store.get(key)).toMatchObject({ checkpoint: debit, version: 2 });
      });
    });

    describe('Method: complete', () => {
      it('marks the job COMPLETED with its result, keeps owner and token, clears the last error', async () => {
        // Prepare: a first attempt failed, the retry completes.
        const key = fresh('complete');
        const t0 = Date.now();
        const first = await claim(request(key, 'worker-a', t0));
        await f.store.release(first, t0 + 1, { message: 'flaky', errorClass: 'TransientJobError' });
        const retry = await claim(request(key, 'worker-b', t0 + 2));
        expect(await f.store.get(key)).toMatchObject({ lastError: 'flaky' });
        const before = Date.now();

        // Act
        const result = await f.store.complete(retry, { total: 3, lines: ['a', 'b'] });

        // Assess
        expect(result).toEqual({ ok: true });
        expect(retry.version).toBe(4);
        const item = await f.store.get(key);
        expect(item).toMatchObject({
          status: JobStatus.Completed,
          owner: 'worker-b',
          token: retry.token,
          attempts: 2,
          version: 4,
          result: { total: 3, lines: ['a', 'b'] },
        });
        expect(item?.lastError).toBeUndefined();
        expect(item?.lastErrorClass).toBeUndefined();
        expect(item?.completedAt).toBeGreaterThanOrEqual(before);
        expect(item?.updatedAt).toBe(item?.completedAt);
      });

      it('stores an undefined result as null', async () => {
        const key = fresh('null');
        const a = await claim(request(key, 'worker-a', Date.now()));
        await f.store.complete(a, undefined);
        expect((await f.store.get(key))?.result).toBeNull();
      });

      it('commits its effects atomically: one conflicting effect means nothing is written', async () => {
        // Prepare: the account exists at version 1.
        const key = fresh('atomic');
        const existing = fresh('acct');
        const created = fresh('acct');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        await f.store.checkpoint(a, step('open', ['open'], t0 + 1), [f.ledgerPut(existing, undefined, 100)]);
        const before = await f.store.get(key);

        // Act: the first effect would succeed, the second carries a stale version.
        const conflict = await f.store.complete(a, 'x', [
          f.ledgerPut(created, undefined, 1),
          f.ledgerPut(existing, 5, 50),
        ]);

        // Assess: neither effect nor completion.
        expect(conflict).toEqual({ ok: false, reason: 'effect-conflict', index: 1 });
        expect(a.version).toBe(2);
        expect(await f.ledgerGet(created)).toBeUndefined();
        expect(await f.ledgerGet(existing)).toMatchObject({ balance: 100, version: 1 });
        expect(await f.store.get(key)).toEqual(before);
        expect(before?.status).toBe(JobStatus.InProgress);

        // Act again with the right version: both effects and the completion land together.
        const ok = await f.store.complete(a, 'x', [
          f.ledgerPut(created, undefined, 1),
          f.ledgerPut(existing, 1, 50),
        ]);
        expect(ok).toEqual({ ok: true });
        expect(await f.ledgerGet(created)).toMatchObject({ balance: 1, version: 1 });
        expect(await f.ledgerGet(existing)).toMatchObject({ balance: 50, version: 2 });
        expect(await f.store.get(key)).toMatchObject({
          status: JobStatus.Completed,
          result: 'x',
          version: 3,
        });
      });

      it('refuses a fenced-out worker with LeaseLostError and writes none of its effects', async () => {
        // Prepare: A's lease expired and B took the job.
        const key = fresh('fenced-fx');
        const account = fresh('acct');
        const taken = fresh('acct');
        const t0 = Date.now();
        const { lease: a, after } = await claimAt(key, 'worker-a', t0);
        const b = await claim(request(key, 'worker-b', after));
        expect(
          await f.store.checkpoint(b, step('open', ['open'], after), [f.ledgerPut(taken, undefined, 7)]),
        ).toEqual({
          ok: true,
        });

        // Act + Assess: a valid effect, and a conflicting one: the fence answers first either way.
        await leaseLost(f.store.complete(a, 'late', [f.ledgerPut(account, undefined, 100)]), false);
        await leaseLost(f.store.complete(a, 'late', [f.ledgerPut(taken, undefined, 100)]), false);
        expect(await f.ledgerGet(account)).toBeUndefined();
        expect(await f.ledgerGet(taken)).toMatchObject({ balance: 7, version: 1 });
        expect(await f.store.get(key)).toMatchObject({ status: JobStatus.InProgress, owner: 'worker-b' });

        // The rightful owner's commit goes through.
        expect(await f.store.complete(b, 'ok', [f.ledgerPut(account, undefined, 100)])).toEqual({ ok: true });
        expect(await f.ledgerGet(account)).toMatchObject({ balance: 100, version: 1 });
      });

      it('answers a repeated completion by the same lease with completedByThisLease, others without', async () => {
        // Prepare: A's lease expired; B took over and completed.
        const key = fresh('again');
        const t0 = Date.now();
        const { lease: a, after } = await claimAt(key, 'worker-a', t0);
        const b = await claim(request(key, 'worker-b', after));
        await f.store.complete({ ...b }, 'ok');

        // Act + Assess: B's commit answer "was lost" and B retries; A is simply late.
        await leaseLost(f.store.complete(b, 'ok'), true);
        await leaseLost(f.store.complete(a, 'late'), false);
        expect(await f.store.get(key)).toMatchObject({
          status: JobStatus.Completed,
          owner: 'worker-b',
          result: 'ok',
        });
      });
    });

    describe('Method: claimAndComplete (the fast path)', () => {
      const fast = (dedupKey: string, owner: string, now: number, maxAttempts = 5) => {
        const { leaseMs: _unused, ...rest } = request(dedupKey, owner, now);
        return { ...rest, maxAttempts };
      };

      it('completes a job nobody claimed, with its effects, in one write: token now + 1, attempts 1', async () => {
        // Prepare
        const key = fresh('fast');
        const account = fresh('acct');
        const now = Date.now();

        // Act
        const result = await f.store.claimAndComplete(fast(key, 'worker-a', now), { n: 1 }, [
          f.ledgerPut(account, undefined, 10),
        ]);

        // Assess
        expect(result).toEqual({ ok: true });
        expect(await f.ledgerGet(account)).toMatchObject({ balance: 10, version: 1 });
        expect(await f.store.get(key)).toMatchObject({
          dedupKey: key,
          status: JobStatus.Completed,
          owner: 'worker-a',
          token: now + 1,
          attempts: 1,
          version: 1,
          messageId: 'm-worker-a',
          type: 'contract',
          claimedAt: now,
          completedAt: now,
          result: { n: 1 },
        });
        // With no effects it is a single conditional write; the result defaults to null.
        const bare = fresh('fast-bare');
        expect(await f.store.claimAndComplete(fast(bare, 'worker-a', now), undefined)).toEqual({ ok: true });
        expect(await f.store.get(bare)).toMatchObject({ status: JobStatus.Completed, result: null });
      });

      it('is refused by a finished job, a live lease and a backoff, returning the item and writing nothing', async () => {
        // Prepare: one job of each kind.
        const t0 = Date.now();
        const done = fresh('done');
        await f.store.claimAndComplete(fast(done, 'worker-a', t0), 'first');
        const dead = fresh('dead');
        await f.store.markDead(await claim(request(dead, 'worker-a', t0)), boom);
        const held = fresh('held');
        await claim(request(held, 'worker-a', t0));
        const waiting = fresh('waiting');
        await f.store.release(await claim(request(waiting, 'worker-a', t0)), t0 + 5_000, boom);
        const account = fresh('acct');

        // Act + Assess: each refusal names the item as it is; no effect applies.
        for (const [key, status] of [
          [done, JobStatus.Completed],
          [dead, JobStatus.Dead],
          [held, JobStatus.InProgress],
          [waiting, JobStatus.RetryWait],
        ] as const) {
          const before = await f.store.get(key);
          const result = await f.store.claimAndComplete(fast(key, 'worker-b', t0 + 1_000), 'late', [
            f.ledgerPut(account, undefined, 1),
          ]);
          expect(result).toMatchObject({ ok: false, reason: 'refused', existing: { status } });
          expect(await f.store.get(key)).toEqual(before);
        }
        expect(await f.ledgerGet(account)).toBeUndefined();
      });

      it('is refused by a job of another type in every state, writing nothing (issue 18)', async () => {
        // Prepare: a claimable job (released, backoff over, no checkpoint), a finished and a dead one.
        const t0 = Date.now();
        const waiting = fresh('fast-other-waiting');
        await f.store.release(await claim(request(waiting, 'worker-a', t0)), t0 + 1, boom);
        const done = fresh('fast-other-done');
        await f.store.claimAndComplete(fast(done, 'worker-a', t0), 'first');
        const dead = fresh('fast-other-dead');
        await f.store.markDead(await claim(request(dead, 'worker-a', t0)), boom);
        const account = fresh('acct');

        // Act + Assess
        for (const key of [waiting, done, dead]) {
          const before = await f.store.get(key);
          const result = await f.store.claimAndComplete(
            { ...fast(key, 'worker-b', t0 + 1_000), type: 'contract.other' },
            'other',
            [f.ledgerPut(account, undefined, 1)],
          );
          expect(result).toMatchObject({ ok: false, reason: 'refused', existing: { type: 'contract' } });
          expect(await f.store.get(key)).toEqual(before);
        }
        expect(await f.ledgerGet(account)).toBeUndefined();
        // The same job's own type still commits the waiting one.
        expect(await f.store.claimAndComplete(fast(waiting, 'worker-b', t0 + 1_000), 'own')).toEqual({
          ok: true,
        });
      });

      it('is refused by a checkpointed job even when its lease ended (it resumes leased only)', async () => {
        const key = fresh('fast-checkpointed');
        const t0 = Date.now();
        const { lease, after } = await claimAt(key, 'worker-a', t0);
        await f.store.checkpoint(lease, step('debit', ['debit'], t0 + 1));

        const result = await f.store.claimAndComplete(fast(key, 'worker-b', after), 'late');

        expect(result).toMatchObject({
          ok: false,
          reason: 'refused',
          existing: { checkpoint: { step: 'debit' } },
        });
        expect(await f.store.get(key)).toMatchObject({ status: JobStatus.InProgress, owner: 'worker-a' });
      });

      it('is refused by a job whose attempts are used up, even when its lease ended (a claim dead-letters it)', async () => {
        const key = fresh('fast-exhausted');
        const t0 = Date.now();
        const { after } = await claimAt(key, 'worker-a', t0);

        const result = await f.store.claimAndComplete(fast(key, 'worker-b', after, 1), 'late');

        expect(result).toMatchObject({ ok: false, reason: 'refused', existing: { attempts: 1 } });
        expect(await f.store.get(key)).toMatchObject({ status: JobStatus.InProgress, owner: 'worker-a' });
        expect(await f.store.claimAndComplete(fast(key, 'worker-b', after, 2), 'ok')).toEqual({ ok: true });
      });

      it('takes over a lapsed lease or a due retry, fencing the old owner out', async () => {
        // Prepare: A's lease lapsed; C's job failed once and its retry is due.
        const t0 = Date.now();
        const lapsed = fresh('lapsed');
        const { lease: a, after } = await claimAt(lapsed, 'worker-a', t0);
        const due = fresh('due');
        const c = await claim(request(due, 'worker-c', t0));
        await f.store.release(c, t0 + 1, { message: 'flaky', errorClass: 'TransientJobError' });

        // Act
        expect(await f.store.claimAndComplete(fast(lapsed, 'worker-b', after), 'b')).toEqual({ ok: true });
        expect(await f.store.claimAndComplete(fast(due, 'worker-b', t0 + 2), 'b')).toEqual({ ok: true });

        // Assess: the token moved past A's, so A's commit is refused (and not as its own).
        expect(await f.store.get(lapsed)).toMatchObject({
          status: JobStatus.Completed,
          owner: 'worker-b',
          token: a.token + 1,
          attempts: 2,
        });
        await leaseLost(f.store.complete(a, 'late'), false);
        const retried = await f.store.get(due);
        expect(retried).toMatchObject({ status: JobStatus.Completed, attempts: 2, result: 'b' });
        expect(retried?.lastError).toBeUndefined();
        expect(retried?.lastErrorClass).toBeUndefined();
      });

      it('writes nothing when an effect conflicts, and names the effect', async () => {
        // Prepare: the account exists at version 1.
        const key = fresh('fast-conflict');
        const existing = fresh('acct');
        const created = fresh('acct');
        const seed = fresh('seed');
        await f.store.claimAndComplete(fast(seed, 'worker-a', Date.now()), null, [
          f.ledgerPut(existing, undefined, 100),
        ]);

        // Act
        const result = await f.store.claimAndComplete(fast(key, 'worker-a', Date.now()), 'x', [
          f.ledgerPut(created, undefined, 1),
          f.ledgerPut(existing, 7, 50),
        ]);

        // Assess
        expect(result).toEqual({ ok: false, reason: 'effect-conflict', index: 1 });
        expect(await f.store.get(key)).toBeUndefined();
        expect(await f.ledgerGet(created)).toBeUndefined();
        expect(await f.ledgerGet(existing)).toMatchObject({ balance: 100, version: 1 });
      });

      it('lets exactly one of 10 racing copies commit, also against a claim; the others see the winner', async () => {
        // Prepare: every racer writes its own account, so only the job item decides.
        const key = fresh('fast-race');
        const now = Date.now();
        const accounts = Array.from({ length: 10 }, () => fresh('acct'));

        // Act
        const [claimed, ...commits] = await Promise.all([
          f.store.claim(request(key, 'worker-claim', now)),
          ...accounts.map((account, i) =>
            f.store.claimAndComplete(fast(key, `worker-${i}`, now), i, [f.ledgerPut(account, undefined, i)]),
          ),
        ]);

        // Assess
        const written = (await Promise.all(accounts.map((a) => f.ledgerGet(a)))).filter(Boolean);
        const winners = commits.filter((c) => c?.ok).length + (claimed?.claimed ? 1 : 0);
        expect(winners).toBe(1);
        expect(written.length).toBe(claimed?.claimed ? 0 : 1);
        const item = await f.store.get(key);
        for (const commit of commits) {
          if (commit && !commit.ok && commit.reason === 'refused') {
            expect(commit.existing.owner).toBe(item?.owner);
          }
        }
      });
    });

    describe('Method: release', () => {
      it('gives the job back: RETRY_WAIT until retryAt, owner removed, error kept, checkpoint kept', async () => {
        // Prepare
        const key = fresh('release');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        const cp = step('one', ['one'], t0 + 1);
        await f.store.checkpoint(a, cp);
        const before = Date.now();

        // Act
        await f.store.release(a, t0 + 5000, { message: 'flaky', errorClass: 'TransientJobError' });

        // Assess
        expect(a.version).toBe(3);
        const item = await f.store.get(key);
        expect(item).toMatchObject({
          status: JobStatus.RetryWait,
          leaseUntil: t0 + 5000,
          token: a.token,
          attempts: 1,
          version: 3,
          lastError: 'flaky',
          lastErrorClass: 'TransientJobError',
          checkpoint: cp,
        });
        expect(item?.owner).toBeUndefined();
        expect(item?.updatedAt).toBeGreaterThanOrEqual(before);
      });

      it('takes the attempt back when asked (a store outage is not the job failing)', async () => {
        const key = fresh('refund');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        await f.store.release(a, t0 + 1, boom);
        const b = await claim(request(key, 'worker-b', t0 + 2));
        expect(b.attempts).toBe(2);

        await f.store.release(b, t0 + 3, boom, { refundAttempt: true });

        expect(await f.store.get(key)).toMatchObject({ attempts: 1, status: JobStatus.RetryWait });
        const c = await claim(request(key, 'worker-c', t0 + 4));
        expect(c.attempts).toBe(2);
      });

      // Issue 18 (defect 4): refunds are bounded by the worker, so the item counts them and every claim
      // reports the count; redrive starts the budget over.
      it('counts each refund in `refunds`, hands the count to the next claim, and redrive clears it', async () => {
        const key = fresh('refunds');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        expect(a.refunds).toBeUndefined();
        await f.store.release(a, t0 + 1, boom, { refundAttempt: true });
        const b = await claim(request(key, 'worker-b', t0 + 2));
        expect(b).toMatchObject({ attempts: 1, refunds: 1 });
        await f.store.release(b, t0 + 3, boom, { refundAttempt: true });
        expect(await f.store.get(key)).toMatchObject({ attempts: 0, refunds: 2 });
        const c = await claim(request(key, 'worker-c', t0 + 4));
        expect(c).toMatchObject({ attempts: 1, refunds: 2 });
        await f.store.release(c, t0 + 5, boom);
        expect(await f.store.get(key)).toMatchObject({ attempts: 1, refunds: 2 });

        expect(await f.store.resetForRedrive(key, Date.now())).toBe(true);

        expect((await f.store.get(key))?.refunds).toBeUndefined();
      });

      it('caps the error message at 1000 characters with a truncation marker, as valid text', async () => {
        const key = fresh('long');
        const a = await claim(request(key, 'worker-a', Date.now()));
        await f.store.release(a, 0, { message: `\uD800${'x'.repeat(1499)}`, errorClass: 'Error' });
        const marker = '… [truncated: 1500 characters]';
        expect((await f.store.get(key))?.lastError).toBe(
          `\uFFFD${'x'.repeat(1000 - marker.length - 1)}${marker}`,
        );
      });

      it('is fenced: a second release, another owner, and after the same lease completed', async () => {
        const t0 = Date.now();
        const twiceKey = fresh('twice');
        const twice = await claim(request(twiceKey, 'worker-a', t0));
        await f.store.release({ ...twice }, t0 + 1, boom);
        await leaseLost(f.store.release(twice, t0 + 1, boom), false);

        const takenKey = fresh('rel-taken');
        const { lease: a, after } = await claimAt(takenKey, 'worker-a', t0);
        await claim(request(takenKey, 'worker-b', after));
        await leaseLost(f.store.release(a, after, boom), false);
        expect(await f.store.get(takenKey)).toMatchObject({
          status: JobStatus.InProgress,
          owner: 'worker-b',
        });

        const doneKey = fresh('rel-done');
        const done = await claim(request(doneKey, 'worker-a', t0));
        await f.store.complete(done, 'ok');
        await leaseLost(f.store.release(done, t0 + 1, boom), true);
        expect(await f.store.get(doneKey)).toMatchObject({ status: JobStatus.Completed, owner: 'worker-a' });
      });
    });

    describe('Method: markDead', () => {
      it('marks the job DEAD: lease over, owner removed, error kept', async () => {
        const key = fresh('dead');
        const a = await claim(request(key, 'worker-a', Date.now()));
        await f.store.markDead(a, { message: 'no more', errorClass: 'PermanentJobError' });
        expect(a.version).toBe(2);
        const item = await f.store.get(key);
        expect(item).toMatchObject({
          status: JobStatus.Dead,
          leaseUntil: 0,
          attempts: 1,
          version: 2,
          lastError: 'no more',
          lastErrorClass: 'PermanentJobError',
        });
        expect(item?.owner).toBeUndefined();
      });

      it('is fenced: another owner, and after the same lease completed', async () => {
        const t0 = Date.now();
        const takenKey = fresh('dead-taken');
        const { lease: a, after } = await claimAt(takenKey, 'worker-a', t0);
        await claim(request(takenKey, 'worker-b', after));
        await leaseLost(f.store.markDead(a, boom), false);
        expect((await f.store.get(takenKey))?.status).toBe(JobStatus.InProgress);

        const doneKey = fresh('dead-done');
        const done = await claim(request(doneKey, 'worker-a', t0));
        await f.store.complete(done, 'ok');
        await leaseLost(f.store.markDead(done, boom), true);
        expect((await f.store.get(doneKey))?.status).toBe(JobStatus.Completed);
      });
    });

    describe('Method: resetForRedrive', () => {
      it('makes a DEAD job runnable again: RETRY_WAIT, attempts 0, checkpoint kept', async () => {
        // Prepare
        const key = fresh('reset');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        const cp = step('one', ['one'], t0 + 1);
        await f.store.checkpoint(a, cp);
        await f.store.markDead(a, boom);

        // Act
        const reset = await f.store.resetForRedrive(key, Date.now());

        // Assess
        expect(reset).toBe(true);
        expect(await f.store.get(key)).toMatchObject({
          status: JobStatus.RetryWait,
          leaseUntil: 0,
          attempts: 0,
          version: 4,
          checkpoint: cp,
        });
        const again = await f.store.claim(request(key, 'worker-b', t0 + 2));
        expect(again.claimed).toBe(true);
        if (again.claimed) {
          expect(again.kind).toBe('retry');
          expect(again.lease).toMatchObject({ attempts: 1, token: a.token + 1, checkpoint: cp });
        }
      });

      it('also resets a waiting job and one whose lease ended, with attempts from 0 and no owner', async () => {
        // Prepare: a job released for a retry, and one whose worker died (lease over) at attempt 1.
        const t0 = Date.now();
        const waiting = fresh('waiting');
        await f.store.release(await claim(request(waiting, 'worker-a', t0)), t0 + 1, boom);
        const orphan = fresh('orphan');
        await claim({ ...request(orphan, 'worker-a', t0 - 60_000), leaseMs: 1000 });

        // Act
        const answers = await Promise.all([waiting, orphan].map((k) => f.store.resetForRedrive(k, t0)));

        // Assess
        expect(answers).toEqual([true, true]);
        for (const key of [waiting, orphan]) {
          const item = await f.store.get(key);
          expect(item).toMatchObject({ status: JobStatus.RetryWait, attempts: 0, leaseUntil: 0 });
          expect(item?.owner).toBeUndefined();
        }
      });

      it('refuses a reset planned at a version the item has moved from (a claim since), and changes nothing', async () => {
        // Prepare: the redrive read the job DEAD at version v; a copy then took it (claimed, released).
        const key = fresh('planned');
        const t0 = Date.now();
        await f.store.markDead(await claim(request(key, 'worker-a', t0)), boom);
        const read = await f.store.get(key);
        await f.store.resetForRedrive(key, t0 + 1);
        await f.store.release(await claim(request(key, 'worker-b', t0 + 2)), t0 + 3, boom);
        const moved = await f.store.get(key);

        // Act
        const reset = await f.store.resetForRedrive(key, t0 + 4, t0 + 4, { by: 'ops' }, read?.version);

        // Assess
        expect(reset).toBe(false);
        expect(await f.store.get(key)).toEqual(moved);
        expect(await f.store.resetForRedrive(key, t0 + 5, t0 + 5, { by: 'ops' }, moved?.version)).toBe(true);
      });

      it('undoes a reset whose send failed: the job is DEAD again as it was, unless it moved since', async () => {
        // Prepare: a DEAD job, reset by a redrive at the version it read.
        const key = fresh('undo');
        const t0 = Date.now();
        await f.store.markDead(await claim(request(key, 'worker-a', t0)), boom);
        const dead = await f.store.get(key);
        if (!dead || !f.store.undoRedrive) throw new Error('no dead item, or no undoRedrive');
        expect(await f.store.resetForRedrive(key, t0 + 1, t0 + 1, { by: 'ops' }, dead.version)).toBe(true);

        // Act
        const undone = await f.store.undoRedrive(dead, dead.version + 1, t0 + 2);

        // Assess: DEAD with its reason, attempts and dead key again; a second undo finds it moved.
        expect(undone).toBe(true);
        const after = await f.store.get(key);
        expect(after).toMatchObject({
          status: JobStatus.Dead,
          attempts: dead.attempts,
          version: dead.version + 2,
        });
        expect([after?.deadReason, after?.deadKeyUntil]).toEqual([dead.deadReason, dead.deadKeyUntil]);
        expect(await f.store.undoRedrive(dead, dead.version + 1, t0 + 3)).toBe(false);
      });

      it('refuses a completed job, one a live lease holds, and a key never seen; changes nothing', async () => {
        // Prepare
        const t0 = Date.now();
        const running = fresh('running');
        await claim(request(running, 'worker-a', t0));
        const done = fresh('done');
        await f.store.complete(await claim(request(done, 'worker-a', t0)), 'ok');
        const before = await Promise.all([running, done].map((k) => f.store.get(k)));

        // Act
        const answers = await Promise.all(
          [running, done, fresh('absent')].map((k) => f.store.resetForRedrive(k, t0)),
        );

        // Assess
        expect(answers).toEqual([false, false, false]);
        expect(await Promise.all([running, done].map((k) => f.store.get(k)))).toEqual(before);
      });
    });

    describe('Method: cancel', () => {
      const by = { by: 'ops@host', reason: 'sent by mistake' };
      const cancel = (key: string, now: number) => {
        if (!f.store.cancel) throw new Error('this store has no cancel');
        return f.store.cancel(key, { ...by, now });
      };
      async function cancelledError(write: Promise<unknown>): Promise<void> {
        const error = await write.then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(JobCancelledError);
        expect((error as LeaseLostError).completedByThisLease).toBe(false);
      }

      it('answers finished (DEAD) for a job whose dead-lettering began (its fence recorded the cause)', async () => {
        // Found by the interleaving model: cancelled between the dead-letter fence and the letter, the
        // job's letter went out after the cancel was acknowledged. Its end is decided at the fence.
        const key = fresh('dying');
        const t0 = Date.now();
        const lease = await claim(request(key, 'w-1', t0));
        await f.store.renew(lease, 30_000, t0 + 10, {
          deadLetter: { reason: 'permanent-error', errorClass: 'PermanentJobError', errorMessage: 'bad' },
        });
        const before = await f.store.get(key);

        const answer = await cancel(key, t0 + 20);

        expect(answer).toEqual({ outcome: 'finished', status: 'DEAD' });
        expect(await f.store.get(key)).toEqual(before);
      });

      it('leaves a tombstone for a key never seen: no claim, fast commit or redrive takes it', async () => {
        // Prepare
        const key = fresh('tomb');
        const t0 = Date.now();

        // Act
        const answer = await cancel(key, t0);

        // Assess: CANCELLED without a type (any job under the key stops), event and index keys set.
        expect(answer).toEqual({ outcome: 'tombstone' });
        const item = await f.store.get(key);
        expect(item).toMatchObject({ status: JobStatus.Cancelled, updatedAt: t0, problemAt: t0 });
        expect(item?.type).toBeUndefined();
        expect(item?.owner).toBeUndefined();
        expect(item?.problemShard).toMatch(/^p\d\d$/);
        expect(item?.history).toEqual([
          { e: 'cancelled', at: t0, by: 'ops@host', reason: 'sent by mistake' },
        ]);
        const claimed = await f.store.claim(request(key, 'worker-a', t0 + 1));
        expect(claimed.claimed).toBe(false);
        const fast = await f.store.claimAndComplete(
          { ...request(key, 'worker-b', t0 + 2), maxAttempts: 3 },
          'ok',
        );
        expect(fast).toMatchObject({
          ok: false,
          reason: 'refused',
          existing: { status: JobStatus.Cancelled },
        });
        expect(await f.store.resetForRedrive(key, t0 + 3)).toBe(false);
        expect(await f.store.get(key)).toEqual(item);
      });

      it('cancels a running job in place: its renewal, checkpoint, commit and release are refused as cancelled', async () => {
        // Prepare
        const key = fresh('running');
        const account = fresh('acct');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));

        // Act
        const answer = await cancel(key, t0 + 1);

        // Assess: owner and token stay (the holder's fence names it), every fenced write is refused.
        expect(answer).toEqual({ outcome: 'cancelled', status: 'IN_PROGRESS', wasRunning: true });
        const item = await f.store.get(key);
        expect(item).toMatchObject({
          status: JobStatus.Cancelled,
          owner: 'worker-a',
          token: a.token,
          attempts: 1,
        });
        await cancelledError(f.store.renew(a, LEASE_MS, t0 + 2));
        await cancelledError(f.store.checkpoint(a, step('one', ['one'], t0 + 3)));
        await cancelledError(f.store.complete(a, 'ok', [f.ledgerPut(account, undefined, 1)]));
        await cancelledError(f.store.complete(a, 'ok'));
        await cancelledError(f.store.release(a, t0 + 5000, boom));
        await cancelledError(f.store.markDead(a, boom));
        expect(await f.ledgerGet(account)).toBeUndefined();
        expect(await f.store.get(key)).toEqual(item);
        // Nobody takes it after the lease would have ended.
        const later = await f.store.claim(request(key, 'worker-b', a.leaseUntil + 1));
        expect(later.claimed).toBe(false);
      });

      it('cancels a job waiting for its retry: the retry is never claimed', async () => {
        // Prepare
        const key = fresh('waiting');
        const t0 = Date.now();
        const a = await claim(request(key, 'worker-a', t0));
        await f.store.release(a, t0 + 100, boom);

        // Act
        const answer = await cancel(key, t0 + 1);

        // Assess
        expect(answer).toEqual({ outcome: 'cancelled', status: 'RETRY_WAIT', wasRunning: false });
        const retry = await f.store.claim(request(key, 'worker-b', t0 + 1000));
        expect(retry.claimed).toBe(false);
        if (!retry.claimed) expect(retry.existing.status).toBe(JobStatus.Cancelled);
        const events = (await f.store.get(key))?.history?.map((e) => e.e);
        expect(events).toEqual(['failed', 'cancelled']);
      });

      it('answers finished for COMPLETED and DEAD, already-cancelled after a cancel, and writes nothing', async () => {
        // Prepare
        const t0 = Date.now();
        const done = fresh('done');
        await f.store.complete(await claim(request(done, 'worker-a', t0)), 'ok');
        const dead = fresh('dead');
        await f.store.markDead(await claim(request(dead, 'worker-a', t0)), boom);
        const twice = fresh('twice');
        await cancel(twice, t0);
        const before = await Promise.all([done, dead, twice].map((k) => f.store.get(k)));

        // Act
        const answers = await Promise.all([done, dead, twice].map((k) => cancel(k, t0 + 1)));

        // Assess
        expect(answers).toEqual([
          { outcome: 'finished', status: 'COMPLETED' },
          { outcome: 'finished', status: 'DEAD' },
          { outcome: 'already-cancelled', status: 'CANCELLED' },
        ]);
        expect(await Promise.all([done, dead, twice].map((k) => f.store.get(k)))).toEqual(before);
      });

      it('cancels a job whose history is full: the oldest event goes, the bound holds', async () => {
        // Prepare: HISTORY_MAX failed attempts.
        const key = fresh('full');
        let t = Date.now();
        for (let i = 0; i < HISTORY_MAX; i++) {
          const lease = await claim(request(key, `worker-${i}`, t));
          await f.store.release(lease, t + 1, boom);
          t += 2;
        }
        expect((await f.store.get(key))?.history).toHaveLength(HISTORY_MAX);

        // Act
        const answer = await cancel(key, t);

        // Assess
        expect(answer).toEqual({ outcome: 'cancelled', status: 'RETRY_WAIT', wasRunning: false });
        const item = await f.store.get(key);
        expect(item?.status).toBe(JobStatus.Cancelled);
        expect(item?.history).toHaveLength(HISTORY_MAX);
        expect(item?.history?.at(-1)).toMatchObject({ e: 'cancelled', at: t });
        expect(item?.historyDropped).toBe(1);
      });
    });

    describe("DynamoDB's limits on a job write", () => {
      /** The write is refused with the limit as its problem, before anything is written. */
      async function refused(write: Promise<unknown>, problem: string): Promise<void> {
        const error: unknown = await write.then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(StoreRefusedError);
        expect((error as StoreRefusedError).problem).toBe(problem);
        expect((error as StoreRefusedError).message.startsWith(`${problem}: `)).toBe(true);
      }

      it('refuses a completion of 101 items (job item + 100 effects), writing nothing; takes 100', async () => {
        // Prepare
        const key = fresh('limit-items');
        const lease = await claim(request(key, 'worker-a', Date.now()));
        const accounts = Array.from({ length: 100 }, (_, i) => fresh(`acct${i}`));
        const puts = accounts.map((a) => f.ledgerPut(a, undefined, 1));

        // Act + Assess: 101 items refused, nothing written; the same job commits 99 effects.
        await refused(f.store.complete(lease, 'x', puts), 'too-many-items');
        expect((await f.store.get(key))?.status).toBe(JobStatus.InProgress);
        expect(await f.ledgerGet(accounts[0] ?? '')).toBeUndefined();
        expect(await f.store.complete(lease, 'x', puts.slice(1))).toEqual({ ok: true });
        expect((await f.ledgerGet(accounts[1] ?? ''))?.balance).toBe(1);
      });

      it('refuses two Puts of one item (no other operation names its key) in every write, writing nothing', async () => {
        // Only Puts on the ledger: nothing tells the pre-check the table's key, so the store's own answer
        // (DynamoDB's ValidationException) must come back as the same refusal.
        const key = fresh('limit-twice');
        const account = fresh('acct');
        const other = fresh('acct');
        const twice = [f.ledgerPut(account, undefined, 1), f.ledgerPut(account, undefined, 2)];
        const now = Date.now();
        const { leaseMs: _unused, ...fast } = request(key, 'worker-a', now);
        await refused(
          f.store.claimAndComplete({ ...fast, maxAttempts: 3 }, 'x', [
            f.ledgerPut(other, undefined, 1),
            ...twice,
          ]),
          'same-item-twice',
        );
        expect(await f.store.get(key)).toBeUndefined();
        const lease = await claim(request(key, 'worker-a', now));
        await refused(f.store.checkpoint(lease, step('s', ['s'], now), twice), 'same-item-twice');
        await refused(f.store.complete(lease, 'x', twice), 'same-item-twice');
        expect((await f.store.get(key))?.status).toBe(JobStatus.InProgress);
        expect(await f.ledgerGet(account)).toBeUndefined();
        expect(await f.ledgerGet(other)).toBeUndefined();
        expect(await f.store.complete(lease, 'x', twice.slice(1))).toEqual({ ok: true });
      });

      it('refuses a result, or a checkpoint, that makes the job item larger than 400 KB', async () => {
        const key = fresh('limit-size');
        const lease = await claim(request(key, 'worker-a', Date.now()));
        const big = 'x'.repeat(401 * 1024);
        await refused(f.store.checkpoint(lease, step('s', ['s'], Date.now(), big)), 'item-too-large');
        // The completion keeps the checkpoint: 300 KB of it and a 150 KB result do not fit.
        const near = step('s', ['s'], Date.now(), 'c'.repeat(300 * 1024));
        expect(await f.store.checkpoint(lease, near)).toEqual({ ok: true });
        await refused(f.store.complete(lease, 'r'.repeat(150 * 1024)), 'item-too-large');
        expect((await f.store.get(key))?.status).toBe(JobStatus.InProgress);
      });

      it('refuses values the store cannot hold (a class instance, NaN), with where they are', async () => {
        const key = fresh('limit-value');
        const lease = await claim(request(key, 'worker-a', Date.now()));
        const at = new Date();
        await refused(f.store.complete(lease, { at }), 'bad-value');
        await refused(f.store.complete(lease, { total: Number.NaN }), 'bad-value');
        await refused(
          f.store.complete(lease, 'x', [
            { ...f.ledgerPut(fresh('acct'), undefined, Number.POSITIVE_INFINITY) },
          ]),
          'bad-value',
        );
        expect((await f.store.get(key))?.status).toBe(JobStatus.InProgress);
      });

      it('releases and dead-marks an item its checkpoint fills to near 400 KB (the error text gives way)', async () => {
        const key = fresh('limit-near');
        const lease = await claim(request(key, 'worker-a', Date.now()));
        expect(
          await f.store.checkpoint(lease, step('s', ['s'], Date.now(), 'c'.repeat(400 * 1024 - 1200))),
        ).toEqual({
          ok: true,
        });
        const long = { message: `E: ${'e'.repeat(5000)}`, errorClass: 'Error' };
        await f.store.release(lease, Date.now(), long);
        const released = await f.store.get(key);
        expect(released?.status).toBe(JobStatus.RetryWait);
        expect((released?.lastError ?? '').length).toBeLessThan(400);
        // Its events may be left out for room; its `problems` index keys never are.
        expect(released?.problemShard).toBeDefined();
        const again = await claim(request(key, 'worker-b', Date.now() + 1));
        await new Promise((resolve) => setTimeout(resolve, 5)); // the dead marking's problemAt is later
        await f.store.markDead(again, long);
        const dead = await f.store.get(key);
        expect(dead?.status).toBe(JobStatus.Dead);
        expect(dead?.checkpoint?.step).toBe('s');
        expect(dead?.problemAt).toBeGreaterThan(released?.problemAt ?? 0);
      });
    });

    describe('History: a trim over events another writer appended', () => {
      it("a holder's release that trims the history keeps the lost-lease event its predecessor appended", async () => {
        // Prepare: 49 events; worker-a's lease ends and worker-b takes over (knowing the 49, a takeover
        // event pending); then worker-a learns it lost the lease and appends its `lease-lost` event (50).
        const key = fresh('trim-over');
        let t = Date.now();
        for (let i = 0; i < HISTORY_MAX - 1; i++) {
          const fill = await claim(request(key, 'worker-fill', t));
          await f.store.release(fill, t, boom);
          t += 1;
        }
        const { lease: a, after } = await claimAt(key, 'worker-a', t);
        const b = await claim(request(key, 'worker-b', after));
        await f.store.recordLeaseLost?.(a, 'renewal refused: worker-b took the job over', after);
        expect((await f.store.get(key))?.history).toHaveLength(HISTORY_MAX);

        // Act: worker-b's release carries two events over the 49 it knows, so it trims the list.
        await f.store.release(b, after + LEASE_MS, boom);

        // Assess: the newest HISTORY_MAX events of all, worker-a's among them; worker-b knows the list.
        const item = await f.store.get(key);
        expect(item?.history).toHaveLength(HISTORY_MAX);
        expect(item?.history?.map((e) => e.e).slice(-3)).toEqual(['lease-lost', 'takeover', 'failed']);
        expect(item?.historyDropped).toBe(2);
        expect(item?.status).toBe(JobStatus.RetryWait);
      });
    });

    describe('Method: claim, only for the item of one message (onlyIfMessageId, E13)', () => {
      it('claims an unfinished item that names the message: RETRY_WAIT, or IN_PROGRESS whose lease ended', async () => {
        // Prepare: one job released for a retry, one whose holder's lease ended.
        const waiting = fresh('only-wait');
        const released = await claim(request(waiting, 'worker-a', Date.now()));
        await f.store.release(released, Date.now() - 1, boom);
        const taken = fresh('only-take');
        const { after } = await claimAt(taken, 'worker-a', Date.now());

        // Act
        const retry = await f.store.claim(
          request(waiting, 'worker-b', Date.now(), { onlyIfMessageId: 'm-worker-a' }),
        );
        const takeover = await f.store.claim(
          request(taken, 'worker-b', after, { onlyIfMessageId: 'm-worker-a' }),
        );

        // Assess: both claimed as the claim without the condition would; the items name the new message.
        expect(retry).toMatchObject({ claimed: true, kind: 'retry' });
        expect(takeover).toMatchObject({ claimed: true, kind: 'takeover' });
        expect(await f.store.get(waiting)).toMatchObject({
          status: JobStatus.InProgress,
          messageId: 'm-worker-b',
        });
        expect(await f.store.get(taken)).toMatchObject({ owner: 'worker-b', attempts: 2 });
      });

      it('refuses an item that names another message, and creates no item', async () => {
        // Prepare
        const key = fresh('only-other');
        const lease = await claim(request(key, 'worker-a', Date.now()));
        await f.store.release(lease, Date.now() - 1, boom);
        const before = await f.store.get(key);
        const absent = fresh('only-absent');

        // Act
        const other = await f.store.claim(
          request(key, 'worker-b', Date.now(), { onlyIfMessageId: 'm-other' }),
        );
        const none = await f.store
          .claim(request(absent, 'worker-b', Date.now(), { onlyIfMessageId: 'm-other' }))
          .then(
            () => 'claimed',
            () => 'refused',
          );

        // Assess: refused with the item as it is (its refusal, as any claim's); no item under the absent key.
        expect(other).toEqual({ claimed: false, existing: before });
        expect(await f.store.get(key)).toEqual(before);
        expect(none).toBe('refused');
        expect(await f.store.get(absent)).toBeUndefined();
      });

      it('never resets a dead key, even past its deadKeyUntil', async () => {
        // Prepare: dead, with a 1 s deadKeyTtl; a claim 5 s later would reset it.
        const key = fresh('only-dead');
        const lease = await claim(request(key, 'worker-a', Date.now()));
        await f.store.markDead(lease, { ...boom, reason: 'permanent-error', deadKeyTtlSeconds: 1 });
        const later = Date.now() + 5000;

        // Act
        const result = await f.store.claim(
          request(key, 'worker-b', later, { onlyIfMessageId: 'm-worker-a' }),
        );

        // Assess
        expect(result).toMatchObject({ claimed: false, existing: { status: JobStatus.Dead } });
        expect((await f.store.get(key))?.status).toBe(JobStatus.Dead);
      });
    });

    describe('Fencing tokens', () => {
      it('keep growing after the item was deleted (as TTL does)', async () => {
        // Prepare: two claims (the second a takeover), completion, then the item disappears.
        const key = fresh('ttl');
        const t0 = Date.now();
        const { lease: first, after } = await claimAt(key, 'worker-a', t0);
        const second = await claim(request(key, 'worker-b', after));
        expect(second.token).toBe(first.token + 1);
        await f.store.complete(second, 'ok');
        await f.deleteItem(key);
        expect(await f.store.get(key)).toBeUndefined();

        // Act
        const result = await f.store.claim(request(key, 'worker-c', after + 1));

        // Assess: a fresh claim whose token is above every earlier one.
        expect(result.claimed).toBe(true);
        if (!result.claimed) return;
        expect(result.kind).toBe('fresh');
        expect(result.lease.token).toBeGreaterThan(second.token);
        expect(result.lease.attempts).toBe(1);
        await leaseLost(f.store.complete(second, 'ok'), false);
      });
    });
  });
}
