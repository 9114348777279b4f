import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { holdLease, withLease } from '../../../../shared/core/leases/named-lease.ts';
import { DeadlineError, StoreUnavailableError } from '../../../../shared/errors.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Function: withLease (fake timers)', () => {
  it('a holder whose renewal hangs is told to stop before anyone else can take the lease', async () => {
    const { doc, leases: store } = memoryStores();
    const t0 = Date.now();
    let aAborted: number | undefined;
    const a = withLease(
      'account#42',
      async (held) => {
        held.signal.addEventListener('abort', () => {
          aAborted = Date.now() - t0;
        });
        await new Promise((resolve) => setTimeout(resolve, 10_000));
      },
      { store, owner: 'A', leaseMs: 3000 },
    ).catch(() => undefined);
    await vi.advanceTimersByTimeAsync(10);
    // The first beat's renewal is stuck in the network for 20 s.
    doc.faults.delayNext('lease-renew', 20_000, { when: 'before' });
    await vi.advanceTimersByTimeAsync(3500);
    let bIn: number | undefined;
    const b = withLease(
      'account#42',
      async () => {
        bIn = Date.now() - t0;
      },
      { store, owner: 'B', leaseMs: 3000 },
    );
    await vi.advanceTimersByTimeAsync(30_000);
    await a;
    await b;
    expect(aAborted).toBeDefined();
    expect(bIn).toBeDefined();
    // A was told before the lease ended (3 s less the safety margin); B got in only after it ended.
    expect(aAborted).toBeLessThanOrEqual(3000);
    expect(bIn).toBeGreaterThan(3000);
  });
});

describe('Function: holdLease (fake timers)', () => {
  it('an acquire still in flight when the signal aborts is released as it lands; nothing renews it', async () => {
    const { doc, leases: store } = memoryStores();
    const renew = vi.spyOn(store, 'renew');
    const job = new AbortController();
    // The write lands at once; its answer takes 5 s, and the job is aborted meanwhile.
    doc.faults.delayNext('lease-acquire', 5000, { when: 'after' });
    const held = holdLease('account#42', { store, owner: 'A', leaseMs: 3000, signal: job.signal });
    const outcome = held.then(
      () => 'acquired',
      (error: unknown) => error,
    );
    await vi.advanceTimersByTimeAsync(1000);
    job.abort(new DeadlineError('invocation deadline near'));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await outcome).toBeInstanceOf(DeadlineError);
    expect((await store.get('account#42'))?.owner).toBeUndefined();
    expect(renew).not.toHaveBeenCalled();
  });

  it('stops renewing as soon as the signal aborts, even before release()', async () => {
    const { leases: store } = memoryStores();
    const renew = vi.spyOn(store, 'renew');
    const job = new AbortController();
    const held = await holdLease('account#42', { store, owner: 'A', leaseMs: 3000, signal: job.signal });
    await vi.advanceTimersByTimeAsync(2500);
    const renewedBefore = renew.mock.calls.length;
    expect(renewedBefore).toBeGreaterThan(0);
    job.abort(new DeadlineError('invocation deadline near'));
    await vi.advanceTimersByTimeAsync(30_000);
    expect(renew.mock.calls.length).toBe(renewedBefore);
    await held.release();
    expect((await store.get('account#42'))?.owner).toBeUndefined();
  });

  it('abandons an acquire that hangs past its lease, and releases it when it lands late', async () => {
    const { doc, leases: store } = memoryStores();
    // The request reaches the table only after 60 s (a stuck connection the SDK keeps retrying).
    doc.faults.delayNext('lease-acquire', 60_000, { when: 'before' });
    const outcome = holdLease('account#42', { store, owner: 'A', leaseMs: 3000, waitMs: 0 }).then(
      () => 'acquired',
      (error: unknown) => error,
    );
    await vi.advanceTimersByTimeAsync(3000);
    expect(await outcome).toBeInstanceOf(StoreUnavailableError);
    await vi.advanceTimersByTimeAsync(60_000);
    expect((await store.get('account#42'))?.owner).toBeUndefined();
  });

  it('a late acquire whose release then fails leaves no unhandled rejection; the failure is reported', async () => {
    const { doc, leases: store } = memoryStores();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const reported: unknown[] = [];
      doc.faults.delayNext('lease-acquire', 60_000, { when: 'before' });
      const outcome = holdLease('account#42', {
        store,
        owner: 'A',
        leaseMs: 3000,
        waitMs: 0,
        onReleaseError: (error) => reported.push(error),
      }).then(
        () => 'acquired',
        (error: unknown) => error,
      );
      await vi.advanceTimersByTimeAsync(3000);
      expect(await outcome).toBeInstanceOf(StoreUnavailableError);
      // The abandoned acquire lands after 60 s; the release that gives it back hits an outage.
      doc.faults.failNext('lease-release');
      await vi.advanceTimersByTimeAsync(60_000);
      // Node reports an unhandled rejection once the microtasks have drained: a real turn of the loop.
      vi.useRealTimers();
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
      expect(reported).toHaveLength(1);
      expect(reported[0]).toBeInstanceOf(StoreUnavailableError);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('recognises its own lease when an acquire landed but its answer was lost, and retries', async () => {
    const { doc, leases: store } = memoryStores();
    doc.faults.failNext('lease-acquire', undefined, { when: 'after' });
    const held = holdLease('account#42', { store, owner: 'A', leaseMs: 3000, waitMs: 1000 });
    await vi.advanceTimersByTimeAsync(500);
    const lease = await held;
    const item = await store.get('account#42');
    expect(item).toMatchObject({ owner: 'A', token: lease.token });
    await lease.release();
    expect((await store.get('account#42'))?.owner).toBeUndefined();
  });
});
