import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3PayloadStore } from '../../../../shared/core/adapters/s3-payload-store.ts';
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
import { testCredentials, testEndpointOf, uniqueName } from '../../../support/env.ts';
import { testRegistry } from '../../../support/test-jobs.ts';

let env: CoreEnv;
let s3: S3Client;
let bucket: string;
/** A key the producer could have written, that nobody put (as after the lifecycle rule expired it). */
const GONE_KEY = 'big/2020-01-01/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f10.json';

beforeAll(async () => {
  env = await coreEnv('bigbody');
  // The emulator's S3 (local up --all-services), addressed by path as the store's own client does.
  s3 = new S3Client({
    region: env.region,
    endpoint: testEndpointOf('s3'),
    forcePathStyle: true,
    credentials: testCredentials(),
  });
  bucket = uniqueName('payloads').toLowerCase().replace(/_/g, '-');
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
});
afterAll(() => {
  env?.close();
  s3?.destroy();
});

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
  }, 180_000);

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
  }, 180_000);
});

describe('Claim check: bodies over the limit (issue 20 item 5)', () => {
  it('runs a 2 MB payload: producer puts it into the bucket, the queue carries a pointer, the worker reads it', async () => {
    // Prepare: producer and worker on the same bucket.
    const { registry } = testRegistry(env);
    const worker = makeWorker(env, registry, {
      payloads: new S3PayloadStore({ bucket, client: s3, keyPrefix: 'big/' }),
    });
    const producer = new JobProducer({
      queueUrl: env.queueUrl,
      client: env.clients.sqs,
      jobs: registry,
      largePayloads: { bucket, client: s3, keyPrefix: 'big/' },
    });
    const account = uniqueName('acct');
    const dedupKey = uniqueName('k2mb');
    const pad = 'p'.repeat(2_000_000);

    // Act
    const [sent] = await producer.send({
      type: 'test.credit',
      dedupKey,
      payload: { account, amount: 5, pad },
    });
    const done = await drain(
      worker,
      async () => (await worker.store.get(dedupKey))?.status === JobStatus.Completed,
    );

    // Assess: the effect happened once; the object is kept (the lifecycle rule expires it), holding the payload.
    expect(sent?.messageId).toBeTruthy();
    expect(done).toBe(true);
    expect((await getBalance(env, account))?.balance).toBe(5);
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'big/' }));
    expect(listed.Contents).toHaveLength(1);
    const object = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: listed.Contents?.[0]?.Key }));
    expect(JSON.parse((await object.Body?.transformToString()) ?? '')).toEqual({ account, amount: 5, pad });
  }, 180_000);

  it('dead-letters a pointer whose object is gone, naming it, without retrying', async () => {
    // Prepare: a pointer envelope to a key nobody put (as after the lifecycle rule expired it).
    const { registry } = testRegistry(env);
    const worker = makeWorker(env, registry, {
      payloads: new S3PayloadStore({ bucket, client: s3, keyPrefix: 'big/' }),
    });
    const dedupKey = uniqueName('kgone');
    const { payload: _none, ...pointer } = makeEnvelope({
      id: 'gone',
      dedupKey,
      type: 'test.credit',
      payload: null,
    });
    const id = await sendRaw(
      env,
      JSON.stringify({ ...pointer, payloadRef: { bucket, key: GONE_KEY, bytes: 9, sha256: '0'.repeat(64) } }),
    );

    // Act
    const letters = await (async () => {
      for (let i = 0; i < 30; i++) {
        await worker.poll(1);
        const got = await receiveAll(env, env.dlqUrl, 10, 1);
        if (got.length > 0) return got;
      }
      return [];
    })();

    // Assess: one letter, reason and message naming the object; no job item was written.
    expect(letters).toHaveLength(1);
    const attributes = readDeadLetterAttributes(letters[0]?.MessageAttributes);
    expect(attributes.originalMessageId).toBe(id);
    expect(attributes.reason).toBe('invalid-payload-missing');
    expect(attributes.errorMessage).toMatch(
      new RegExp(`s3://${bucket}/big/2020-01-01/.*\\.json does not exist`),
    );
    expect(await worker.store.get(dedupKey)).toBeUndefined();
  }, 180_000);
});
