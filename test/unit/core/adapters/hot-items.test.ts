import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DynamoDbLeaseStore } from '../../../../shared/core/adapters/dynamodb-lease-store.ts';
import { StoreUnavailableError } from '../../../../shared/errors.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../../shared/testing/index.ts';

// The leases table's hot spots under DynamoDB's per-partition limit (1,000 WRU a second per key): a
// named lease is one item (a mutual exclusion cannot be split), while a concurrency limit's slots are
// one item each (`slot:<scope>#<i>`), so a wide limit spreads over as many partitions as it has slots.

const LEASES = 'app-leases';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(Date.UTC(2026, 0, 1));
});
afterEach(() => {
  vi.useRealTimers();
});

/** `workers` each try one acquire-and-release of a key from `keyOf` every ms for `ms`. */
async function cycles(keyOf: (worker: number) => string, workers: number, ms: number) {
  const doc = new InMemoryDynamoDb({ tables: leaseqTables({ leases: LEASES }), partitionLimits: true });
  const store = new DynamoDbLeaseStore({ client: doc, tableName: LEASES });
  let held = 0;
  let throttled = 0;
  for (let t = 0; t < ms; t++) {
    const now = Date.now();
    await Promise.all(
      Array.from({ length: workers }, async (_, w) => {
        try {
          // A 5 ms lease: one whose release was throttled expires soon, as a real one does after its lease.
          const got = await store.tryAcquire(keyOf(w), `w${w}`, 5, now);
          if (!got.acquired) return;
          held += 1;
          await store.release(got.lease);
        } catch (error) {
          if (!(error instanceof StoreUnavailableError) || error.throttle === undefined) throw error;
          throttled += 1;
        }
      }),
    );
    vi.setSystemTime(now + 1);
  }
  return { perSecond: held / (ms / 1000), throttled, partitions: doc.partitions?.throttles() ?? [] };
}

describe('leases under the per-partition limit', () => {
  it('a hot named lease: one item, its wall below 500 acquire-and-release cycles a second (2 WRU each)', async () => {
    const alone = await cycles(() => 'acct#1', 1, 2000);
    // One worker, a cycle a ms: 1,000 asked at 2 WRU each of a partition serving 1,000 WRU. A throttled
    // release leaves the lease held until it expires, and the refused acquires meanwhile cost a WRU each.
    expect(alone.perSecond).toBeGreaterThan(150);
    expect(alone.perSecond).toBeLessThan(550);
    expect(alone.throttled).toBeGreaterThan(0);
    console.log('named lease, 1 worker', { perSecond: alone.perSecond, throttled: alone.throttled });
    const contended = await cycles(() => 'acct#1', 4, 1000);
    console.log('named lease, 4 workers', { perSecond: contended.perSecond, throttled: contended.throttled });
    expect(contended.perSecond).toBeLessThan(650);
  }, 60_000);

  it('a type-wide concurrency limit of 100 slots: 100 items, 8,000 acquire-and-release cycles a second, no partition throttled', async () => {
    let n = 0;
    const wide = await cycles(() => `slot:api.call:*#${n++ % 100}`, 8, 1000);
    expect(wide.throttled).toBe(0);
    expect(wide.perSecond).toBe(8000);
  }, 60_000);
});
