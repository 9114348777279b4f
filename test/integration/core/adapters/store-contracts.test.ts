import { DeleteCommand, GetCommand } from '@aws-sdk/lib-dynamodb';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { DynamoDbLeaseStore } from '../../../../shared/core/adapters/dynamodb-lease-store.ts';
import { DynamoDbRateStore } from '../../../../shared/core/adapters/dynamodb-rate-store.ts';
import { versionedPut } from '../../../../shared/core/decisions/optimistic.ts';
import { jobStoreContract } from '../../../support/contracts/job-store-contract.ts';
import { leaseStoreContract } from '../../../support/contracts/lease-store-contract.ts';
import { rateStoreContract } from '../../../support/contracts/rate-store-contract.ts';
import { coreEnv } from '../../../support/core-fixture.ts';

// The same contracts the in-memory fakes pass (test/unit/testing/in-memory-stores.test.ts), here against the
// DynamoDB adapters on the emulator; effects are real versionedPut effects on the ledger table.

jobStoreContract('DynamoDbJobStore', async () => {
  const env = await coreEnv('jobcontract');
  return {
    store: new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable }),
    ledgerPut: (account, seenVersion, balance) =>
      versionedPut({ tableName: env.ledgerTable, key: { account }, seenVersion, item: { balance } }),
    ledgerGet: async (account) => {
      const out = await env.clients.doc.send(
        new GetCommand({ TableName: env.ledgerTable, Key: { account }, ConsistentRead: true }),
      );
      return out.Item as { balance: number; version: number } | undefined;
    },
    deleteItem: async (dedupKey) => {
      await env.clients.doc.send(new DeleteCommand({ TableName: env.jobsTable, Key: { dedupKey } }));
    },
    cleanup: () => env.close(),
  };
});

leaseStoreContract('DynamoDbLeaseStore', async () => {
  const env = await coreEnv('leasecontract');
  return {
    store: new DynamoDbLeaseStore({ client: env.clients.doc, tableName: env.leasesTable }),
    deleteItem: async (leaseKey) => {
      await env.clients.doc.send(new DeleteCommand({ TableName: env.leasesTable, Key: { leaseKey } }));
    },
    cleanup: () => env.close(),
  };
});

rateStoreContract('DynamoDbRateStore', async () => {
  const env = await coreEnv('ratecontract');
  return {
    clients: (n) =>
      Array.from(
        { length: n },
        () => new DynamoDbRateStore({ client: env.clients.doc, tableName: env.leasesTable }),
      ),
    storedGrants: async (leaseKey) => {
      const out = await env.clients.doc.send(
        new GetCommand({ TableName: env.leasesTable, Key: { leaseKey }, ConsistentRead: true }),
      );
      return out.Item === undefined ? undefined : (out.Item.g as number[]);
    },
    cleanup: () => env.close(),
  };
});
