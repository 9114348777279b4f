import {
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { guardStore } from '../../../shared/core/adapters/store-errors.ts';
import { StoreUnavailableError } from '../../../shared/errors.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../shared/testing/index.ts';

const JOBS = 'app-jobs';
const LEASES = 'app-leases';

function memory(options: { write?: number; read?: number; burst?: number } = {}) {
  const clock = { ms: 1_000_000 };
  const doc = new InMemoryDynamoDb({
    tables: leaseqTables({ jobs: JOBS, leases: LEASES }),
    now: () => clock.ms,
    partitionLimits: {
      ...(options.write ? { writeUnitsPerSecond: options.write } : {}),
      ...(options.read ? { readUnitsPerSecond: options.read } : {}),
      ...(options.burst ? { burstSeconds: options.burst } : {}),
    },
  });
  return { doc, clock };
}

const bump = (leaseKey: string) =>
  new UpdateCommand({
    TableName: LEASES,
    Key: { leaseKey },
    UpdateExpression: 'ADD #n :one',
    ExpressionAttributeNames: { '#n': 'n' },
    ExpressionAttributeValues: { ':one': 1 },
  });

async function refusal(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await promise;
  } catch (error) {
    return error as Error & Record<string, unknown>;
  }
  throw new Error('expected a refusal');
}

/** Writes of 1 WCU to one key, `perMs` per millisecond for `ms` ms: how many landed. */
async function hammer(doc: InMemoryDynamoDb, clock: { ms: number }, key: string, ms: number, perMs: number) {
  let ok = 0;
  for (let t = 0; t < ms; t += 1) {
    for (let i = 0; i < perMs; i += 1) {
      try {
        await doc.send(bump(key));
        ok += 1;
      } catch (error) {
        if (!(error instanceof ProvisionedThroughputExceededException)) throw error;
      }
    }
    clock.ms += 1;
  }
  return ok;
}

