import { randomUUID } from 'node:crypto';
import {
  DeleteCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { DynamoDbLeaseStore } from '../../../../shared/core/adapters/dynamodb-lease-store.ts';
import { DynamoDbRateStore } from '../../../../shared/core/adapters/dynamodb-rate-store.ts';
import { versionedPut } from '../../../../shared/core/decisions/optimistic.ts';
import { defineTable } from '../../../../shared/core/model/table.ts';
import { leaseqTables } from '../../../../shared/testing/in-memory-dynamodb/tables.ts';
import { jobStoreContract } from '../../../support/contracts/job-store-contract.ts';
import { leaseStoreContract } from '../../../support/contracts/lease-store-contract.ts';
import { rateStoreContract } from '../../../support/contracts/rate-store-contract.ts';
import { type CoreEnv, coreEnv } from '../../../support/core-fixture.ts';
import { DifferentialDynamoDb } from '../../../support/differential-dynamodb.ts';

// The store contracts on the DynamoDB adapters against the emulator (effects are real versionedPut effects
// on the ledger table), and a differential check: every request the adapters and the fixtures send is also
// sent to an InMemoryDynamoDb with the same tables, and each test fails on an answer or refusal (class,
// item, cancellation reasons) the two do not agree on. The same contracts pass on the in-memory DynamoDB
// alone (test/unit/testing/in-memory-dynamodb-adapters.test.ts).

const differentials: DifferentialDynamoDb[] = [];

/** The emulator's document client, each request also asked of an in-memory DynamoDB with env's tables. */
function differential(env: CoreEnv) {
  const d = new DifferentialDynamoDb(
    env.clients.doc,
    leaseqTables({
      jobs: env.jobsTable,
      leases: env.leasesTable,
      app: { [env.ledgerTable]: defineTable('ledger', { partitionKey: 'account' }) },
    }),
  );
  differentials.push(d);
  return d.client;
}

afterEach(() => {
  const disagreements = differentials.flatMap((d) => d.take());
  expect(disagreements, 'InMemoryDynamoDb and the emulator answered differently').toEqual([]);
});

afterAll(() => {
  // Each suite's requests went through the differential.
  for (const d of differentials) expect(d.compared).toBeGreaterThan(0);
});

jobStoreContract('DynamoDbJobStore', async () => {
  const env = await coreEnv('jobcontract');
  const doc = differential(env);
  return {
    store: new DynamoDbJobStore({ client: doc, tableName: env.jobsTable }),
    ledgerPut: (account, seenVersion, balance) =>
      versionedPut({ tableName: env.ledgerTable, key: { account }, seenVersion, item: { balance } }),
    ledgerGet: async (account) => {
      const out = await doc.send(
        new GetCommand({ TableName: env.ledgerTable, Key: { account }, ConsistentRead: true }),
      );
      return out.Item as { balance: number; version: number } | undefined;
    },
    deleteItem: async (dedupKey) => {
      await doc.send(new DeleteCommand({ TableName: env.jobsTable, Key: { dedupKey } }));
    },
    cleanup: () => env.close(),
  };
});

leaseStoreContract('DynamoDbLeaseStore', async () => {
  const env = await coreEnv('leasecontract');
  const doc = differential(env);
  return {
    store: new DynamoDbLeaseStore({ client: doc, tableName: env.leasesTable }),
    deleteItem: async (leaseKey) => {
      await doc.send(new DeleteCommand({ TableName: env.leasesTable, Key: { leaseKey } }));
    },
    cleanup: () => env.close(),
  };
});

rateStoreContract('DynamoDbRateStore', async () => {
  const env = await coreEnv('ratecontract');
  const doc = differential(env);
  return {
    clients: (n) =>
      Array.from({ length: n }, () => new DynamoDbRateStore({ client: doc, tableName: env.leasesTable })),
    storedGrants: async (leaseKey) => {
      const out = await doc.send(
        new GetCommand({ TableName: env.leasesTable, Key: { leaseKey }, ConsistentRead: true }),
      );
      return out.Item === undefined ? undefined : (out.Item.g as number[]);
    },
    cleanup: () => env.close(),
  };
});

// DynamoDB's limits, sent as requests (the adapters refuse most of them before sending: docs/jobs.md,
// "Limits of a write"); each answer is compared by the differential.
describe('Limits and refusals, answered alike by the emulator and InMemoryDynamoDb', () => {
  let env: CoreEnv;
  let doc: DynamoDBDocumentClient;
  beforeAll(async () => {
    env = await coreEnv('limitsdiff');
    doc = differential(env);
  });
  afterAll(() => env?.close());

  const refused = async (send: Promise<unknown>) =>
    send.then(
      () => 'answered',
      (error: Error) => error.name,
    );

  it('refuses an item past 400 KB, put or grown by an update', async () => {
    const account = `big-${randomUUID()}`;
    const t = env.ledgerTable;
    const big = 'x'.repeat(401 * 1024);
    expect(await refused(doc.send(new PutCommand({ TableName: t, Item: { account, big } })))).toBe(
      'ValidationException',
    );
    await doc.send(new PutCommand({ TableName: t, Item: { account, a: 'x'.repeat(300 * 1024) } }));
    const grow = new UpdateCommand({
      TableName: t,
      Key: { account },
      UpdateExpression: 'SET b = :b',
      ExpressionAttributeValues: { ':b': 'y'.repeat(200 * 1024) },
    });
    expect(await refused(doc.send(grow))).toBe('ValidationException');
  });

  it('refuses a transaction of 101 actions, or with one item twice; cancels one whose condition fails, with the item', async () => {
    const t = env.ledgerTable;
    const key = randomUUID();
    const puts = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        Put: { TableName: t, Item: { account: `${key}-${i}`, n: i } },
      }));
    expect(await refused(doc.send(new TransactWriteCommand({ TransactItems: puts(101) })))).toBe(
      'ValidationException',
    );
    const twice = [...puts(1), ...puts(1)];
    expect(await refused(doc.send(new TransactWriteCommand({ TransactItems: twice })))).toBe(
      'ValidationException',
    );
    await doc.send(new TransactWriteCommand({ TransactItems: puts(2) }));
    const stale = new TransactWriteCommand({
      TransactItems: [
        { Put: { TableName: t, Item: { account: `${key}-5`, n: 5 } } },
        {
          Update: {
            TableName: t,
            Key: { account: `${key}-1` },
            UpdateExpression: 'SET n = :n',
            ConditionExpression: 'n = :seen',
            ExpressionAttributeValues: { ':n': 2, ':seen': 0 },
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          },
        },
      ],
    });
    expect(await refused(doc.send(stale))).toBe('TransactionCanceledException');
  });

  it('refuses an expression over 4 KB', async () => {
    const condition = `attribute_not_exists(a${'x'.repeat(4100)})`;
    const put = new PutCommand({
      TableName: env.ledgerTable,
      Item: { account: randomUUID() },
      ConditionExpression: condition,
    });
    expect(await refused(doc.send(put))).toBe('ValidationException');
  });
});
