import {
  BatchGetCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineTable } from '../../../shared/core/model/table.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../shared/testing/index.ts';
import { type CoreEnv, coreEnv } from '../../support/core-fixture.ts';

// The same requests, of the kinds leaseq sends, on the emulator's DynamoDB and on the in-memory one, for
// the semantics the first differential file (in-memory-dynamodb-agrees.test.ts) does not reach.

let env: CoreEnv;
let memory: InMemoryDynamoDb;

beforeAll(async () => {
  env = await coreEnv('memdbsem');
  memory = new InMemoryDynamoDb({
    tables: leaseqTables({
      jobs: env.jobsTable,
      leases: env.leasesTable,
      app: { [env.ledgerTable]: defineTable('ledger', { partitionKey: 'account' }) },
    }),
  });
}, 120_000);
afterAll(() => env?.close());

async function outcome(doc: DynamoDBDocumentClient, send: (doc: DynamoDBDocumentClient) => Promise<unknown>) {
  try {
    const answer = (await send(doc)) as Record<string, unknown>;
    const { $metadata: _m, ConsumedCapacity: _c, ...rest } = answer;
    return { ok: rest };
  } catch (error) {
    const e = error as Error & Record<string, unknown>;
    return {
      refused: e.name,
      message: e.message,
      ...(e.Item ? { Item: e.Item } : {}),
      ...(e.CancellationReasons ? { CancellationReasons: e.CancellationReasons } : {}),
    };
  }
}

type Send = (doc: DynamoDBDocumentClient, t: { ledger: string; jobs: string }) => Promise<unknown>;

async function both(send: Send) {
  const names = (doc: DynamoDBDocumentClient) => send(doc, { ledger: env.ledgerTable, jobs: env.jobsTable });
  const real = await outcome(env.clients.doc, names);
  const mem = await outcome(memory, names);
  return { real, mem };
}

let n = 0;
const fresh = () => `acc-${Date.now()}-${n++}`;

async function seed(item: Record<string, unknown>) {
  await both((doc, t) => doc.send(new PutCommand({ TableName: t.ledger, Item: item })));
}

async function read(account: string) {
  return both((doc, t) =>
    doc.send(new GetCommand({ TableName: t.ledger, Key: { account }, ConsistentRead: true })),
  );
}

