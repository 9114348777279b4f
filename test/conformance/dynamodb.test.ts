/**
 * Conformance: the DynamoDB behaviour leaseq's leases, fencing and checkpoints rely on. Runs against the
 * embedded emulator, or unchanged against AWS_ENDPOINT_URL (LocalStack). Every test creates its own table.
 */
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  DescribeTimeToLiveCommand,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  type UpdateItemCommandInput,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { type AwsClients, destroyAwsClients } from '../../shared/aws/clients.ts';
import { testClients } from '../support/env.ts';
import { Cleanup, createTable, rejectionOf } from './helpers.ts';

type Item = Record<string, AttributeValue>;

/** Bursts per race test. */
const BURSTS = 5;

const s = (value: string): AttributeValue => ({ S: value });
const n = (value: number): AttributeValue => ({ N: String(value) });

let aws: AwsClients;
const cleanup = new Cleanup();

beforeAll(() => {
  aws = testClients();
});
afterEach(() => cleanup.run());
afterAll(() => destroyAwsClients(aws));

async function getItem(table: string, pk: string): Promise<Item | undefined> {
  const result = await aws.ddb.send(
    new GetItemCommand({ TableName: table, Key: { pk: s(pk) }, ConsistentRead: true }),
  );
  return result.Item;
}

/** The claim of docs/protocol.md: one conditional write; refusal returns the old item. */
function claim(
  table: string,
  pk: string,
  owner: string,
  now: number,
  leaseMs = 30_000,
): UpdateItemCommandInput {
  return {
    TableName: table,
    Key: { pk: s(pk) },
    UpdateExpression:
      'SET #status = :inProgress, #owner = :owner, leaseUntil = :leaseUntil, ' +
      '#token = if_not_exists(#token, :zero) + :one, attempts = if_not_exists(attempts, :zero) + :one',
    ConditionExpression:
      'attribute_not_exists(pk) OR (#status <> :completed AND #status <> :dead AND leaseUntil < :now)',
    ExpressionAttributeNames: { '#status': 'status', '#owner': 'owner', '#token': 'token' },
    ExpressionAttributeValues: {
      ':inProgress': s('IN_PROGRESS'),
      ':completed': s('COMPLETED'),
      ':dead': s('DEAD'),
      ':owner': s(owner),
      ':leaseUntil': n(now + leaseMs),
      ':now': n(now),
      ':zero': n(0),
      ':one': n(1),
    },
    ReturnValues: 'ALL_NEW',
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  };
}

