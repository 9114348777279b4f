import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { HISTORY_MAX, type HistoryEvent } from '../../../../shared/core/contract/job-history.ts';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { type CoreEnv, coreEnv } from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

let env: CoreEnv;
const now = Date.now();

beforeAll(async () => {
  env = await coreEnv('redrivehist');
});
afterAll(() => env?.close());

const full: HistoryEvent[] = Array.from({ length: HISTORY_MAX }, (_, i) => ({
  e: 'step',
  at: now - 100_000 + i,
  step: `s${i}`,
}));

async function deadWithFullHistory(dedupKey: string): Promise<void> {
  await env.clients.doc.send(
    new PutCommand({
      TableName: env.jobsTable,
      Item: {
        dedupKey,
        status: JobStatus.Dead,
        type: 't',
        token: 2,
        attempts: 3,
        version: 9,
        leaseUntil: 0,
        history: full,
      },
    }),
  );
}
const read = async (dedupKey: string) =>
  (await env.clients.doc.send(new GetCommand({ TableName: env.jobsTable, Key: { dedupKey } })))
    .Item as JobItem;

describe('DynamoDbJobStore.resetForRedrive with a full history', () => {
  it('drops the oldest event, appends the redrive and counts the drop', async () => {
    const dedupKey = uniqueName('full');
    await deadWithFullHistory(dedupKey);
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });

    expect(await store.resetForRedrive(dedupKey, now, now, { by: 'ana@host' })).toBe(true);

    const item = await read(dedupKey);
    expect(item.status).toBe(JobStatus.RetryWait);
    expect(item.history).toHaveLength(HISTORY_MAX);
    expect(item.history?.[0]).toEqual(full[1]);
    expect(item.history?.at(-1)).toEqual({ e: 'redrive', at: now, by: 'ana@host' });
    expect(item.historyDropped).toBe(1);
  });

  it('refuses the trimmed write when a worker claimed the job between its read and its write', async () => {
    const dedupKey = uniqueName('race');
    await deadWithFullHistory(dedupKey);
    // A client that lets a worker's claim (version moves, lease live) land right after the store's read.
    const doc = env.clients.doc;
    const racing = {
      async send(command: { constructor: { name: string } }, ...rest: unknown[]) {
        const out = await (doc.send as (c: unknown, ...r: unknown[]) => Promise<unknown>)(command, ...rest);
        if (command.constructor.name === 'GetCommand') {
          await doc.send(
            new UpdateCommand({
              TableName: env.jobsTable,
              Key: { dedupKey },
              UpdateExpression: 'SET #s = :p, #l = :l, #v = #v + :one, #o = :o',
              ExpressionAttributeNames: {
                '#s': 'status',
                '#l': 'leaseUntil',
                '#v': 'version',
                '#o': 'owner',
              },
              ExpressionAttributeValues: {
                ':p': JobStatus.InProgress,
                ':l': now + 600_000,
                ':one': 1,
                ':o': 'w-1',
              },
            }),
          );
        }
        return out;
      },
    };
    const store = new DynamoDbJobStore({ client: racing as never, tableName: env.jobsTable });

    expect(await store.resetForRedrive(dedupKey, now, now, { by: 'ana@host' })).toBe(false);

    const item = await read(dedupKey);
    expect(item.status).toBe(JobStatus.InProgress);
    expect(item.owner).toBe('w-1');
    expect(item.history).toEqual(full);
  });
});
