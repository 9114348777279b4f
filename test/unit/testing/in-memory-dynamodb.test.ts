import {
  ConditionalCheckFailedException,
  DescribeTableCommand,
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import {
  GetCommand,
  PutCommand,
  paginateScan,
  QueryCommand,
  type QueryCommandOutput,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { guardStore } from '../../../shared/core/adapters/store-errors.ts';
import { defineTable } from '../../../shared/core/model/table.ts';
import { StoreRefusedError, StoreUnavailableError } from '../../../shared/errors.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../shared/testing/index.ts';

const JOBS = 'app-jobs';
const LEDGER = 'app-ledger';

function memory(now = () => Date.now()): InMemoryDynamoDb {
  return new InMemoryDynamoDb({
    now,
    tables: leaseqTables({
      jobs: JOBS,
      leases: 'app-leases',
      app: { [LEDGER]: defineTable('ledger', { partitionKey: 'account' }) },
    }),
  });
}

async function refusal(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await promise;
  } catch (error) {
    return error as Error & Record<string, unknown>;
  }
  throw new Error('expected the request to be refused');
}

const put = (Item: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  new PutCommand({ TableName: LEDGER, Item, ...extra });

describe('InMemoryDynamoDb items', () => {
  it('answers native values and never aliases a stored item', async () => {
    const doc = memory();
    const item = { account: 'a', n: 1, s: new Set(['x']), b: new Uint8Array([7]), m: { l: [1] } };
    const out = await doc.send(put(item));
    expect(out.$metadata.httpStatusCode).toBe(200);
    item.m.l.push(2);
    const got = await doc.send(new GetCommand({ TableName: LEDGER, Key: { account: 'a' } }));
    expect(got.Item).toEqual({
      account: 'a',
      n: 1,
      s: new Set(['x']),
      b: new Uint8Array([7]),
      m: { l: [1] },
    });
    (got.Item as { m: { l: number[] } }).m.l.push(3);
    const again = await doc.send(new GetCommand({ TableName: LEDGER, Key: { account: 'a' } }));
    expect(again.Item?.m).toEqual({ l: [1] });
  });

  it('refuses a failed condition with the old item, typed, only with ALL_OLD', async () => {
    const doc = memory();
    await doc.send(put({ account: 'a', n: 1 }));
    const cond = { ConditionExpression: 'attribute_not_exists(account)' };
    const plain = await refusal(doc.send(put({ account: 'a', n: 2 }, cond)));
    expect(plain).toBeInstanceOf(ConditionalCheckFailedException);
    expect(plain.Item).toBeUndefined();
    const withOld = await refusal(
      doc.send(put({ account: 'a', n: 2 }, { ...cond, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })),
    );
    expect(withOld.Item).toEqual({ account: { S: 'a' }, n: { N: '1' } });
    expect(doc.items(LEDGER)).toEqual([{ account: 'a', n: 1 }]);
  });

  it('returns NONE, ALL_OLD, ALL_NEW, UPDATED_OLD and UPDATED_NEW', async () => {
    const doc = memory();
    await doc.send(put({ account: 'a', n: 1, keep: 'k' }));
    const update = (ReturnValues: 'NONE' | 'ALL_OLD' | 'ALL_NEW' | 'UPDATED_OLD' | 'UPDATED_NEW') =>
      doc.send(
        new UpdateCommand({
          TableName: LEDGER,
          Key: { account: 'a' },
          UpdateExpression: 'SET n = n + :one',
          ExpressionAttributeValues: { ':one': 1 },
          ReturnValues,
        }),
      );
    expect((await update('NONE')).Attributes).toBeUndefined();
    expect((await update('ALL_OLD')).Attributes).toEqual({ account: 'a', n: 2, keep: 'k' });
    expect((await update('ALL_NEW')).Attributes).toEqual({ account: 'a', n: 4, keep: 'k' });
    expect((await update('UPDATED_OLD')).Attributes).toEqual({ n: 4 });
    expect((await update('UPDATED_NEW')).Attributes).toEqual({ n: 6 });
  });

  it('refuses an update of a key attribute and unused placeholders, as ValidationException', async () => {
    const doc = memory();
    const key = await refusal(
      doc.send(
        new UpdateCommand({
          TableName: LEDGER,
          Key: { account: 'a' },
          UpdateExpression: 'SET account = :b',
          ExpressionAttributeValues: { ':b': 'b' },
        }),
      ),
    );
    expect(key.name).toBe('ValidationException');
    expect(key.message).toMatch(/Cannot update attribute account. This attribute is part of the key/);
    const unused = await refusal(
      doc.send(
        put(
          { account: 'a' },
          { ConditionExpression: 'attribute_not_exists(account)', ExpressionAttributeValues: { ':x': 1 } },
        ),
      ),
    );
    expect(unused.message).toMatch(/unused in expressions: keys: \{:x\}/);
    expect(doc.items(LEDGER)).toEqual([]);
  });

  it('refuses an item past 400 KB and an expression past 4 KB (guardStore names the problem)', async () => {
    const doc = memory();
    const big = await refusal(
      guardStore('put', (http) => doc.send(put({ account: 'a', v: 'x'.repeat(400 * 1024) }), http)),
    );
    expect(big).toBeInstanceOf(StoreRefusedError);
    expect((big as unknown as StoreRefusedError).problem).toBe('item-too-large');
    const long = await refusal(
      doc.send(
        put(
          { account: 'a' },
          {
            ConditionExpression: `${'attribute_not_exists(account) AND '.repeat(150)}attribute_not_exists(account)`,
          },
        ),
      ),
    );
    expect(long.message).toMatch(/Expression size has exceeded the maximum allowed size/);
  });

  it('throws naming a command it does not serve', async () => {
    const doc = memory();
    await expect(doc.send(new DescribeTableCommand({ TableName: JOBS }) as never)).rejects.toThrow(
      /DescribeTableCommand is not supported/,
    );
  });
});

describe('InMemoryDynamoDb transactions', () => {
  const check = (n: number) => ({
    ConditionCheck: {
      TableName: LEDGER,
      Key: { account: 'a' },
      ConditionExpression: 'n = :n',
      ExpressionAttributeValues: { ':n': n },
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
    },
  });

  it('writes all or nothing across tables, with one reason per action', async () => {
    const doc = memory();
    await doc.send(put({ account: 'a', n: 1 }));
    const job = { Put: { TableName: JOBS, Item: { dedupKey: 'j', status: 'COMPLETED' } } };
    const cancelled = await refusal(doc.send(new TransactWriteCommand({ TransactItems: [job, check(2)] })));
    expect(cancelled).toBeInstanceOf(TransactionCanceledException);
    expect(cancelled.CancellationReasons).toEqual([
      { Code: 'None' },
      {
        Code: 'ConditionalCheckFailed',
        Message: 'The conditional request failed',
        Item: { account: { S: 'a' }, n: { N: '1' } },
      },
    ]);
    expect(doc.items(JOBS)).toEqual([]);
    await doc.send(new TransactWriteCommand({ TransactItems: [job, check(1)] }));
    expect(doc.items(JOBS)).toEqual([{ dedupKey: 'j', status: 'COMPLETED' }]);
  });

  it('cancels with ValidationError when an update grows an item past 400 KB', async () => {
    const doc = memory();
    const grow = {
      Update: {
        TableName: LEDGER,
        Key: { account: 'a' },
        UpdateExpression: 'SET v = :v',
        ExpressionAttributeValues: { ':v': 'x'.repeat(401 * 1024) },
      },
    };
    const cancelled = await refusal(doc.send(new TransactWriteCommand({ TransactItems: [grow] })));
    expect(cancelled.CancellationReasons).toEqual([
      { Code: 'ValidationError', Message: 'Item size to update has exceeded the maximum allowed size' },
    ]);
  });

  it('refuses one item twice and more than 100 actions, with DynamoDB wording', async () => {
    const doc = memory();
    const twice = await refusal(doc.send(new TransactWriteCommand({ TransactItems: [check(1), check(1)] })));
    expect(twice.message).toBe('Transaction request cannot include multiple operations on one item');
    const many = Array.from({ length: 101 }, (_, i) => ({
      Put: { TableName: LEDGER, Item: { account: `a${i}` } },
    }));
    const tooMany = await refusal(
      guardStore('complete', (http) => doc.send(new TransactWriteCommand({ TransactItems: many }), http)),
    );
    expect((tooMany as unknown as StoreRefusedError).problem).toBe('too-many-items');
    expect(doc.items(LEDGER)).toEqual([]);
  });
});

describe('InMemoryDynamoDb reads, capacity and TTL', () => {
  it('queries the sparse problems index newest first, page by page', async () => {
    const doc = memory();
    for (let i = 0; i < 5; i++) {
      await doc.send(
        new PutCommand({
          TableName: JOBS,
          Item: { dedupKey: `k${i}`, problemShard: 's', problemAt: i, secret: 'x' },
        }),
      );
    }
    await doc.send(new PutCommand({ TableName: JOBS, Item: { dedupKey: 'fine' } }));
    const page = (ExclusiveStartKey?: Record<string, unknown>): Promise<QueryCommandOutput> =>
      doc.send(
        new QueryCommand({
          TableName: JOBS,
          IndexName: 'problems',
          KeyConditionExpression: 'problemShard = :s',
          ExpressionAttributeValues: { ':s': 's' },
          ScanIndexForward: false,
          Limit: 3,
          ...(ExclusiveStartKey ? { ExclusiveStartKey } : {}),
        }),
      );
    const first = await page();
    expect(first.Items?.map((i) => i.dedupKey)).toEqual(['k4', 'k3', 'k2']);
    expect(first.Items?.[0]).not.toHaveProperty('secret');
    expect(first.LastEvaluatedKey).toEqual({ dedupKey: 'k2', problemShard: 's', problemAt: 2 });
    const second = await page(first.LastEvaluatedKey);
    expect(second.Items?.map((i) => i.dedupKey)).toEqual(['k1', 'k0']);
    expect(second.LastEvaluatedKey).toBeUndefined();
  });

  it('scans every item through the paginator, Limit at a time', async () => {
    const doc = memory();
    for (let i = 0; i < 7; i++) await doc.send(put({ account: `a${i}` }));
    const pages: number[] = [];
    for await (const p of paginateScan({ client: doc }, { TableName: LEDGER, Limit: 3 }))
      pages.push(p.Items?.length ?? 0);
    expect(pages).toEqual([3, 3, 1]);
  });

  it('counts capacity when asked and keeps a tally per table', async () => {
    const doc = memory();
    const w = await doc.send(put({ account: 'a', v: 'x'.repeat(1500) }, { ReturnConsumedCapacity: 'TOTAL' }));
    expect(w.ConsumedCapacity).toEqual({ TableName: LEDGER, CapacityUnits: 2, WriteCapacityUnits: 2 });
    const r = await doc.send(
      new GetCommand({ TableName: LEDGER, Key: { account: 'a' }, ReturnConsumedCapacity: 'TOTAL' }),
    );
    expect(r.ConsumedCapacity?.CapacityUnits).toBe(0.5);
    await doc.send(
      new TransactWriteCommand({ TransactItems: [{ Put: { TableName: LEDGER, Item: { account: 'b' } } }] }),
    );
    expect(doc.tally()[LEDGER]).toMatchObject({ requests: 3, writeUnits: 4, readUnits: 0.5 });
  });

  it('serves an expired item until the sweep, then deletes it', async () => {
    let now = 1_000_000;
    const doc = memory(() => now);
    await doc.send(new PutCommand({ TableName: JOBS, Item: { dedupKey: 'old', expiresAt: 1000 } }));
    await doc.send(new PutCommand({ TableName: JOBS, Item: { dedupKey: 'new', expiresAt: 1001 } }));
    expect(doc.items(JOBS)).toHaveLength(2);
    expect(doc.expire()).toBe(1);
    expect(doc.items(JOBS).map((i) => i.dedupKey)).toEqual(['new']);
    now = 1_001_000;
    expect(doc.expire()).toBe(1);
  });
});

describe('InMemoryDynamoDb faults', () => {
  it('fails a named operation before the write with an error guardStore calls unavailable', async () => {
    const doc = memory();
    doc.faults.failNext('claim');
    const error = await refusal(guardStore('claim', (http) => doc.send(put({ account: 'a' }), http)));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(doc.items(LEDGER)).toEqual([]);
    await guardStore('claim', (http) => doc.send(put({ account: 'a' }), http));
    expect(doc.faults.injected.get('claim')).toBe(1);
  });

  it('loses the answer after the write landed', async () => {
    const doc = memory();
    doc.faults.loseAnswer({ command: 'PutCommand', table: LEDGER });
    const error = await refusal(guardStore('put', (http) => doc.send(put({ account: 'a' }), http)));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(doc.items(LEDGER)).toEqual([{ account: 'a' }]);
  });

  it('throttles and conflicts as the SDK does', async () => {
    const doc = memory();
    doc.faults.failNext('*', 'throttle').failNext('*', 'conflict');
    expect(await refusal(doc.send(put({ account: 'a' })))).toBeInstanceOf(
      ProvisionedThroughputExceededException,
    );
    const conflict = await refusal(
      doc.send(
        new TransactWriteCommand({ TransactItems: [{ Put: { TableName: LEDGER, Item: { account: 'a' } } }] }),
      ),
    );
    expect(conflict.CancellationReasons).toEqual([
      { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' },
    ]);
    expect(doc.faults.pending).toBe(0);
  });

  it('fails an aborted delayed call at once; a before delay still lands later', async () => {
    const doc = memory();
    doc.faults.delayNext('claim', 30, { when: 'before' });
    const abort = new AbortController();
    const call = guardStore('claim', abort.signal, (http) => doc.send(put({ account: 'a' }), http));
    abort.abort(new Error('deadline'));
    expect(await refusal(call)).toBeInstanceOf(StoreUnavailableError);
    expect(doc.items(LEDGER)).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(doc.items(LEDGER)).toEqual([{ account: 'a' }]);
  });
});
