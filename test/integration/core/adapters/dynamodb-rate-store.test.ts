import { DeleteCommand, GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAwsClients, destroyAwsClients } from '../../../../shared/aws/clients.ts';
import { FaultInjector } from '../../../../shared/aws/fault-injector.ts';
import { DynamoDbRateStore } from '../../../../shared/core/adapters/dynamodb-rate-store.ts';
import { type CoreEnv, coreEnv } from '../../../support/core-fixture.ts';
import { testAwsConfig, uniqueName } from '../../../support/env.ts';

// What only the DynamoDB rate store can meet: a write that landed but whose answer was lost.

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('ratestore');
});
afterAll(async () => {
  await env?.close();
});

async function storedGrants(leaseKey: string): Promise<number[] | undefined> {
  const out = await env.clients.doc.send(
    new GetCommand({ TableName: env.leasesTable, Key: { leaseKey }, ConsistentRead: true }),
  );
  return out.Item?.g as number[] | undefined;
}

describe('DynamoDbRateStore and lost answers (real leases table)', () => {
  it.each([
    ['the first take of a key', 0],
    ['a take against a log it already saw', 1],
  ])(
    'recognises its own permit when the SDK retries a write whose answer was lost: %s',
    async (_, before) => {
      // Prepare: the permit write lands, its answer is lost (a 503 after the write), the SDK sends it again.
      const key = `rate:lost:k:${uniqueName('key')}`;
      const lossy = createAwsClients({ ...testAwsConfig(), region: env.region, maxAttempts: 3 });
      const faults = new FaultInjector().attach(lossy);
      const store = new DynamoDbRateStore({ client: lossy.doc, tableName: env.leasesTable });
      const now = Date.now();
      try {
        for (let i = 0; i < before; i++)
          expect(await store.take(key, before + 1, 60, now)).toEqual({ granted: true });
        faults.fail({ service: 'DynamoDB', command: 'UpdateItem', times: 1, when: 'after' });

        // Act: the last place of the window.
        const take = await store.take(key, before + 1, 60, now + 1);

        // Assess: one permit, taken once, and granted to this take.
        expect(faults.injected.get('DynamoDB.UpdateItem')).toBe(1);
        expect(take).toEqual({ granted: true });
        expect(await storedGrants(key)).toHaveLength(before + 1);
      } finally {
        destroyAwsClients(lossy);
      }
    },
  );

  it('takes one permit, not two, when a lost answer is retried with room left in the window', async () => {
    // Prepare
    const key = `rate:lost:k:${uniqueName('key')}`;
    const lossy = createAwsClients({ ...testAwsConfig(), region: env.region, maxAttempts: 3 });
    const faults = new FaultInjector()
      .attach(lossy)
      .fail({ service: 'DynamoDB', command: 'UpdateItem', times: 1, when: 'after' });
    const store = new DynamoDbRateStore({ client: lossy.doc, tableName: env.leasesTable });
    const now = Date.now();
    try {
      // Act
      const take = await store.take(key, 5, 60, now);

      // Assess
      expect(faults.injected.get('DynamoDB.UpdateItem')).toBe(1);
      expect(take).toEqual({ granted: true });
      expect(await storedGrants(key)).toEqual([now]);
    } finally {
      destroyAwsClients(lossy);
    }
  });

  it('is not fooled by an item TTL deleted and written again up to the version a worker remembers', async () => {
    // Prepare: worker a wrote the key's item (version 1) long ago; TTL removed the idle item; worker b
    // then took the one permit of the window, writing a new item, version 1 again.
    const key = `rate:ttl:k:${uniqueName('key')}`;
    const a = new DynamoDbRateStore({ client: env.clients.doc, tableName: env.leasesTable });
    const b = new DynamoDbRateStore({ client: env.clients.doc, tableName: env.leasesTable });
    const now = Date.now();
    expect(await a.take(key, 1, 60, now - 2 * 3_600_000)).toEqual({ granted: true });
    await env.clients.doc.send(new DeleteCommand({ TableName: env.leasesTable, Key: { leaseKey: key } }));
    expect(await b.take(key, 1, 60, now)).toEqual({ granted: true });

    // Act
    const late = await a.take(key, 1, 60, now + 1);

    // Assess: a's remembered version matches b's new item, but b's permit stands.
    expect(late).toMatchObject({ granted: false });
    expect(await storedGrants(key)).toEqual([now]);
  });
});
