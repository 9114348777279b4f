import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { DEFAULT_MAX_BODY_BYTES, makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobProducer } from '../../../../shared/producer/job-producer.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  getBalance,
  makeWorker,
  receiveAll,
  sendRaw,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { testRegistry } from '../../../support/test-jobs.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('bigbody');
});
afterAll(() => env?.close());

/** Polls until the job of `dedupKey` is no longer pending (or 60 s pass). */
async function drain(worker: ReturnType<typeof makeWorker>, done: () => Promise<boolean>) {
  return eventually(
    async () => {
      await worker.poll(1);
      return done();
    },
    60_000,
    0,
  );
}

describe('Bodies up to the queue limit', () => {
  it('runs a 300 KB and a 900 KB body sent by the producer with the default limits', async () => {
    // Prepare: a worker with every default body setting; two jobs over the old 256 KiB limit.
    const { registry } = testRegistry(env);
    const worker = makeWorker(env, registry);
    const producer = new JobProducer({ queueUrl: env.queueUrl, client: env.clients.sqs, jobs: registry });
    const account = uniqueName('acct');
    const keys = [uniqueName('k300'), uniqueName('k900'), uniqueName('kraw')];
    // Sent by another client (the body as it is): the worker's own limit decides.
    await sendRaw(
      env,
      JSON.stringify(
        makeEnvelope({
          id: 'raw',
          dedupKey: keys[2] ?? '',
          type: 'test.credit',
          payload: { account, amount: 4, pad: 'w'.repeat(900_000) },
        }),
      ),
    );
    await producer.send(
      {
        type: 'test.credit',
        dedupKey: keys[0] ?? '',
        payload: { account, amount: 1, pad: 'x'.repeat(300_000) },
      },
      {
        type: 'test.credit',
        dedupKey: keys[1] ?? '',
        payload: { account, amount: 2, pad: 'y'.repeat(900_000) },
      },
    );

    // Act
    const done = await drain(worker, async () => {
      const items = await Promise.all(keys.map((k) => worker.store.get(k)));
      return items.every((i) => i?.status === JobStatus.Completed);
    });

    // Assess: both ran once, nothing was dead-lettered.
    expect(done).toBe(true);
    expect((await getBalance(env, account))?.balance).toBe(7);
    expect(await receiveAll(env, env.dlqUrl, 10, 1)).toEqual([]);
  }, 120_000);

  it('dead-letters a failing job whose body is at the limit with its body and reason intact', async () => {
    // Prepare: the largest body the producer sends, for a job that fails permanently.
    const { registry } = testRegistry(env);
    const worker = makeWorker(env, registry);
    const producer = new JobProducer({ queueUrl: env.queueUrl, client: env.clients.sqs, jobs: registry });
    const dedupKey = uniqueName('kmax');
    const payload = { account: uniqueName('acct'), amount: 1, permanent: true, pad: '' };
    const base = Buffer.byteLength(
      JSON.stringify(producer.envelope({ type: 'test.credit', dedupKey, payload })),
    );
    payload.pad = 'z'.repeat(DEFAULT_MAX_BODY_BYTES - base);
    const [sent] = await producer.send({ type: 'test.credit', dedupKey, payload });

    // Act
    const done = await drain(
      worker,
      async () => (await worker.store.get(dedupKey))?.status === JobStatus.Dead,
    );

    // Assess: the letter holds the whole body and its reason attributes.
    expect(done).toBe(true);
    const letters = await receiveAll(env, env.dlqUrl, 10, 2);
    expect(letters).toHaveLength(1);
    const letter = letters[0];
    expect(Buffer.byteLength(letter?.Body ?? '')).toBe(DEFAULT_MAX_BODY_BYTES);
    const attributes = readDeadLetterAttributes(letter?.MessageAttributes);
    expect(attributes.reason).toBe('permanent-error');
    expect(attributes.originalMessageId).toBe(sent?.messageId);
  }, 120_000);
});
