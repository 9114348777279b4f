import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { DynamoDbLeaseStore } from '../../../shared/core/adapters/dynamodb-lease-store.ts';
import { DynamoDbRateStore } from '../../../shared/core/adapters/dynamodb-rate-store.ts';
import { versionedPut } from '../../../shared/core/decisions/optimistic.ts';
import { defineTable } from '../../../shared/core/model/table.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../shared/testing/index.ts';
import { jobStoreContract } from '../../support/contracts/job-store-contract.ts';
import { leaseStoreContract } from '../../support/contracts/lease-store-contract.ts';
import { rateStoreContract } from '../../support/contracts/rate-store-contract.ts';

// The store contracts the emulator's DynamoDB passes (test/integration/core/adapters/store-contracts.test.ts),
// here with the same real adapters on the in-memory DynamoDB.

const LEDGER = 'app-ledger';

// The job store tells its own retried write by its millisecond timestamp (core/protocol/fence.ts
// isOwnWrite): the contract's second release must not land in the same millisecond as the first.
function memory(): InMemoryDynamoDb {
  return new InMemoryDynamoDb({
    latencyMs: 1,
    tables: leaseqTables({
      jobs: 'app-jobs',
      leases: 'app-leases',
      app: { [LEDGER]: defineTable('ledger', { partitionKey: 'account' }) },
    }),
  });
}

jobStoreContract('DynamoDbJobStore on InMemoryDynamoDb', async () => {
  const doc = memory();
  return {
    store: new DynamoDbJobStore({ client: doc, tableName: 'app-jobs' }),
    ledgerPut: (account, seenVersion, balance) =>
      versionedPut({ tableName: LEDGER, key: { account }, seenVersion, item: { balance } }),
    ledgerGet: async (account) => {
      const out = await doc.send(
        new GetCommand({ TableName: LEDGER, Key: { account }, ConsistentRead: true }),
      );
      return out.Item as { balance: number; version: number } | undefined;
    },
    deleteItem: async (dedupKey) => {
      doc.remove('app-jobs', { dedupKey });
    },
    cleanup: () => {},
  };
});

leaseStoreContract('DynamoDbLeaseStore on InMemoryDynamoDb', async () => {
  const doc = memory();
  return {
    store: new DynamoDbLeaseStore({ client: doc, tableName: 'app-leases' }),
    deleteItem: async (leaseKey) => {
      doc.remove('app-leases', { leaseKey });
    },
    cleanup: () => {},
  };
});

rateStoreContract('DynamoDbRateStore on InMemoryDynamoDb', async () => {
  const doc = memory();
  return {
    clients: (n) =>
      Array.from({ length: n }, () => new DynamoDbRateStore({ client: doc, tableName: 'app-leases' })),
    storedGrants: async (leaseKey) => {
      const out = await doc.send(
        new GetCommand({ TableName: 'app-leases', Key: { leaseKey }, ConsistentRead: true }),
      );
      return out.Item === undefined ? undefined : (out.Item.g as number[]);
    },
    cleanup: () => {},
  };
});

describe('the real adapters on one InMemoryDynamoDb', () => {
  const now = Date.now();
  const claimRequest = (dedupKey: string, owner: string) => ({
    dedupKey,
    owner,
    messageId: `m-${owner}`,
    type: 'unit',
    createdAt: new Date(now).toISOString(),
    leaseMs: 10_000,
    now,
  });

  it('claims, checkpoints with a fenced effect and completes; a second claim is refused with the item', async () => {
    const doc = memory();
    const jobs = new DynamoDbJobStore({ client: doc, tableName: 'app-jobs' });
    const leases = new DynamoDbLeaseStore({ client: doc, tableName: 'app-leases' });
    const claimed = await jobs.claim(claimRequest('job-1', 'worker-a'));
    if (!claimed.claimed) throw new Error('expected a claim');
    const named = await leases.tryAcquire('account#1', 'worker-a', 10_000, now);
    if (!named.acquired) throw new Error('expected the named lease');
    const refusedLease = await leases.tryAcquire('account#1', 'worker-b', 10_000, now);
    expect(refusedLease).toMatchObject({ acquired: false, holder: { owner: 'worker-a' } });
    const effect = versionedPut({
      tableName: LEDGER,
      key: { account: '1' },
      seenVersion: undefined,
      item: { balance: 10 },
    });
    const checkpoint = { step: 'debit', done: ['debit'], at: now };
    const written = await jobs.checkpoint(claimed.lease, checkpoint, [effect, leases.fence(named.lease)]);
    expect(written.ok).toBe(true);
    const ledger = await doc.send(new GetCommand({ TableName: LEDGER, Key: { account: '1' } }));
    expect(ledger.Item).toMatchObject({ balance: 10, version: 1 });
    expect((await jobs.complete(claimed.lease, { paid: 10 })).ok).toBe(true);
    const second = await jobs.claim(claimRequest('job-1', 'worker-b'));
    expect(second).toMatchObject({
      claimed: false,
      existing: { status: 'COMPLETED', owner: 'worker-a', result: { paid: 10 } },
    });
    // claim, complete and the refused claim; the checkpoint's transaction.
    expect(doc.tally()['app-jobs']?.commands).toMatchObject({ UpdateCommand: 3, TransactWriteCommand: 1 });
  });

  it('takes rate permits up to the limit, then says how long to wait', async () => {
    const doc = memory();
    const rates = new DynamoDbRateStore({ client: doc, tableName: 'app-leases' });
    expect(await rates.take('tenant-a', 2, 60, now)).toEqual({ granted: true });
    expect(await rates.take('tenant-a', 2, 60, now + 1)).toEqual({ granted: true });
    expect(await rates.take('tenant-a', 2, 60, now + 2)).toMatchObject({ granted: false });
  });
});
