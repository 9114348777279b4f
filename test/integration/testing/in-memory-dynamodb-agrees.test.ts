import {
  DeleteCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineTable } from '../../../shared/core/model/table.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../shared/testing/index.ts';
import { type CoreEnv, coreEnv } from '../../support/core-fixture.ts';

// The same requests on the emulator's DynamoDB and on the in-memory one: the answers and the refusals
// (their class, the item they carry and in which form, a cancelled transaction's reasons) agree.

let env: CoreEnv;
let memory: InMemoryDynamoDb;

beforeAll(async () => {
  env = await coreEnv('memdbagrees');
  memory = new InMemoryDynamoDb({
    tables: leaseqTables({
      jobs: env.jobsTable,
      leases: env.leasesTable,
      app: { [env.ledgerTable]: defineTable('ledger', { partitionKey: 'account' }) },
    }),
  });
}, 120_000);
afterAll(() => env?.close());

/** What a request answered or how it was refused, without the parts no two services share. */
async function outcome(doc: DynamoDBDocumentClient, send: (doc: DynamoDBDocumentClient) => Promise<unknown>) {
  try {
    const answer = (await send(doc)) as Record<string, unknown>;
    const { $metadata, ConsumedCapacity: _c, ...rest } = answer;
    return { ok: rest, status: ($metadata as { httpStatusCode?: number }).httpStatusCode };
  } catch (error) {
    const e = error as Error & Record<string, unknown>;
    return {
      refused: e.name,
      status: (e.$metadata as { httpStatusCode?: number } | undefined)?.httpStatusCode,
      ...(e.Item ? { Item: e.Item } : {}),
      ...(e.CancellationReasons ? { CancellationReasons: e.CancellationReasons } : {}),
    };
  }
}

async function both(send: (doc: DynamoDBDocumentClient, table: string) => Promise<unknown>) {
  const real = await outcome(env.clients.doc, (doc) => send(doc, env.ledgerTable));
  const mem = await outcome(memory, (doc) => send(doc, env.ledgerTable));
  return { real, mem };
}

describe('InMemoryDynamoDb agrees with the emulator', () => {
  const account = `acc-${Date.now()}`;
  const item = {
    account,
    balance: 5,
    tags: new Set(['x', 'y']),
    raw: new Uint8Array([1, 2]),
    nested: { a: [1, 'b'] },
  };

  it('answers puts, gets and updates with native values', async () => {
    const put = await both((doc, t) => doc.send(new PutCommand({ TableName: t, Item: item })));
    expect(put.mem).toEqual(put.real);
    const get = await both((doc, t) =>
      doc.send(new GetCommand({ TableName: t, Key: { account }, ConsistentRead: true })),
    );
    expect(get.mem).toEqual(get.real);
    expect(get.mem).toMatchObject({ ok: { Item: { balance: 5, tags: new Set(['x', 'y']) } } });
    for (const ReturnValues of ['ALL_NEW', 'UPDATED_OLD', 'UPDATED_NEW', 'ALL_OLD'] as const) {
      const update = await both((doc, t) =>
        doc.send(
          new UpdateCommand({
            TableName: t,
            Key: { account },
            UpdateExpression: 'SET balance = balance + :one REMOVE nested',
            ExpressionAttributeValues: { ':one': 1 },
            ReturnValues,
          }),
        ),
      );
      expect(update.mem, ReturnValues).toEqual(update.real);
      await both((doc, t) => doc.send(new PutCommand({ TableName: t, Item: item })));
    }
  });

  it('refuses a condition with the old item in the typed attribute form', async () => {
    const refused = await both((doc, t) =>
      doc.send(
        new PutCommand({
          TableName: t,
          Item: { account, balance: 0 },
          ConditionExpression: 'attribute_not_exists(account)',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    expect(refused.real).toMatchObject({
      refused: 'ConditionalCheckFailedException',
      Item: { balance: { N: '5' } },
    });
    expect(refused.mem).toEqual(refused.real);
  });

  it('cancels a transaction with one reason per action, the refused item typed', async () => {
    const other = `${account}-other`;
    const cancelled = await both((doc, t) =>
      doc.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: t, Item: { account: other, balance: 1 } } },
            {
              ConditionCheck: {
                TableName: t,
                Key: { account },
                ConditionExpression: 'balance > :n',
                ExpressionAttributeValues: { ':n': 100 },
                ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
              },
            },
          ],
        }),
      ),
    );
    expect(cancelled.real).toMatchObject({ refused: 'TransactionCanceledException' });
    expect(cancelled.mem).toEqual(cancelled.real);
    const none = await both((doc, t) =>
      doc.send(new GetCommand({ TableName: t, Key: { account: other }, ConsistentRead: true })),
    );
    expect(none.mem).toEqual(none.real);
  });

  it('refuses the same item twice in a transaction, and an update of a key attribute', async () => {
    const twice = await both((doc, t) =>
      doc.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: t, Item: { account, balance: 1 } } },
            { Delete: { TableName: t, Key: { account } } },
          ],
        }),
      ),
    );
    expect(twice.mem).toEqual(twice.real);
    const key = await both((doc, t) =>
      doc.send(
        new UpdateCommand({
          TableName: t,
          Key: { account },
          UpdateExpression: 'SET account = :a',
          ExpressionAttributeValues: { ':a': 'other' },
        }),
      ),
    );
    expect(key.mem).toEqual(key.real);
    await both((doc, t) => doc.send(new DeleteCommand({ TableName: t, Key: { account } })));
  });
});