describe('InMemoryDynamoDb answers as the emulator does', () => {
  it.each([['SET of a key attribute to its own value', 'SET account = :a', (a: string) => ({ ':a': a })]])(
    'an update: %s',
    async (_what, UpdateExpression, values) => {
      const account = fresh();
      await seed({ account, balance: 5, nested: { a: [1, 2, 3] } });
      const got = await both((doc, t) =>
        doc.send(
          new UpdateCommand({
            TableName: t.ledger,
            Key: { account },
            UpdateExpression,
            ...(values(account) ? { ExpressionAttributeValues: values(account) } : {}),
            ReturnValues: 'ALL_NEW',
          }),
        ),
      );
      expect(got.mem).toEqual(got.real);
    },
  );

  it.each(['SET nested.a[1] = :v', 'SET nested.a[7] = :v', 'REMOVE nested.a[0]', 'SET balance = :same'])(
    'UPDATED_NEW and UPDATED_OLD of %s',
    async (UpdateExpression) => {
      for (const ReturnValues of ['UPDATED_NEW', 'UPDATED_OLD'] as const) {
        const account = fresh();
        await seed({ account, balance: 5, nested: { a: [1, 2, 3], c: 'x' } });
        const values = {
          ...(UpdateExpression.includes(':v') ? { ':v': 9 } : {}),
          ...(UpdateExpression.includes(':same') ? { ':same': 5 } : {}),
        };
        const got = await both((doc, t) =>
          doc.send(
            new UpdateCommand({
              TableName: t.ledger,
              Key: { account },
              UpdateExpression,
              ...(Object.keys(values).length ? { ExpressionAttributeValues: values } : {}),
              ReturnValues,
            }),
          ),
        );
        expect(got.mem, ReturnValues).toEqual(got.real);
      }
    },
  );

  it('an update of a missing item that only removes', async () => {
    const account = fresh();
    const got = await both((doc, t) =>
      doc.send(
        new UpdateCommand({
          TableName: t.ledger,
          Key: { account },
          UpdateExpression: 'REMOVE balance',
          ReturnValues: 'ALL_NEW',
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
    const after = await read(account);
    expect(after.mem).toEqual(after.real);
  });

  it('a refused condition and a key attribute update together', async () => {
    const account = fresh();
    await seed({ account, balance: 5 });
    const got = await both((doc, t) =>
      doc.send(
        new UpdateCommand({
          TableName: t.ledger,
          Key: { account },
          UpdateExpression: 'SET account = :b',
          ConditionExpression: 'balance > :n',
          ExpressionAttributeValues: { ':b': 'zzz', ':n': 100 },
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
  });

  it('a refused condition and a runtime update error together', async () => {
    const account = fresh();
    await seed({ account, balance: 5 });
    const got = await both((doc, t) =>
      doc.send(
        new UpdateCommand({
          TableName: t.ledger,
          Key: { account },
          UpdateExpression: 'SET summed = absent + :n',
          ConditionExpression: 'balance > :n',
          ExpressionAttributeValues: { ':n': 100 },
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
  });

  it('a transaction with a runtime update error in its second action', async () => {
    const account = fresh();
    await seed({ account, balance: 5, label: 'text' });
    const got = await both((doc, t) =>
      doc.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: t.ledger, Item: { account: `${account}-x`, balance: 1 } } },
            {
              Update: {
                TableName: t.ledger,
                Key: { account },
                UpdateExpression: 'SET summed = absent + :n',
                ExpressionAttributeValues: { ':n': 1 },
              },
            },
          ],
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
  });

  it('a transaction with a wrong operand type (ADD to a string)', async () => {
    const account = fresh();
    await seed({ account, balance: 5, label: 'text' });
    const got = await both((doc, t) =>
      doc.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              ConditionCheck: {
                TableName: t.ledger,
                Key: { account },
                ConditionExpression: 'balance > :big',
                ExpressionAttributeValues: { ':big': 100 },
              },
            },
            {
              Update: {
                TableName: t.ledger,
                Key: { account: `${account}-y` },
                UpdateExpression: 'SET #h = list_append(#h, :l)',
                ExpressionAttributeNames: { '#h': 'history' },
                ExpressionAttributeValues: { ':l': [1] },
              },
            },
          ],
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
  });

  it.each([
    ['<> on a missing attribute', 'nothing <> :n'],
    ['size of a number', 'size(balance) = :n'],
    ['a number against a string', 'label < :n'],
    ['NOT of a cross-type compare', 'NOT label < :n'],
    ['IN with a missing attribute', 'NOT nothing IN (:n)'],
    ['contains on a list of numbers', 'contains(nums, :n)'],
    ['contains on a number set', 'contains(ns, :n)'],
    ['strings order as UTF-8 bytes', 'wide < :emoji'],
    ['map equality', 'nested = :map'],
  ])('a condition: %s', async (_what, ConditionExpression) => {
    const account = fresh();
    await seed({
      account,
      balance: 5,
      label: 'text',
      nums: [5, 6],
      ns: new Set([5, 7]),
      tags: new Set(['ab']),
      wide: '\uFF61',
      nested: { a: 1, b: 'x' },
    });
    const all: Record<string, unknown> = {
      ':n': 5,
      ':s': 'a',
      ':emoji': '\u{1F600}',
      ':map': { b: 'x', a: 1 },
    };
    const values = Object.fromEntries(
      Object.entries(all).filter(([k]) => new RegExp(`${k}(?![A-Za-z0-9_])`).test(ConditionExpression)),
    );
    const got = await both((doc, t) =>
      doc.send(
        new UpdateCommand({
          TableName: t.ledger,
          Key: { account },
          UpdateExpression: 'SET touched = :t',
          ConditionExpression,
          ExpressionAttributeValues: { ...values, ':t': true },
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
  });

  it.each([
    ['an empty set', { s: new Set() }],
    ['NaN', { n: Number.NaN }],
    ['a number too small', { n: 1e-200 }],
    ['a number too large', { n: 1e200 }],
    ['a number of 39 digits', { n: 123456789012345678901234567890123456789n }],
    ['a number past the range', { n: 10n ** 126n }],
    ['an empty string', { s: '' }],
    ['a Date', { d: new Date(0) }],
  ])('a put of %s', async (_what, extra) => {
    const account = fresh();
    const got = await both((doc, t) =>
      doc.send(new PutCommand({ TableName: t.ledger, Item: { account, ...extra } })),
    );
    expect(got.mem).toEqual(got.real);
  });

  it('a batch get of one key twice', async () => {
    const account = fresh();
    await seed({ account, balance: 1 });
    const got = await both((doc, t) =>
      doc.send(new BatchGetCommand({ RequestItems: { [t.ledger]: { Keys: [{ account }, { account }] } } })),
    );
    expect(got.mem).toEqual(got.real);
  });
});

describe('InMemoryDynamoDb pages the problems index as the emulator does', () => {
  it('resumes after a start key whose item left the index', async () => {
    const shard = `shard-${Date.now()}`;
    const query = (ExclusiveStartKey?: Record<string, unknown>) =>
      both((doc, t) =>
        doc.send(
          new QueryCommand({
            TableName: t.jobs,
            IndexName: 'problems',
            KeyConditionExpression: 'problemShard = :s',
            ExpressionAttributeValues: { ':s': shard },
            Limit: 1,
            ...(ExclusiveStartKey ? { ExclusiveStartKey } : {}),
          }),
        ),
      );
    for (const at of [1, 2, 3]) {
      await both((doc, t) =>
        doc.send(
          new PutCommand({
            TableName: t.jobs,
            Item: { dedupKey: `${shard}-${at}`, problemShard: shard, problemAt: at },
          }),
        ),
      );
    }
    // The index is eventually consistent: wait until the emulator's shows all three.
    for (let i = 0; i < 50; i++) {
      const all = await env.clients.doc.send(
        new QueryCommand({
          TableName: env.jobsTable,
          IndexName: 'problems',
          KeyConditionExpression: 'problemShard = :s',
          ExpressionAttributeValues: { ':s': shard },
        }),
      );
      if (all.Count === 3) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const first = await query();
    expect(first.mem).toEqual(first.real);
    const start = (first.real as { ok: { LastEvaluatedKey: Record<string, unknown> } }).ok.LastEvaluatedKey;
    await both((doc, t) =>
      doc.send(
        new UpdateCommand({
          TableName: t.jobs,
          Key: { dedupKey: `${shard}-1` },
          UpdateExpression: 'REMOVE problemShard, problemAt',
        }),
      ),
    );
    for (let i = 0; i < 50; i++) {
      const all = await env.clients.doc.send(
        new QueryCommand({
          TableName: env.jobsTable,
          IndexName: 'problems',
          KeyConditionExpression: 'problemShard = :s',
          ExpressionAttributeValues: { ':s': shard },
        }),
      );
      if (all.Count === 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const next = await query(start);
    expect(next.real).toMatchObject({ ok: { Items: [{ problemAt: 2 }] } });
    expect(next.mem).toEqual(next.real);
  });
});

describe('InMemoryDynamoDb refuses and pages the problems index as the emulator does', () => {
  const shardQuery = (shard: string, extra: Record<string, unknown> = {}) =>
    both((doc, t) =>
      doc.send(
        new QueryCommand({
          TableName: t.jobs,
          IndexName: 'problems',
          KeyConditionExpression: '#s = :s',
          ExpressionAttributeNames: { '#s': 'problemShard' },
          ExpressionAttributeValues: { ':s': shard },
          ...extra,
        }),
      ),
    );

  it.each([
    ['a key condition on a non-key attribute', 'problemShard = :s AND #status = :v'],
    ['a key condition with <> on the partition key', 'problemShard <> :s'],
  ])('a query with %s', async (_what, KeyConditionExpression) => {
    const got = await both((doc, t) =>
      doc.send(
        new QueryCommand({
          TableName: t.jobs,
          IndexName: 'problems',
          KeyConditionExpression,
          ...(KeyConditionExpression.includes('#status')
            ? { ExpressionAttributeNames: { '#status': 'status' } }
            : {}),
          ExpressionAttributeValues: {
            ':s': 'x',
            ...(KeyConditionExpression.includes(':v') ? { ':v': 1 } : {}),
          },
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
  });

  it('a consistent read of the index', async () => {
    const got = await shardQuery('x', { ConsistentRead: true });
    expect(got.mem).toEqual(got.real);
  });

  it('a filter on a key attribute of the index', async () => {
    const got = await shardQuery('x', {
      FilterExpression: 'problemAt > :n',
      ExpressionAttributeValues: { ':s': 'x', ':n': 1 },
    });
    expect(got.mem).toEqual(got.real);
  });

  it('empty ExpressionAttributeValues', async () => {
    const got = await both((doc, t) =>
      doc.send(
        new UpdateCommand({
          TableName: t.jobs,
          Key: { dedupKey: fresh() },
          UpdateExpression: 'SET problemAt = problemAt',
          ExpressionAttributeValues: {},
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
  });

  it.each([
    ['a string sort key', { problemShard: 'x', problemAt: 'not-a-number' }],
    ['an empty partition key', { problemShard: '', problemAt: 1 }],
  ])('a write of an index key of %s', async (_what, keys) => {
    const got = await both((doc, t) =>
      doc.send(new PutCommand({ TableName: t.jobs, Item: { dedupKey: fresh(), ...keys } })),
    );
    expect(got.mem).toEqual(got.real);
  });

  it('a page that ends at its Limit with the last item', async () => {
    const shard = `limit-${Date.now()}`;
    for (const at of [1, 2]) {
      await both((doc, t) =>
        doc.send(
          new PutCommand({
            TableName: t.jobs,
            Item: { dedupKey: `${shard}-${at}`, problemShard: shard, problemAt: at },
          }),
        ),
      );
    }
    for (let i = 0; i < 50; i++) {
      const all = await shardQuery(shard);
      if ((all.real as { ok?: { Count?: number } }).ok?.Count === 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const got = await shardQuery(shard, { Limit: 2, ScanIndexForward: false });
    expect(got.mem).toEqual(got.real);
  });
});

describe('InMemoryDynamoDb projects nested paths as the emulator does', () => {
  it.each([
    [
      'the operator scan’s checkpoint fields',
      '#c.#at, #c.#step, #s',
      { '#c': 'checkpoint', '#at': 'at', '#step': 'step', '#s': 'status' },
    ],
    ['a missing nested field', '#c.#none, #s', { '#c': 'checkpoint', '#none': 'none', '#s': 'status' }],
    ['a list element', '#l[1], #c.#step', { '#l': 'list', '#c': 'checkpoint', '#step': 'step' }],
  ])('a get projecting %s', async (_what, ProjectionExpression, names) => {
    const account = fresh();
    await seed({
      account,
      status: 'RUNNING',
      list: [1, 2, 3],
      checkpoint: { at: 5, step: 'b', data: 'x'.repeat(10) },
    });
    const got = await both((doc, t) =>
      doc.send(
        new GetCommand({
          TableName: t.ledger,
          Key: { account },
          ConsistentRead: true,
          ProjectionExpression,
          ExpressionAttributeNames: names,
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
  });
});

describe('InMemoryDynamoDb evaluates and refuses as the emulator does, more', () => {
  it.each([
    ['a list element of a map', '#h[1].#k = :k', { '#h': 'history', '#k': 'kind' }],
    ['size of a map and a set', 'size(nested) = :two AND size(tags) = :one', {}],
    ['contains on a string, by a number', 'contains(label, :one)', {}],
    ['a number against a bigint', 'big = :bigger', {}],
  ])('a condition: %s', async (_what, ConditionExpression, names) => {
    const account = fresh();
    await seed({
      account,
      balance: 5,
      label: 'a1',
      big: 12345678901234567890n,
      tags: new Set(['t']),
      nested: { a: 1, b: 2 },
      history: [{ kind: 'x' }, { kind: 'y' }],
    });
    const all: Record<string, unknown> = {
      ':k': 'y',
      ':two': 2,
      ':one': 1,
      ':bigger': 12345678901234567890n,
    };
    const values = Object.fromEntries(
      Object.entries(all).filter(([k]) => new RegExp(`${k}(?![A-Za-z0-9_])`).test(ConditionExpression)),
    );
    const got = await both((doc, t) =>
      doc.send(
        new UpdateCommand({
          TableName: t.ledger,
          Key: { account },
          UpdateExpression: 'SET touched = :t',
          ConditionExpression,
          ...(Object.keys(names).length ? { ExpressionAttributeNames: names } : {}),
          ExpressionAttributeValues: { ...values, ':t': true },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
  });

  it.each([
    ['decimal sums', 'SET n = :a + :b', { ':a': 0.1, ':b': 0.2 }],
    ['ADD to a bigint', 'ADD big :one', { ':one': 1 }],
    ['list_append of a missing list', 'SET l = list_append(l, :l)', { ':l': [1] }],
    ['ADD of a string set to a number', 'ADD balance :s', { ':s': new Set(['x']) }],
    ['DELETE of the last element', 'DELETE tags :s', { ':s': new Set(['t']) }],
  ])('an update: %s', async (_what, UpdateExpression, values) => {
    const account = fresh();
    await seed({ account, balance: 5, big: 99999999999999999999n, tags: new Set(['t']) });
    const got = await both((doc, t) =>
      doc.send(
        new UpdateCommand({
          TableName: t.ledger,
          Key: { account },
          UpdateExpression,
          ExpressionAttributeValues: values,
          ReturnValues: 'ALL_NEW',
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
  });

  it('a transaction whose ConditionCheck fails on a missing item, another table written', async () => {
    const account = fresh();
    const got = await both((doc, t) =>
      doc.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: t.jobs, Item: { dedupKey: account } } },
            {
              ConditionCheck: {
                TableName: t.ledger,
                Key: { account },
                ConditionExpression: 'attribute_exists(account)',
                ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
              },
            },
          ],
        }),
      ),
    );
    expect(got.mem).toEqual(got.real);
    const none = await both((doc, t) =>
      doc.send(new GetCommand({ TableName: t.jobs, Key: { dedupKey: account }, ConsistentRead: true })),
    );
    expect(none.mem).toEqual(none.real);
  });
});

describe('InMemoryDynamoDb refuses malformed keys as the emulator does', () => {
  it.each([
    ['a key of the wrong type', { account: 5 }],
    ['no key', { balance: 1 }],
  ])('a put of an item with %s', async (_what, Item) => {
    const got = await both((doc, t) => doc.send(new PutCommand({ TableName: t.ledger, Item })));
    expect(got.mem).toEqual(got.real);
  });

  it.each([
    ['a key of the wrong type', { account: 5 }],
    ['an extra attribute', { account: 'a', balance: 1 }],
    ['an empty string', { account: '' }],
  ])('a get by %s', async (_what, Key) => {
    const got = await both((doc, t) => doc.send(new GetCommand({ TableName: t.ledger, Key })));
    expect(got.mem).toEqual(got.real);
  });
});
