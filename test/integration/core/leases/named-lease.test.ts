import { DeleteCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoDbLeaseStore } from '../../../../shared/core/adapters/dynamodb-lease-store.ts';
import { withLease } from '../../../../shared/core/leases/named-lease.ts';
import { LeaseBusyError, LeaseLostError } from '../../../../shared/errors.ts';
import { type CoreEnv, coreEnv, leaseStore, sleep } from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

let env: CoreEnv;
let store: DynamoDbLeaseStore;

beforeAll(async () => {
  env = await coreEnv('lease');
  store = leaseStore(env);
});
afterAll(() => env?.close());

describe('Function: withLease', () => {
  it('never lets 10 concurrent contenders overlap, and hands out strictly increasing tokens', async () => {
    // Prepare
    const key = `account#${uniqueName('x')}`;
    let inside = 0;
    let maxInside = 0;
    const tokens: number[] = [];

    // Act
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        withLease(
          key,
          async ({ token }) => {
            inside += 1;
            maxInside = Math.max(maxInside, inside);
            tokens.push(token);
            await sleep(40);
            inside -= 1;
          },
          { store, owner: `contender-${i}`, leaseMs: 3000, waitMs: 30_000, pollMs: 20 },
        ),
      ),
    );

    // Assess
    expect(maxInside).toBe(1);
    expect(tokens).toHaveLength(10);
    for (let i = 1; i < tokens.length; i++)
      expect(tokens[i]).toBeGreaterThan(tokens[i - 1] ?? Number.POSITIVE_INFINITY);
    const item = await store.get(key);
    expect(item?.owner).toBeUndefined();
    expect(item?.token).toBe(tokens.at(-1));
  });

  it('keeps tokens increasing after the lease item is deleted (as TTL would)', async () => {
    const key = `account#${uniqueName('y')}`;
    const first = await withLease(key, async ({ token }) => token, { store, owner: 'a' });
    await env.clients.doc.send(new DeleteCommand({ TableName: env.leasesTable, Key: { leaseKey: key } }));
    const second = await withLease(key, async ({ token }) => token, { store, owner: 'b' });
    expect(second).toBeGreaterThan(first);
  });

  it('renews a long holder past its lease length, and others wait then give up with LeaseBusyError', async () => {
    const key = `account#${uniqueName('z')}`;
    const holder = withLease(
      key,
      async ({ signal }) => {
        await sleep(1500);
        return signal.aborted;
      },
      { store, owner: 'holder', leaseMs: 600 },
    );
    await sleep(100);
    await expect(
      withLease(key, async () => 'never', { store, owner: 'waiter', waitMs: 1000 }),
    ).rejects.toBeInstanceOf(LeaseBusyError);
    expect(await holder).toBe(false);
  });

  it('throws LeaseLostError instead of a result when the lease was lost while the work ran', async () => {
    const key = `account#${uniqueName('lost')}`;
    const work = withLease(
      key,
      async ({ signal }) => {
        // An operator (or TTL) removes the lease item under the holder: its next renewal is refused.
        await env.clients.doc.send(new DeleteCommand({ TableName: env.leasesTable, Key: { leaseKey: key } }));
        await sleep(900);
        return signal.aborted;
      },
      { store, owner: 'holder', leaseMs: 600 },
    );
    await expect(work).rejects.toBeInstanceOf(LeaseLostError);
  });

  it('takes over from a holder that died (its lease simply expires)', async () => {
    const key = `account#${uniqueName('dead')}`;
    const dead = await store.tryAcquire(key, 'crashed', 300, Date.now());
    expect(dead.acquired).toBe(true);
    const token = await withLease(key, async (h) => h.token, { store, owner: 'next', waitMs: 5000 });
    expect(dead.acquired && token).toBeGreaterThan(dead.acquired ? dead.lease.token : 0);
  });
});
