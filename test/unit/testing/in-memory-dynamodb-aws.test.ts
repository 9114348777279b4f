import { PutCommand, QueryCommand, ScanCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { jobSummaryScan } from '../../../shared/core/adapters/dynamodb-scans.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../shared/testing/index.ts';

// Where the emulator answers otherwise than DynamoDB (it accepts what DynamoDB refuses), the in-memory
// DynamoDB answers as DynamoDB's documentation and its reported answers say.

const JOBS = 'app-jobs';

function memory(): InMemoryDynamoDb {
  return new InMemoryDynamoDb({ tables: leaseqTables({ jobs: JOBS }) });
}

async function refusal(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a refusal, the request was answered');
}

describe('InMemoryDynamoDb refuses as DynamoDB does', () => {
  it.each([
    ['SET #a = :v REMOVE #a', '[balance], path two: [balance]'],
    ['SET #a = :v, #b = :v', '[balance], path two: [balance]'],
    ['SET #a = :v REMOVE #h[0]', undefined],
    ['SET #h[0] = :v REMOVE #h', '[history, [0]], path two: [history]'],
  ])('an update whose paths overlap: %s', async (UpdateExpression, paths) => {
    const doc = memory();
    await doc.send(new PutCommand({ TableName: JOBS, Item: { dedupKey: 'k', balance: 1, history: [1] } }));
    const names: Record<string, string> = {};
    if (UpdateExpression.includes('#a')) names['#a'] = 'balance';
    if (UpdateExpression.includes('#b')) names['#b'] = 'balance';
    if (UpdateExpression.includes('#h')) names['#h'] = 'history';
    const send = doc.send(
      new UpdateCommand({
        TableName: JOBS,
        Key: { dedupKey: 'k' },
        UpdateExpression,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: { ':v': 2 },
      }),
    );
    if (paths === undefined) {
      await send;
      return;
    }
    const error = await refusal(send);
    expect(error.name).toBe('ValidationException');
    expect(error.message).toBe(
      `Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: ${paths}`,
    );
  });

  it.each([
    ['OR', 'problemShard = :s OR problemAt = :n'],
    ['NOT', 'problemShard = :s AND NOT problemAt = :n'],
    ['<>', 'problemShard = :s AND problemAt <> :n'],
    ['attribute_exists', 'problemShard = :s AND attribute_exists(problemAt)'],
  ])('a key condition with %s', async (operator, KeyConditionExpression) => {
    const error = await refusal(
      memory().send(
        new QueryCommand({
          TableName: JOBS,
          IndexName: 'problems',
          KeyConditionExpression,
          ExpressionAttributeValues: {
            ':s': 'x',
            ...(KeyConditionExpression.includes(':n') ? { ':n': 1 } : {}),
          },
        }),
      ),
    );
    expect(error.name).toBe('ValidationException');
    expect(error.message).toBe(`Invalid operator used in KeyConditionExpression: ${operator}`);
  });

  it('a key condition without the partition key, or with two conditions on the sort key', async () => {
    for (const KeyConditionExpression of [
      'problemAt = :n',
      'problemShard = :s AND problemAt > :n AND problemAt < :n',
    ]) {
      const error = await refusal(
        memory().send(
          new QueryCommand({
            TableName: JOBS,
            IndexName: 'problems',
            KeyConditionExpression,
            ExpressionAttributeValues: {
              ':n': 1,
              ...(KeyConditionExpression.includes(':s') ? { ':s': 'x' } : {}),
            },
          }),
        ),
      );
      expect(error.name, KeyConditionExpression).toBe('ValidationException');
    }
  });
});

describe('InMemoryDynamoDb counts and pages as DynamoDB does', () => {
  it('counts a number by its significant digits, trailing zeros trimmed', async () => {
    // Names and values: dedupKey (8) + 'k' (1), n (1) + 1000000000 (one digit: 2), s (1) + the string.
    const item = { dedupKey: 'k', n: 1_000_000_000, s: 'x'.repeat(400 * 1024 - 13) };
    await memory().send(new PutCommand({ TableName: JOBS, Item: item }));
  });

  it('stops a page after 1 MB read, naming the last item read', async () => {
    const doc = memory();
    for (let i = 0; i < 30; i++) {
      doc.seed(JOBS, { dedupKey: `k${String(i).padStart(2, '0')}`, s: 'x'.repeat(40 * 1024) });
    }
    const first = await doc.send(new ScanCommand({ TableName: JOBS }));
    // 40 KB and its few bytes of names each: the 26th item passes 1 MB.
    expect(first.Count).toBe(26);
    expect(first.LastEvaluatedKey).toEqual({ dedupKey: 'k25' });
    const rest = await doc.send(
      new ScanCommand({ TableName: JOBS, ExclusiveStartKey: first.LastEvaluatedKey }),
    );
    expect(rest.Count).toBe(4);
    expect(rest.LastEvaluatedKey).toBeUndefined();
  });
});

describe('InMemoryDynamoDb takes a request as the SDK sends it', () => {
  it('stores what was sent, not what the caller changed after sending it', async () => {
    const doc = memory();
    doc.faults.delayNext('*', 5, { when: 'before' });
    const item = { dedupKey: 'k', version: 1 };
    const sent = doc.send(new PutCommand({ TableName: JOBS, Item: item }));
    item.version = 2;
    await sent;
    expect(doc.items(JOBS)).toEqual([{ dedupKey: 'k', version: 1 }]);
  });

  it('rejects with AbortError when the signal aborts while the answer is on its way', async () => {
    const doc = new InMemoryDynamoDb({ tables: leaseqTables({ jobs: JOBS }), latencyMs: 50 });
    const controller = new AbortController();
    const sent = doc.send(new PutCommand({ TableName: JOBS, Item: { dedupKey: 'k' } }), {
      abortSignal: controller.signal,
    });
    controller.abort();
    const error = await refusal(sent);
    expect(error.name).toBe('AbortError');
    // The write landed before the answer was lost, as it may on AWS.
    expect(doc.items(JOBS)).toEqual([{ dedupKey: 'k' }]);
  });
});

describe("InMemoryDynamoDb serves the operator's scan", () => {
  it('projects the checkpoint fields jobSummaryScan names, and nothing else', async () => {
    const doc = memory();
    doc.seed(JOBS, {
      dedupKey: 'k',
      status: 'IN_PROGRESS',
      payload: 'secret',
      checkpoint: { at: 5, step: 'b', data: { big: 'x' } },
    });
    const out = await doc.send(new ScanCommand(jobSummaryScan(JOBS)));
    expect(out.Items).toEqual([{ dedupKey: 'k', status: 'IN_PROGRESS', checkpoint: { at: 5, step: 'b' } }]);
  });
});
