import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import type { JobLease } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRenewer } from '../../../../shared/core/leases/renewer.ts';
import { boundedSignal } from '../../../../shared/core/leases/timeout-signal.ts';
import { JobLog } from '../../../../shared/core/observe/job-log.ts';
import { LeaseLostError, StoreUnavailableError } from '../../../../shared/errors.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { type DynamoDbJobStore, JOBS_TABLE, memoryStores } from '../../../support/memory-stores.ts';

// JobRenewer on the in-memory job store and queue under fake timers (protocol edge E4): the fenced
// DynamoDB renewal is the lease, the message visibility follows it in the background. Every test reads
// the item's `leaseUntil` from the store and the message's `visibleAt` from the queue afterwards.

const LEASE_MS = 3000;
const CAUSE = {
  reason: 'permanent-error',
  errorClass: 'PermanentJobError',
  errorMessage: 'PermanentJobError: no',
};
const KEY = 'job-1';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

/** One job received as M (visibility 30 s unless told) and claimed by `w-a` with a 3 s lease. */
async function setup(options: { deadline?: number; visibilitySeconds?: number; claimLeaseMs?: number } = {}) {
  const { doc, store } = memoryStores();
  const queue = new InMemoryQueue({ visibilitySeconds: options.visibilitySeconds ?? 30 });
  const logger = new Logger({ logLevel: 'SILENT' });
  const warn = vi.spyOn(logger, 'warn');
  const body = JSON.stringify(makeEnvelope({ id: 'e-1', type: 'test.work', dedupKey: KEY, payload: {} }));
  queue.send(body);
  const [record] = queue.receive(1);
  if (!record) throw new Error('no record');
  const lease = await claim(store, record, 'w-a', options.claimLeaseMs ?? LEASE_MS);
  const renewer = new JobRenewer({
    store,
    queue,
    lease,
    receiptHandle: record.receiptHandle,
    leaseMs: LEASE_MS,
    ...(options.deadline === undefined ? {} : { deadline: options.deadline }),
    log: new JobLog(logger, { dedupKey: KEY }),
    now: () => Date.now(),
  });
  /** When M shows again (epoch ms), as the queue holds it. */
  const visibleAt = () => queue.messages().find((m) => m.messageId === record.messageId)?.visibleAt;
  /** The item's lease end, as the store holds it. */
  const storedLeaseUntil = async () => (await store.get(KEY))?.leaseUntil;
  return { doc, store, queue, record, lease, renewer, warn, visibleAt, storedLeaseUntil };
}

async function claim(
  store: DynamoDbJobStore,
  record: SQSRecord,
  owner: string,
  leaseMs = LEASE_MS,
): Promise<JobLease> {
  const result = await store.claim({
    dedupKey: KEY,
    owner,
    messageId: record.messageId,
    type: 'test.work',
    createdAt: new Date().toISOString(),
    leaseMs,
    now: Date.now(),
  });
  if (!result.claimed) throw new Error(`expected ${owner} to claim`);
  return result.lease;
}

/** Lets the visibility change the renewal started in the background land (it takes microtasks only). */
const settle = () => vi.advanceTimersByTimeAsync(0);