describe('InMemoryDynamoDb partitionLimits', () => {
  it('serves one key at most 1,000 write units a second, plus the small burst, and others beside it', async () => {
    const { doc, clock } = memory();
    // 4 writes a millisecond: 4,000 WCU a second asked of one key for 2 s.
    const landed = await hammer(doc, clock, 'acct#1', 2000, 4);
    // 1,000 a second refilled over 2 s, plus the 200-unit bucket it started with.
    expect(landed).toBeGreaterThanOrEqual(2000);
    expect(landed).toBeLessThanOrEqual(2200 + 4);
    expect(doc.item(LEASES, { leaseKey: 'acct#1' })?.n).toBe(landed);
    // Another key is its own partition: unaffected.
    await expect(doc.send(bump('acct#2'))).resolves.toBeDefined();
    const throttles = doc.partitions?.throttles() ?? [];
    expect(throttles).toEqual([
      { table: LEASES, partition: 'acct#1', kind: 'write', requests: 8000 - landed },
    ]);
  });

  it('throttles as DynamoDB answers a hot key: ProvisionedThroughputExceededException with its reason, nothing written', async () => {
    const { doc } = memory({ write: 10, burst: 0.1 });
    await doc.send(bump('k'));
    const error = await refusal(doc.send(bump('k')));
    expect(error).toBeInstanceOf(ProvisionedThroughputExceededException);
    expect(error.name).toBe('ProvisionedThroughputExceededException');
    expect(error.ThrottlingReasons).toEqual([
      {
        reason: 'TableWriteKeyRangeThroughputExceeded',
        resource: `arn:aws:dynamodb:us-east-1:000000000000:table/${LEASES}`,
      },
    ]);
    expect((error.$metadata as { httpStatusCode: number }).httpStatusCode).toBe(400);
    expect(doc.item(LEASES, { leaseKey: 'k' })?.n).toBe(1);
    // guardStore calls it an outage, as any throttle.
    await expect(guardStore('rate-take', (http) => doc.send(bump('k'), http))).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );
  });

  it('refills by the clock it is given', async () => {
    const { doc, clock } = memory({ write: 10, burst: 0.1 });
    await doc.send(bump('k'));
    await expect(doc.send(bump('k'))).rejects.toBeInstanceOf(ProvisionedThroughputExceededException);
    clock.ms += 99;
    await expect(doc.send(bump('k'))).rejects.toBeInstanceOf(ProvisionedThroughputExceededException);
    clock.ms += 1;
    await expect(doc.send(bump('k'))).resolves.toBeDefined();
  });

  it('charges an item by its size: a 3 KB item takes 3 write units, 2 consistent read units of 4 KB', async () => {
    const { doc } = memory({ write: 30, read: 10, burst: 0.1 });
    const item = { leaseKey: 'big', pad: 'x'.repeat(2500) };
    await doc.send(new PutCommand({ TableName: LEASES, Item: item })); // 3 of 3
    await expect(doc.send(new PutCommand({ TableName: LEASES, Item: item }))).rejects.toBeInstanceOf(
      ProvisionedThroughputExceededException,
    );
    await doc.send(new GetCommand({ TableName: LEASES, Key: { leaseKey: 'big' }, ConsistentRead: true }));
    const error = await refusal(
      doc.send(new GetCommand({ TableName: LEASES, Key: { leaseKey: 'big' }, ConsistentRead: true })),
    );
    expect(error.ThrottlingReasons).toEqual([
      expect.objectContaining({ reason: 'TableReadKeyRangeThroughputExceeded' }),
    ]);
  });

  it('a transaction over one of its items partitions is cancelled with ThrottlingError on that action, nothing written', async () => {
    const { doc } = memory({ write: 20, burst: 0.1 });
    // Transactional writes cost twice: this one takes the whole bucket of "hot".
    await doc.send(bump('hot'));
    const transaction = new TransactWriteCommand({
      TransactItems: [
        { Put: { TableName: LEASES, Item: { leaseKey: 'cold', n: 1 } } },
        { Put: { TableName: LEASES, Item: { leaseKey: 'hot', n: 9 } } },
      ],
    });
    const error = await refusal(doc.send(transaction));
    expect(error).toBeInstanceOf(TransactionCanceledException);
    expect((error.CancellationReasons as { Code: string }[]).map((r) => r.Code)).toEqual([
      'None',
      'ThrottlingError',
    ]);
    expect(doc.item(LEASES, { leaseKey: 'cold' })).toBeUndefined();
    expect(doc.item(LEASES, { leaseKey: 'hot' })?.n).toBe(1);
  });

  it('limits each index partition too: writes landing on one problems shard', async () => {
    const { doc } = memory({ write: 10, burst: 0.1 });
    const put = (dedupKey: string) =>
      new PutCommand({
        TableName: JOBS,
        Item: { dedupKey, problemShard: 'p#0', problemAt: 1, state: 'DEAD' },
      });
    // Each put is 1 unit on its own key and 1 on the index partition p#0 (of 1 unit: burst 0.1 x 10).
    await doc.send(put('a'));
    const error = await refusal(doc.send(put('b')));
    expect(error.ThrottlingReasons).toEqual([
      {
        reason: 'IndexWriteKeyRangeThroughputExceeded',
        resource: `arn:aws:dynamodb:us-east-1:000000000000:table/${JOBS}/index/problems`,
      },
    ]);
    expect(doc.item(JOBS, { dedupKey: 'b' })).toBeUndefined();
  });

  it('charges a query on its partition, and leaves a batch get key it cannot read unprocessed', async () => {
    const { doc } = memory({ read: 10, burst: 0.1 });
    doc.seed(LEASES, { leaseKey: 'a' });
    doc.seed(LEASES, { leaseKey: 'b' });
    const get = () =>
      doc.send(new GetCommand({ TableName: LEASES, Key: { leaseKey: 'a' }, ConsistentRead: true }));
    await get();
    const batch = await doc.send(
      new BatchGetCommand({
        RequestItems: { [LEASES]: { Keys: [{ leaseKey: 'a' }, { leaseKey: 'b' }], ConsistentRead: true } },
      }),
    );
    expect(batch.Responses?.[LEASES]).toEqual([{ leaseKey: 'b' }]);
    expect(batch.UnprocessedKeys).toEqual({ [LEASES]: { Keys: [{ leaseKey: 'a' }] } });
    await expect(
      doc.send(new BatchGetCommand({ RequestItems: { [LEASES]: { Keys: [{ leaseKey: 'a' }] } } })),
    ).rejects.toBeInstanceOf(ProvisionedThroughputExceededException);
    const query = () =>
      doc.send(
        new QueryCommand({
          TableName: LEASES,
          KeyConditionExpression: 'leaseKey = :k',
          ExpressionAttributeValues: { ':k': 'b' },
          ConsistentRead: true,
        }),
      );
    await expect(query()).rejects.toBeInstanceOf(ProvisionedThroughputExceededException);
  });

  it('a refused condition takes a write unit of its partition', async () => {
    const { doc } = memory({ write: 2, burst: 0.5 });
    const guarded = new PutCommand({
      TableName: LEASES,
      Item: { leaseKey: 'k' },
      ConditionExpression: 'attribute_exists(leaseKey)',
    });
    await expect(doc.send(guarded)).rejects.toMatchObject({ name: 'ConditionalCheckFailedException' });
    await expect(doc.send(bump('k'))).rejects.toBeInstanceOf(ProvisionedThroughputExceededException);
  });

  it('refuses a limit that is not a positive number, and is off unless asked for', async () => {
    expect(
      () =>
        new InMemoryDynamoDb({
          tables: leaseqTables({ leases: LEASES }),
          partitionLimits: { writeUnitsPerSecond: 0 },
        }),
    ).toThrow('partitionLimits.writeUnitsPerSecond must be a positive number, got 0');
    const plain = new InMemoryDynamoDb({ tables: leaseqTables({ leases: LEASES }) });
    expect(plain.partitions).toBeUndefined();
    for (let i = 0; i < 3000; i += 1) await plain.send(bump('k'));
  });
});
