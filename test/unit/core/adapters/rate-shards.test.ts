import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DynamoDbRateStore } from '../../../../shared/core/adapters/dynamodb-rate-store.ts';
import {
  rateKeyOfShard,
  rateShardKey,
  rateShards,
  shardLimit,
} from '../../../../shared/core/decisions/rate-shards.ts';
import { StoreUnavailableError } from '../../../../shared/errors.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../../shared/testing/index.ts';

const LEASES = 'app-leases';
const KEY = 'rate:api.call:k:tenant-1';
const T0 = Date.UTC(2026, 0, 1);

describe('rateShards', () => {
  it('keeps a limit one item serves on one exact log, and splits one it cannot serve', () => {
    expect(rateShards(10, 1)).toBe(1);
    expect(rateShards(100, 1)).toBe(1);
    // 1,000 an hour: 0.3 writes a second of a 10 KB item.
    expect(rateShards(1000, 3600)).toBe(1);
    // 1,000 a second on one item would ask ~10,000 WRU a second of one partition.
    expect(rateShards(1000, 1)).toBe(7);
    expect(rateShards(5000, 1)).toBe(34);
    expect(rateShards(100_000, 1)).toBe(667);
  });

  it('splits the limit exactly', () => {
    for (const [limit, shards] of [
      [5000, 34],
      [7, 3],
      [1000, 7],
    ] as const) {
      let sum = 0;
      for (let i = 0; i < shards; i++) sum += shardLimit(limit, shards, i);
      expect(sum).toBe(limit);
    }
  });

  it('names shard 0 as the item itself and the others apart from any other limit', () => {
    expect(rateShardKey(KEY, 0)).toBe(KEY);
    expect(rateShardKey(KEY, 12)).toBe('rate:#12:api.call:k:tenant-1');
    expect(rateKeyOfShard('rate:#12:api.call:k:tenant-1')).toBe(KEY);
    expect(rateKeyOfShard(KEY)).toBe(KEY);
    // A key value holding what a shard's key holds is still its own limit's.
    expect(rateKeyOfShard('rate:api.call:k:#3:x')).toBe('rate:api.call:k:#3:x');
  });
});

describe('DynamoDbRateStore at 5,000 a second on one key, DynamoDB partitions limited', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(T0);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /**
   * `workers` stores each ask one permit every millisecond for `ms` (8,000 takes a second against a
   * limit of 5,000), on one in-memory DynamoDB whose partitions serve 1,000 WRU a second.
   */
  async function run(options: { shards?: (limit: number, perSeconds: number) => number }) {
    const doc = new InMemoryDynamoDb({
      tables: leaseqTables({ leases: LEASES }),
      partitionLimits: true,
    });
    const workers = Array.from(
      { length: 8 },
      () => new DynamoDbRateStore({ client: doc, tableName: LEASES, ...options }),
    );
    const grants: number[] = [];
    let unavailable = 0;
    for (let t = 0; t < 2000; t++) {
      const now = Date.now();
      await Promise.all(
        workers.map(async (w) => {
          try {
            if ((await w.take(KEY, 5000, 1, now)).granted) grants.push(now);
          } catch (error) {
            if (!(error instanceof StoreUnavailableError)) throw error;
            unavailable += 1;
          }
        }),
      );
      vi.setSystemTime(now + 1);
    }
    grants.sort((a, b) => a - b);
    let busiest = 0;
    for (let i = 0, j = 0; j < grants.length; j++) {
      while ((grants[j] as number) - (grants[i] as number) >= 1000) i++;
      busiest = Math.max(busiest, j - i + 1);
    }
    const writes = doc.tally()[LEASES]?.writeUnits ?? 0;
    return {
      grants: grants.length,
      busiest,
      unavailable,
      throttles: doc.partitions?.throttles() ?? [],
      writes,
    };
  }

  it('holds: never more than 5,000 in any second, near 5,000 a second granted, no partition throttled', async () => {
    const sharded = await run({});
    expect(sharded.busiest).toBeLessThanOrEqual(5000);
    // 2 s: two windows' permits, less the precision lost to full shards.
    expect(sharded.grants).toBeGreaterThanOrEqual(0.9 * 10_000);
    expect(sharded.throttles).toEqual([]);
    expect(sharded.unavailable).toBe(0);
    console.log('sharded', { ...sharded, throttles: sharded.throttles.length });
  }, 60_000);

  it('on one item (as before sharding), the partition throttles it far below the limit', async () => {
    const single = await run({ shards: () => 1 });
    expect(single.busiest).toBeLessThanOrEqual(5000);
    expect(single.throttles.length).toBeGreaterThan(0);
    expect(single.grants).toBeLessThan(0.2 * 10_000);
    console.log('one item', { ...single, throttles: single.throttles });
  }, 60_000);
});