describe('Class: JobRenewer', () => {
  describe('Method: renew', () => {
    it('moves the lease in the store and the message visibility together, by one lease', async () => {
      // Prepare
      const { store, lease, renewer, visibleAt, storedLeaseUntil } = await setup();
      const versionBefore = (await store.get(KEY))?.version;
      await vi.advanceTimersByTimeAsync(1000);
      const at = Date.now();

      // Act
      const until = await renewer.renew();
      await settle();

      // Assess: the item holds the new end, the lease object and the answer say the same, and the message
      // stays hidden one lease plus a second (ceil(3000 / 1000) + 1 s), so it never shows while the lease runs.
      expect(until).toBe(at + LEASE_MS);
      expect(await storedLeaseUntil()).toBe(at + LEASE_MS);
      expect(lease.leaseUntil).toBe(at + LEASE_MS);
      expect(visibleAt()).toBe(at + 4000);
      expect(visibleAt()).toBeGreaterThan(at + LEASE_MS);
      // A renewal is not a content change.
      expect((await store.get(KEY))?.version).toBe(versionBefore);
    });

    it('keeps the message hidden beat after beat, as long as renewals go through', async () => {
      // Prepare: a message received with a short visibility (2 s), shorter than the job.
      const { queue, renewer, visibleAt, storedLeaseUntil } = await setup({ visibilitySeconds: 2 });

      // Act: a beat every second for 10 s.
      for (let beat = 0; beat < 10; beat++) {
        await vi.advanceTimersByTimeAsync(1000);
        await renewer.renew();
        await settle();
      }

      // Assess: the message was never received again, and it is hidden past the lease.
      expect(queue.receive(10)).toEqual([]);
      expect(await storedLeaseUntil()).toBe(Date.now() + LEASE_MS);
      expect(visibleAt()).toBe(Date.now() + 4000);
    });

    it('reports a refused renewal (the token changed: another worker took the job) as LeaseLostError, and moves neither the lease nor the visibility', async () => {
      // Prepare: the lease lapses and another worker takes the job over (token + 1).
      const { store, record, lease, renewer, visibleAt } = await setup();
      await vi.advanceTimersByTimeAsync(LEASE_MS + 1);
      const taker = await claim(store, record, 'w-b');
      const visibleBefore = visibleAt();
      const leaseBefore = lease.leaseUntil;

      // Act
      const renewal = renewer.renew();

      // Assess: lost; the item is the new owner's, untouched by us; our lease and M are as they were.
      await expect(renewal).rejects.toBeInstanceOf(LeaseLostError);
      await settle();
      const item = await store.get(KEY);
      expect(item).toMatchObject({ owner: 'w-b', token: taker.token, leaseUntil: taker.leaseUntil });
      expect(taker.token).toBe(lease.token + 1);
      expect(lease.leaseUntil).toBe(leaseBefore);
      expect(visibleAt()).toBe(visibleBefore);
    });

    it('reports the lease lost when the job item is gone, or no longer in progress', async () => {
      // Prepare
      const gone = await setup();
      gone.doc.remove(JOBS_TABLE, { dedupKey: KEY });
      const released = await setup();
      await released.store.release(released.lease, Date.now() + 5000, { message: 'x', errorClass: 'Error' });
      const releasedVisibleAt = released.visibleAt();

      // Act
      const renewals = [gone.renewer.renew(), released.renewer.renew()];

      // Assess
      await expect(renewals[0]).rejects.toBeInstanceOf(LeaseLostError);
      await expect(renewals[1]).rejects.toBeInstanceOf(LeaseLostError);
      await settle();
      expect(await gone.store.get(KEY)).toBeUndefined();
      expect(await released.store.get(KEY)).toMatchObject({
        status: JobStatus.RetryWait,
        leaseUntil: Date.now() + 5000,
      });
      expect(released.visibleAt()).toBe(releasedVisibleAt);
    });

    it('does not abort on a stale receipt (M was received again): the renewal holds, and the warning is logged once', async () => {
      // Prepare: M's visibility lapses and it is received again, so our receipt is no longer its latest.
      const { queue, record, renewer, warn, visibleAt, storedLeaseUntil } = await setup({
        visibilitySeconds: 1,
      });
      await vi.advanceTimersByTimeAsync(1500);
      const [again] = queue.receive(1, { visibilitySeconds: 20 });
      expect(again?.messageId).toBe(record.messageId);
      const visibleAfterReceive = visibleAt();

      // Act: two beats.
      const first = await renewer.renew();
      await settle();
      await vi.advanceTimersByTimeAsync(1000);
      const second = await renewer.renew();
      await settle();

      // Assess: both renewals resolved with the lease the store holds; the visibility is the second
      // receive's (our stale receipt moved nothing); one warning that says the receipt is stale.
      expect(second).toBeGreaterThan(first);
      expect(await storedLeaseUntil()).toBe(second);
      expect(second).toBe(Date.now() + LEASE_MS);
      expect(visibleAt()).toBe(visibleAfterReceive);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0]?.[1]).toMatchObject({ receiptStale: true, dedupKey: KEY });
    });

    it('does not abort on an SQS failure either: the renewal holds, and the next beat moves the visibility again', async () => {
      // Prepare
      const { queue, renewer, warn, visibleAt, storedLeaseUntil } = await setup();
      queue.faults.failNext('change-visibility');
      await vi.advanceTimersByTimeAsync(1000);
      const visibleBefore = visibleAt();

      // Act 1: the visibility change fails.
      const first = await renewer.renew();
      await settle();

      // Assess 1: the lease moved, the visibility did not; a warning, not a stale receipt.
      expect(await storedLeaseUntil()).toBe(first);
      expect(first).toBe(Date.now() + LEASE_MS);
      expect(visibleAt()).toBe(visibleBefore);
      expect(queue.faults.injected.get('change-visibility')).toBe(1);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0]?.[1]).toMatchObject({ receiptStale: false });

      // Act 2
      await vi.advanceTimersByTimeAsync(1000);
      const second = await renewer.renew();
      await settle();

      // Assess 2
      expect(await storedLeaseUntil()).toBe(second);
      expect(visibleAt()).toBe(Date.now() + 4000);
    });

    it('resolves as soon as the store renewed, without waiting for a slow visibility change', async () => {
      // Prepare: the ChangeMessageVisibility request takes 10 s to land.
      const { queue, renewer, visibleAt, storedLeaseUntil } = await setup();
      queue.faults.delayNext('change-visibility', 10_000, { when: 'before' });
      const visibleBefore = visibleAt();
      const at = Date.now();

      // Act
      let resolvedAt: number | undefined;
      const renewal = renewer.renew().then((until) => {
        resolvedAt = Date.now();
        return until;
      });
      await settle();

      // Assess: the renewal answered at once, with the lease in the store; M's visibility follows later.
      expect(resolvedAt).toBe(at);
      expect(await renewal).toBe(at + LEASE_MS);
      expect(await storedLeaseUntil()).toBe(at + LEASE_MS);
      expect(visibleAt()).toBe(visibleBefore);
      await vi.advanceTimersByTimeAsync(10_000);
      expect(visibleAt()).toBe(at + 10_000 + 4000);
    });

    it('moves no visibility when the store renewal fails, and rejects with the store error', async () => {
      // Prepare
      const { lease, renewer, visibleAt, storedLeaseUntil, doc } = await setup();
      doc.faults.failNext('renew');
      await vi.advanceTimersByTimeAsync(1000);
      const visibleBefore = visibleAt();
      const leaseBefore = lease.leaseUntil;

      // Act
      const renewal = renewer.renew();

      // Assess: an outage, not a lost lease; nothing moved.
      await expect(renewal).rejects.toBeInstanceOf(StoreUnavailableError);
      await settle();
      expect(await storedLeaseUntil()).toBe(leaseBefore);
      expect(lease.leaseUntil).toBe(leaseBefore);
      expect(visibleAt()).toBe(visibleBefore);
    });

    it('gives up on a renewal its signal abandons, and then moves no visibility', async () => {
      // Prepare: the renewal request hangs for 20 s; the caller allows 1 s.
      const { lease, renewer, visibleAt, storedLeaseUntil, doc } = await setup();
      doc.faults.delayNext('renew', 20_000, { when: 'before' });
      const visibleBefore = visibleAt();
      const leaseBefore = lease.leaseUntil;
      const bound = boundedSignal(1000, 'test budget');

      // Act
      let outcome: unknown;
      renewer.renew(bound.signal).then(
        (until) => {
          outcome = until;
        },
        (error: unknown) => {
          outcome = error;
        },
      );
      await vi.advanceTimersByTimeAsync(1000);

      // Assess: abandoned on time; no visibility change followed, and the lease object did not move.
      expect(outcome).toBeInstanceOf(StoreUnavailableError);
      expect(lease.leaseUntil).toBe(leaseBefore);
      expect(await storedLeaseUntil()).toBe(leaseBefore);
      expect(visibleAt()).toBe(visibleBefore);
      bound.clear();
    });

    it('resolves with the lease the store holds when it already ends later (a renewal never moves it back)', async () => {
      // Prepare: the claim granted 10 s, longer than one renewal (3 s) grants.
      const { lease, renewer, storedLeaseUntil } = await setup({ claimLeaseMs: 10_000 });
      const claimedUntil = lease.leaseUntil;
      await vi.advanceTimersByTimeAsync(1000);

      // Act
      const until = await renewer.renew();
      await settle();

      // Assess
      expect(until).toBe(claimedUntil);
      expect(await storedLeaseUntil()).toBe(claimedUntil);
      expect(lease.leaseUntil).toBe(claimedUntil);
    });

    it('caps the lease (and the visibility that follows it) to the deadline', async () => {
      // Prepare: 1.5 s left before the invocation's deadline (the claim was capped to it as well).
      const deadline = Date.now() + 1500;
      const { renewer, visibleAt, storedLeaseUntil } = await setup({ deadline, claimLeaseMs: 1000 });
      await vi.advanceTimersByTimeAsync(300);
      const at = Date.now();

      // Act
      const until = await renewer.renew();
      await settle();

      // Assess: the lease ends at the deadline, not a full lease later; M is hidden ceil(1.2) + 1 s.
      expect(until).toBe(deadline);
      expect(await storedLeaseUntil()).toBe(deadline);
      expect(visibleAt()).toBe(at + 3000);
    });

    it('renews nothing at the deadline: the store and the visibility are left as they are', async () => {
      // Prepare
      const deadline = Date.now() + 1200;
      const { lease, renewer, visibleAt, storedLeaseUntil, doc } = await setup({ deadline });
      await vi.advanceTimersByTimeAsync(1200);
      const leaseBefore = lease.leaseUntil;
      const visibleBefore = visibleAt();
      // A renewal reaching the store now would fail loudly.
      doc.faults.failNext('renew', new Error('the store must not be called at the deadline'));

      // Act
      const until = await renewer.renew();
      await settle();

      // Assess
      expect(until).toBe(leaseBefore);
      expect(await storedLeaseUntil()).toBe(leaseBefore);
      expect(visibleAt()).toBe(visibleBefore);
      expect(doc.faults.pending).toBe(1);
    });

    // The dead-letter fence: capped to the deadline like every lease (docs/protocol.md, "Timing rules"),
    // yet always written, since the write is its proof of ownership and records the cause.
    it('fence: past the deadline it still writes, with the cause and a lease ending now; the visibility is left alone', async () => {
      // Prepare: the deadline has passed.
      const deadline = Date.now() + 500;
      const { renewer, store, visibleAt, storedLeaseUntil } = await setup({ deadline });
      await vi.advanceTimersByTimeAsync(1000);
      const at = Date.now();
      const visibleBefore = visibleAt();

      // Act
      const until = await renewer.fence(CAUSE, 2000);
      await settle();

      // Assess
      expect(until).toBe(at);
      expect(await storedLeaseUntil()).toBe(at);
      expect(await store.get(KEY)).toMatchObject({
        deadReason: 'permanent-error',
        lastError: 'PermanentJobError: no',
        lastErrorClass: 'PermanentJobError',
      });
      expect(visibleAt()).toBe(visibleBefore);
    });

    it('fence: grants its lease when the deadline allows, capped to it otherwise, and the visibility follows', async () => {
      // Prepare
      const { renewer, visibleAt, storedLeaseUntil } = await setup({ deadline: Date.now() + 1500 });
      const at = Date.now();

      // Act
      const until = await renewer.fence(CAUSE, LEASE_MS);
      await settle();

      // Assess
      expect(until).toBe(at + 1500);
      expect(await storedLeaseUntil()).toBe(at + 1500);
      expect(visibleAt()).toBe(at + 3000);
    });
  });
});
