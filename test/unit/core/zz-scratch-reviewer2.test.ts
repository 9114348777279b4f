import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { withLease } from '../../../shared/core/with-lease.ts';
import { InMemoryLeaseStore } from '../../../shared/testing/in-memory-lease-store.ts';
beforeEach(() => { vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') }); });
afterEach(() => { vi.useRealTimers(); });
it('F2: a slow named-lease renewal is not bounded: holder A keeps running while B holds the same key', async () => {
  const store = new InMemoryLeaseStore();
  const t0 = Date.now();
  const log: string[] = [];
  let aAborted: number | undefined;
  const a = withLease('account#42', async (h) => {
    h.signal.addEventListener('abort', () => { aAborted = Date.now() - t0; });
    await new Promise((r) => setTimeout(r, 10_000));
    log.push(`A done at ${Date.now() - t0}`);
  }, { store, owner: 'A', leaseMs: 3000 }).catch((e) => log.push(`A threw ${e.name}`));
  await vi.advanceTimersByTimeAsync(10);
  store.faults.delayNext('lease-renew', 20_000, { when: 'before' }); // first beat at 1000 stuck 20 s
  await vi.advanceTimersByTimeAsync(3500);
  let bIn: number | undefined;
  const b = withLease('account#42', async () => { bIn = Date.now() - t0; await new Promise((r) => setTimeout(r, 100)); },
    { store, owner: 'B', leaseMs: 3000 });
  await vi.advanceTimersByTimeAsync(200);
  console.log({ bIn, aAborted, log });
  expect(bIn).toBeDefined();        // B entered the critical section at ~3510 ms
  expect(aAborted).toBeUndefined(); // A was not told: its signal is still live
  await vi.advanceTimersByTimeAsync(30_000);
  await a; await b;
  console.log({ aAborted, log });
});
