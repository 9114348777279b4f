import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import {
  type CoreEnv,
  coreEnv,
  getBalance,
  makeWorker,
  receiveAll,
  sendJob,
  sleep,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('par');
});
afterAll(() => env?.close());

describe('Parallel ctx.step (real job table)', () => {
  it('two steps in Promise.all both commit in the first attempt, on the version the other wrote', async () => {
    // Prepare: each step writes its own ledger row with its checkpoint; they build at the same time.
    const dedupKey = uniqueName('job');
    const [a, b] = [uniqueName('a'), uniqueName('b')];
    const row = (account: string, balance: number) => ({
      Put: { TableName: env.ledgerTable, Item: { account, balance, version: 1 } },
    });
    const parallel = defineJob({
      type: 'test.parallel',
      payload: z.object({}),
      async run(ctx) {
        await Promise.all([
          ctx.step('a', async () => {
            await sleep(50);
            return { effects: [row(a, 1)], data: 'A' };
          }),
          ctx.step('b', async () => {
            await sleep(50);
            return { effects: [row(b, 2)], data: 'B' };
          }),
        ]);
      },
    });
    const worker = makeWorker(env, JobRegistry.of([parallel]));
    await sendJob(env, { dedupKey, type: 'test.parallel', payload: {} });
    const [message] = await receiveAll(env, env.queueUrl, 30);
    if (!message) throw new Error('no message');

    // Act
    const outcome = await worker.processor.process(toSqsRecord(message, env.queueArn, env.region));

    // Assess
    expect(outcome.action).toBe('completed');
    const item = await worker.store.get(dedupKey);
    expect(item?.status).toBe(JobStatus.Completed);
    expect(item?.attempts).toBe(1);
    expect([...(item?.checkpoint?.done ?? [])].sort()).toEqual(['a', 'b']);
    expect(item?.checkpoint?.data).toEqual({ a: 'A', b: 'B' });
    expect((await getBalance(env, a))?.balance).toBe(1);
    expect((await getBalance(env, b))?.balance).toBe(2);
  });
});
