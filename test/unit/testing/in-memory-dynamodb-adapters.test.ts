import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { DynamoDbLeaseStore } from '../../../shared/core/adapters/dynamodb-lease-store.ts';
import { DynamoDbRateStore } from '../../../shared/core/adapters/dynamodb-rate-store.ts';
import { versionedPut } from '../../../shared/core/decisions/optimistic.ts';
import { defineTable } from '../../../shared/core/model/table.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../shared/testing/in-memory-dynamodb/index.ts';
import { jobStoreContract } from '../../support/contracts/job-store-contract.ts';
import { leaseStoreContract } from '../../support/contracts/lease-store-contract.ts';
import { rateStoreContract } from '../../support/contracts/rate-store-contract.ts';

// The store contracts the emulator's DynamoDB passes (test/integration/core/adapters/store-contracts.test.ts),
// here with the same real adapters on the in-memory DynamoDB.

const LEDGER = 'app-ledger';

// The job store tells its own retried write by its millisecond timestamp (dynamodb-refusals.ts
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