describe('DynamoDB conformance', () => {
  test('conditional PutItem refused returns the existing item (ALL_OLD) on ConditionalCheckFailedException', async () => {
    // Prepare
    const table = await createTable(aws.ddb, cleanup, 'cf-put');
    const existing: Item = { pk: s('order-1'), status: s('COMPLETED'), token: n(3) };
    await aws.ddb.send(
      new PutItemCommand({
        TableName: table,
        Item: existing,
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );

    // Act
    const error = await rejectionOf(
      aws.ddb.send(
        new PutItemCommand({
          TableName: table,
          Item: { pk: s('order-1'), status: s('IN_PROGRESS'), token: n(4) },
          ConditionExpression: 'attribute_not_exists(pk)',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );

    // Assess
    expect(error).toBeInstanceOf(ConditionalCheckFailedException);
    expect((error as ConditionalCheckFailedException).Item).toEqual(existing);
    expect(await getItem(table, 'order-1')).toEqual(existing);
  });

  test('conditional UpdateItem claim: wins when absent or lease expired, refused with ALL_OLD when live or COMPLETED', async () => {
    const table = await createTable(aws.ddb, cleanup, 'cf-claim');
    const t0 = Date.now();

    const first = await aws.ddb.send(new UpdateItemCommand(claim(table, 'job-1', 'w1', t0)));
    expect(first.Attributes).toMatchObject({
      status: s('IN_PROGRESS'),
      owner: s('w1'),
      token: n(1),
      attempts: n(1),
    });

    const refused = await rejectionOf(
      aws.ddb.send(new UpdateItemCommand(claim(table, 'job-1', 'w2', t0 + 1))),
    );
    expect(refused).toBeInstanceOf(ConditionalCheckFailedException);
    expect((refused as ConditionalCheckFailedException).Item).toMatchObject({ owner: s('w1'), token: n(1) });

    // The lease runs out: a later claim (its `now` is past leaseUntil) takes the job over.
    const takeover = await aws.ddb.send(new UpdateItemCommand(claim(table, 'job-1', 'w2', t0 + 60_000)));
    expect(takeover.Attributes).toMatchObject({ owner: s('w2'), token: n(2), attempts: n(2) });

    await aws.ddb.send(
      new UpdateItemCommand({
        TableName: table,
        Key: { pk: s('job-1') },
        UpdateExpression: 'SET #status = :completed',
        ConditionExpression: '#owner = :me AND #token = :mine',
        ExpressionAttributeNames: { '#status': 'status', '#owner': 'owner', '#token': 'token' },
        ExpressionAttributeValues: { ':completed': s('COMPLETED'), ':me': s('w2'), ':mine': n(2) },
      }),
    );
    const duplicate = await rejectionOf(
      aws.ddb.send(new UpdateItemCommand(claim(table, 'job-1', 'w3', t0 + 600_000))),
    );
    expect(duplicate).toBeInstanceOf(ConditionalCheckFailedException);
    expect((duplicate as ConditionalCheckFailedException).Item).toMatchObject({
      status: s('COMPLETED'),
      owner: s('w2'),
      token: n(2),
    });
  });

  test('SET token = if_not_exists(token, :zero) + :one starts at 1 on a new item and increments an existing one', async () => {
    const table = await createTable(aws.ddb, cleanup, 'ifne');
    const bump = (): UpdateItemCommand =>
      new UpdateItemCommand({
        TableName: table,
        Key: { pk: s('lease#account-42') },
        UpdateExpression: 'SET #token = if_not_exists(#token, :zero) + :one',
        ExpressionAttributeNames: { '#token': 'token' },
        ExpressionAttributeValues: { ':zero': n(0), ':one': n(1) },
        ReturnValues: 'UPDATED_NEW',
      });

    // UPDATED_NEW on AWS holds only `token`; moto adds the key on insert. leaseq reads `token` alone.
    expect((await aws.ddb.send(bump())).Attributes).toMatchObject({ token: n(1) });
    expect((await aws.ddb.send(bump())).Attributes).toMatchObject({ token: n(2) });
    expect(await getItem(table, 'lease#account-42')).toEqual({ pk: s('lease#account-42'), token: n(2) });
  });

  test('conditional DeleteItem (release: owner and token must match) refuses a stale owner with ALL_OLD', async () => {
    const table = await createTable(aws.ddb, cleanup, 'release');
    const lease: Item = { pk: s('account#42'), owner: s('w2'), token: n(7) };
    await aws.ddb.send(new PutItemCommand({ TableName: table, Item: lease }));
    const release = (owner: string, token: number): DeleteItemCommand =>
      new DeleteItemCommand({
        TableName: table,
        Key: { pk: s('account#42') },
        ConditionExpression: '#owner = :me AND #token = :mine',
        ExpressionAttributeNames: { '#owner': 'owner', '#token': 'token' },
        ExpressionAttributeValues: { ':me': s(owner), ':mine': n(token) },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      });

    const stale = await rejectionOf(aws.ddb.send(release('w1', 6)));
    expect(stale).toBeInstanceOf(ConditionalCheckFailedException);
    expect((stale as ConditionalCheckFailedException).Item).toEqual(lease);

    await aws.ddb.send(release('w2', 7));
    expect(await getItem(table, 'account#42')).toBeUndefined();
  });

  test('TransactWriteItems all conditions met: every write is applied', async () => {
    const table = await createTable(aws.ddb, cleanup, 'tx-ok');
    await aws.ddb.send(
      new PutItemCommand({
        TableName: table,
        Item: { pk: s('job#1'), status: s('IN_PROGRESS'), owner: s('w1'), token: n(4) },
      }),
    );
    await aws.ddb.send(
      new PutItemCommand({ TableName: table, Item: { pk: s('acct#1'), balance: n(100), version: n(3) } }),
    );

    await aws.ddb.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          {
            Update: {
              TableName: table,
              Key: { pk: s('acct#1') },
              UpdateExpression: 'SET balance = balance + :amount, version = version + :one',
              ConditionExpression: 'version = :seen',
              ExpressionAttributeValues: { ':amount': n(25), ':one': n(1), ':seen': n(3) },
            },
          },
          {
            Update: {
              TableName: table,
              Key: { pk: s('job#1') },
              UpdateExpression: 'SET #status = :completed',
              ConditionExpression: '#owner = :me AND #token = :mine',
              ExpressionAttributeNames: { '#status': 'status', '#owner': 'owner', '#token': 'token' },
              ExpressionAttributeValues: { ':completed': s('COMPLETED'), ':me': s('w1'), ':mine': n(4) },
            },
          },
          { Put: { TableName: table, Item: { pk: s('effect#job#1'), applied: { BOOL: true } } } },
        ],
      }),
    );

    expect(await getItem(table, 'acct#1')).toEqual({ pk: s('acct#1'), balance: n(125), version: n(4) });
    expect((await getItem(table, 'job#1'))?.status).toEqual(s('COMPLETED'));
    expect(await getItem(table, 'effect#job#1')).toEqual({ pk: s('effect#job#1'), applied: { BOOL: true } });
  });

  test('TransactWriteItems cancelled: CancellationReasons has one code per item and nothing is written', async () => {
    const table = await createTable(aws.ddb, cleanup, 'tx-cancel');
    const job: Item = { pk: s('job#1'), status: s('IN_PROGRESS'), owner: s('w2'), token: n(5) };
    await aws.ddb.send(new PutItemCommand({ TableName: table, Item: job }));
    await aws.ddb.send(
      new PutItemCommand({ TableName: table, Item: { pk: s('acct#1'), balance: n(100), version: n(3) } }),
    );

    // A worker that lost its lease (token 4) tries to complete: the fencing condition must cancel all.
    const error = await rejectionOf(
      aws.ddb.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            {
              Update: {
                TableName: table,
                Key: { pk: s('acct#1') },
                UpdateExpression: 'SET balance = balance + :amount, version = version + :one',
                ConditionExpression: 'version = :seen',
                ExpressionAttributeValues: { ':amount': n(25), ':one': n(1), ':seen': n(3) },
              },
            },
            {
              Update: {
                TableName: table,
                Key: { pk: s('job#1') },
                UpdateExpression: 'SET #status = :completed',
                ConditionExpression: '#owner = :me AND #token = :mine',
                ExpressionAttributeNames: { '#status': 'status', '#owner': 'owner', '#token': 'token' },
                ExpressionAttributeValues: { ':completed': s('COMPLETED'), ':me': s('w1'), ':mine': n(4) },
              },
            },
          ],
        }),
      ),
    );

    expect(error).toBeInstanceOf(TransactionCanceledException);
    const reasons = (error as TransactionCanceledException).CancellationReasons ?? [];
    expect(reasons.map((reason) => reason.Code)).toEqual(['None', 'ConditionalCheckFailed']);
    expect(await getItem(table, 'acct#1')).toEqual({ pk: s('acct#1'), balance: n(100), version: n(3) });
    expect(await getItem(table, 'job#1')).toEqual(job);
  });

  test('TransactWriteItems cancellation reason carries the old item with ReturnValuesOnConditionCheckFailure=ALL_OLD', async () => {
    const table = await createTable(aws.ddb, cleanup, 'tx-old');
    const job: Item = { pk: s('job#1'), status: s('IN_PROGRESS'), owner: s('w2'), token: n(5) };
    await aws.ddb.send(new PutItemCommand({ TableName: table, Item: job }));

    const error = await rejectionOf(
      aws.ddb.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Put: { TableName: table, Item: { pk: s('effect#1'), applied: { BOOL: true } } } },
            {
              ConditionCheck: {
                TableName: table,
                Key: { pk: s('job#1') },
                ConditionExpression: '#owner = :me AND #token = :mine',
                ExpressionAttributeNames: { '#owner': 'owner', '#token': 'token' },
                ExpressionAttributeValues: { ':me': s('w1'), ':mine': n(4) },
                ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
              },
            },
          ],
        }),
      ),
    );

    expect(error).toBeInstanceOf(TransactionCanceledException);
    const reasons = (error as TransactionCanceledException).CancellationReasons ?? [];
    expect(reasons.map((reason) => reason.Code)).toEqual(['None', 'ConditionalCheckFailed']);
    expect(reasons[1]?.Item).toEqual(job);
    expect(await getItem(table, 'effect#1')).toBeUndefined();
  });

  // Each burst sends 20 writes at once on one key; several bursts make a lost race likely to show.
  test('20 concurrent conditional UpdateItems (claims) on one absent key: exactly one wins', async () => {
    const table = await createTable(aws.ddb, cleanup, 'race-claim');
    const owners = Array.from({ length: 20 }, (_, i) => `w${i}`);

    for (let burst = 0; burst < BURSTS; burst += 1) {
      const key = `job-race-${burst}`;
      const now = Date.now();
      const results = await Promise.allSettled(
        owners.map((owner) => aws.ddb.send(new UpdateItemCommand(claim(table, key, owner, now)))),
      );

      const winners = results.flatMap((result, i) => (result.status === 'fulfilled' ? [owners[i]] : []));
      const refusals = results.filter(
        (result) => result.status === 'rejected' && result.reason instanceof ConditionalCheckFailedException,
      );
      expect(winners).toHaveLength(1);
      expect(refusals).toHaveLength(19);
      expect(await getItem(table, key)).toMatchObject({
        owner: s(winners[0] ?? ''),
        token: n(1),
        attempts: n(1),
      });
    }
  });

  test('20 concurrent compare-and-set UpdateItems (token = :seen) on one existing key: exactly one wins', async () => {
    const table = await createTable(aws.ddb, cleanup, 'race-cas');
    const owners = Array.from({ length: 20 }, (_, i) => `w${i}`);

    for (let burst = 0; burst < BURSTS; burst += 1) {
      const key = `account#${burst}`;
      await aws.ddb.send(
        new PutItemCommand({ TableName: table, Item: { pk: s(key), owner: s('nobody'), token: n(5) } }),
      );
      const results = await Promise.allSettled(
        owners.map((owner) =>
          aws.ddb.send(
            new UpdateItemCommand({
              TableName: table,
              Key: { pk: s(key) },
              UpdateExpression: 'SET #owner = :me, #token = #token + :one',
              ConditionExpression: '#token = :seen',
              ExpressionAttributeNames: { '#owner': 'owner', '#token': 'token' },
              ExpressionAttributeValues: { ':me': s(owner), ':one': n(1), ':seen': n(5) },
            }),
          ),
        ),
      );

      const winners = results.flatMap((result, i) => (result.status === 'fulfilled' ? [owners[i]] : []));
      expect(winners).toHaveLength(1);
      expect(results.filter((result) => result.status === 'rejected')).toHaveLength(19);
      expect(await getItem(table, key)).toEqual({ pk: s(key), owner: s(winners[0] ?? ''), token: n(6) });
    }
  });

  test('20 concurrent unconditional increments (ADD) lose no update', async () => {
    const table = await createTable(aws.ddb, cleanup, 'race-add');

    for (let burst = 0; burst < BURSTS; burst += 1) {
      await Promise.all(
        Array.from({ length: 20 }, () =>
          aws.ddb.send(
            new UpdateItemCommand({
              TableName: table,
              Key: { pk: s('counter') },
              UpdateExpression: 'ADD jobs :one',
              ExpressionAttributeValues: { ':one': n(1) },
            }),
          ),
        ),
      );
    }

    expect(await getItem(table, 'counter')).toEqual({ pk: s('counter'), jobs: n(20 * BURSTS) });
  });

  test('UpdateTimeToLive enables TTL on expiresAt and DescribeTimeToLive reports it', async () => {
    const table = await createTable(aws.ddb, cleanup, 'ttl');

    const updated = await aws.ddb.send(
      new UpdateTimeToLiveCommand({
        TableName: table,
        TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
      }),
    );
    const described = await aws.ddb.send(new DescribeTimeToLiveCommand({ TableName: table }));

    expect(updated.TimeToLiveSpecification).toEqual({ AttributeName: 'expiresAt', Enabled: true });
    expect(described.TimeToLiveDescription?.AttributeName).toBe('expiresAt');
    expect(['ENABLED', 'ENABLING']).toContain(described.TimeToLiveDescription?.TimeToLiveStatus);
  });

  test('Scan with a FilterExpression finds stuck leases (IN_PROGRESS, lease expired)', async () => {
    const table = await createTable(aws.ddb, cleanup, 'scan');
    const now = Date.now();
    const items: Item[] = [
      { pk: s('live'), status: s('IN_PROGRESS'), leaseUntil: n(now + 60_000) },
      { pk: s('stuck'), status: s('IN_PROGRESS'), leaseUntil: n(now - 60_000) },
      { pk: s('done'), status: s('COMPLETED'), leaseUntil: n(now - 60_000) },
    ];
    for (const item of items) await aws.ddb.send(new PutItemCommand({ TableName: table, Item: item }));

    const result = await aws.ddb.send(
      new ScanCommand({
        TableName: table,
        FilterExpression: '#status = :inProgress AND leaseUntil < :now',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':inProgress': s('IN_PROGRESS'), ':now': n(now) },
        ConsistentRead: true,
      }),
    );

    expect(result.Items?.map((item) => item.pk?.S)).toEqual(['stuck']);
  });
});
