import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CoreEnv, coreEnv } from '../../../support/core-fixture.ts';
import { describeBurst, reserveAtomic, runBurst } from '../../../support/hot-row-burst.ts';

// Issue 31 item 9: a flash sale on one stock row with the documented versionedPut reservation and
// maxAttempts 4. A version conflict is someone else's write, not the job's failure: no order may use an
// attempt for it, and none may be dead-lettered. LEASEQ_BURST_ORDERS runs a bigger burst (e.g. 400).

const ORDERS = Number(process.env.LEASEQ_BURST_ORDERS ?? 120);

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('hotrow');
});
afterAll(() => env?.close());

describe('A burst of orders on one stock row', () => {
  it(`completes ${ORDERS} versionedPut reservations with one attempt each, conflicts counted apart`, async () => {
    // Act
    const report = await runBurst(env, { orders: ORDERS, workers: 4, maxAttempts: 4, timeoutMs: 300_000 });
    console.log(describeBurst('versionedPut', report));

    // Assess: every order taken exactly once, none dead, no attempt spent on a conflict.
    expect(report.dead).toBe(0);
    expect(report.completed).toBe(ORDERS);
    expect(report.stockLeft).toBe(report.stockStart - ORDERS);
    expect(report.attempts).toEqual({ 1: ORDERS });
    // The burst does conflict (else the test proves nothing), and each give-back is counted.
    expect(report.conflictMetric).toBeGreaterThan(0);
    expect(report.conflictRetries).toBe(report.itemConflicts);
  }, 360_000);

  it(`completes ${ORDERS} atomic (ADD with a condition) reservations without a conflict`, async () => {
    const report = await runBurst(env, {
      orders: ORDERS,
      workers: 4,
      maxAttempts: 4,
      timeoutMs: 300_000,
      job: reserveAtomic,
    });
    console.log(describeBurst('atomic ADD', report));

    expect(report.dead).toBe(0);
    expect(report.completed).toBe(ORDERS);
    expect(report.stockLeft).toBe(report.stockStart - ORDERS);
    expect(report.attempts).toEqual({ 1: ORDERS });
    expect(report.conflictRetries).toBe(0);
  }, 360_000);
});
