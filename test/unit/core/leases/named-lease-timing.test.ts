import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { withLease } from '../../../../shared/core/leases/named-lease.ts';
import { InMemoryLeaseStore } from '../../../../shared/testing/in-memory-lease-store.ts';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Function: withLease (fake timers)', () => {
  it('a holder whose renewal hangs is told to stop before anyone else can take the lease', async () => {
    const store = new InMemoryLeaseStore();
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
    store.faults.delayNext('lease-renew', 20_000, { when: 'before' });
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
