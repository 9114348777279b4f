// A payload refused before the claim (its schema, its claim-check object) when the job item waits for
// exactly that message (issue 31 item 2): against the emulator's SQS, DynamoDB and S3. A refused copy
// of a job that another message guards keeps its attempts-0 letter and leaves the item alone
// (dedup-collision.test.ts, "A bad payload is refused before the claim"); the job's own message must
// instead end the job DEAD with the refusal's reason, or the job waits for a message that is gone.
import { createHash, randomUUID } from 'node:crypto';
import { CreateBucketCommand, DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { DeleteMessageBatchCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { S3PayloadStore } from '../../../../shared/core/adapters/s3-payload-store.ts';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import type { RecordOutcome } from '../../../../shared/core/pipeline/processor.ts';
import { PermanentJobError, TransientJobError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { listDeadJobs } from '../../../../shared/ops/dlq-jobs.ts';
import { redrive } from '../../../../shared/ops/dlq-redrive.ts';
import type { OpsTarget } from '../../../../shared/ops/target.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  receiveAll,
  sendJob,
  sendRaw,
  sleep,
  type Worker,
} from '../../../support/core-fixture.ts';
import { testCredentials, testEndpointOf, uniqueName } from '../../../support/env.ts';

const TYPE = 'report.refusal';
const PREFIX = 'big/';

let env: CoreEnv;
let target: OpsTarget;
let s3: S3Client;
let bucket: string;

beforeAll(async () => {
  env = await coreEnv('refusal');
  target = {
    clients: env.clients,
    names: {
      queueUrl: env.queueUrl,
      dlqUrl: env.dlqUrl,
      jobsTable: env.jobsTable,
      leasesTable: env.leasesTable,
    },
  };
  s3 = new S3Client({
    region: env.region,
    endpoint: testEndpointOf('s3'),
    forcePathStyle: true,
    credentials: testCredentials(),
  });
  bucket = uniqueName('refusal').toLowerCase().replace(/_/g, '-');
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
});
afterAll(() => {
  env?.close();
  s3?.destroy();
});

/**
 * The job type as one deploy has it: `n` a number, and the run fails transiently on the first attempt
 * (`fail: 'once'`) or permanently (`fail: 'always'`); `strict`, the next deploy's schema: `n` at least 10.
 */
function worker(strict: boolean, name: string): Worker {
  const report = defineJob({
    type: TYPE,
    payload: z.object({
      n: strict ? z.number().min(10) : z.number(),
      fail: z.enum(['once', 'always']).optional(),
    }),
    async run(ctx, p) {
      if (p.fail === 'always') throw new PermanentJobError('this report can never be sent');
      if (p.fail === 'once' && ctx.attempt === 1) throw new TransientJobError('mail server busy');
      return { result: 'sent' };
    },
  });
  return makeWorker(env, JobRegistry.of([report]), {
    worker: name,
    payloads: new S3PayloadStore({ bucket, client: s3, keyPrefix: PREFIX }),
  });
}

/** Receives the message `messageId` (waiting until it is visible); other messages are given back. */
async function receive(messageId: string): Promise<SQSRecord> {
  for (let i = 0; i < 30; i++) {
    const out = await env.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: env.queueUrl,
        MaxNumberOfMessages: 1,
        WaitTimeSeconds: 1,
        VisibilityTimeout: 30,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    const message = out.Messages?.[0];
    if (!message) continue;
    if (message.MessageId !== messageId) {
      throw new Error(`expected ${messageId}, received ${message.MessageId}`);
    }
    return toSqsRecord(message, env.queueArn, env.region);
  }
  throw new Error(`message ${messageId} never became visible`);
}

/** Processes one record as the event source would: deleted (a batch delete) when its outcome says so. */
async function settle(w: Worker, record: SQSRecord): Promise<RecordOutcome> {
  const outcome = await w.processor.process(record);
  if (outcome.disposition === 'delete') {
    await env.clients.sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: env.queueUrl,
        Entries: [{ Id: '0', ReceiptHandle: record.receiptHandle }],
      }),
    );
  }
  return outcome;
}

/** The letters of `dedupKey` in the DLQ (received with no visibility: they stay where they are). */
async function lettersOf(dedupKey: string) {
  const seen = new Map<string, ReturnType<typeof readDeadLetterAttributes>>();
  for (const m of await receiveAll(env, env.dlqUrl, 0, 1)) {
    const attributes = readDeadLetterAttributes(m.MessageAttributes);
    if (attributes.dedupKey === dedupKey) seen.set(m.MessageId ?? '', attributes);
  }
  return [...seen.values()];
}

/** Whether `leaseq dlq list` (the DEAD items of the problems index, eventually consistent) has the job. */
async function listedDead(dedupKey: string, reason: string): Promise<boolean> {
  return eventually(async () => {
    const { jobs } = await listDeadJobs(target, { limit: 100 });
    return jobs.some((j) => j.dedupKey === dedupKey && j.reason === reason);
  }, 20_000);
}

/** The job's first attempt fails transiently: RETRY_WAIT under its message; returns once it is due. */
async function waitsForRetry(w: Worker, dedupKey: string): Promise<{ id: string; item: JobItem }> {
  const id = await sendJob(env, { dedupKey, type: TYPE, payload: { n: 1, fail: 'once' } });
  expect((await settle(w, await receive(id))).action).toBe('retry');
  const item = await w.store.get(dedupKey);
  expect(item).toMatchObject({ status: JobStatus.RetryWait, messageId: id, attempts: 1 });
  await sleep(Math.max(0, (item?.leaseUntil ?? 0) - Date.now()) + 50);
  return { id, item: item as JobItem };
}

/** Asserts the job ended DEAD for `reason`, with a letter for it, listed by `dlq list`. */
async function assertDeadFor(w: Worker, dedupKey: string, reason: string, messageId: string) {
  const item = await w.store.get(dedupKey);
  expect(item).toMatchObject({ status: JobStatus.Dead, deadReason: reason });
  expect(item?.owner).toBeUndefined();
  expect(item?.history?.at(-1)).toMatchObject({ e: 'dead', reason });
  expect(await lettersOf(dedupKey)).toEqual([
    expect.objectContaining({ reason, dedupKey, type: TYPE, originalMessageId: messageId }),
  ]);
  expect(await listedDead(dedupKey, reason)).toBe(true);
}

describe("A refused payload of the job's own message (issue 31 item 2)", () => {
  it('a stricter schema deployed while the job waits for its retry: the job ends DEAD, invalid-bad-payload', async () => {
    // Prepare: the old deploy's attempt fails once; the job waits in RETRY_WAIT for its message.
    const key = uniqueName('stricter');
    const { id } = await waitsForRetry(worker(false, 'w-old'), key);

    // Act: the new deploy's worker receives the job's message; its schema refuses the payload.
    const strict = worker(true, 'w-new');
    const outcome = await settle(strict, await receive(id));

    // Assess: dead-lettered with its reason, the item DEAD (not left waiting), listed as dead.
    expect(outcome.action).toBe('dead-lettered');
    await assertDeadFor(strict, key, 'invalid-bad-payload', id);
  }, 180_000);

  it('a job whose holder died (lease ended, IN_PROGRESS): its message refused takes it over and ends it DEAD', async () => {
    // Prepare: the message claimed by a worker that died at once (a 1 s lease left to run out).
    const key = uniqueName('taken');
    const id = await sendJob(env, { dedupKey: key, type: TYPE, payload: { n: 1 } });
    const record = await receive(id);
    const strict = worker(true, 'w-new');
    const held = await strict.store.claim({
      dedupKey: key,
      owner: 'w-died',
      messageId: id,
      type: TYPE,
      createdAt: new Date().toISOString(),
      leaseMs: 1000,
      now: Date.now(),
    });
    expect(held.claimed).toBe(true);
    await sleep(1100);

    // Act
    const outcome = await settle(strict, record);

    // Assess
    expect(outcome.action).toBe('dead-lettered');
    await assertDeadFor(strict, key, 'invalid-bad-payload', id);
  }, 180_000);

  it('its own message back while a live lease holds the job: hidden until the lease ends, nothing lettered', async () => {
    // Prepare: an old-deploy worker holds the job (a minute's lease); its message shows again early.
    const key = uniqueName('held');
    const id = await sendJob(env, { dedupKey: key, type: TYPE, payload: { n: 1 } });
    const record = await receive(id);
    const strict = worker(true, 'w-new');
    const held = await strict.store.claim({
      dedupKey: key,
      owner: 'w-old',
      messageId: id,
      type: TYPE,
      createdAt: new Date().toISOString(),
      leaseMs: 60_000,
      now: Date.now(),
    });
    expect(held.claimed).toBe(true);
    const before = await strict.store.get(key);

    // Act
    const outcome = await settle(strict, record);

    // Assess: the holder's guard is kept (hidden), the job and the DLQ untouched.
    expect(outcome.action).toBe('own-message-early');
    expect(outcome.disposition).toBe('retain');
    expect(await strict.store.get(key)).toEqual(before);
    expect(await lettersOf(key)).toEqual([]);
  }, 180_000);

  it('a redrive whose claim-checked payload expired meanwhile: the redriven job ends DEAD, invalid-payload-missing', async () => {
    // Prepare: a job whose payload is in the bucket dies for good (permanent error), letter in the DLQ.
    const w = worker(false, 'w-old');
    const key = uniqueName('expired');
    const text = JSON.stringify({ n: 1, fail: 'always' });
    const objectKey = `${PREFIX}${new Date().toISOString().slice(0, 10)}/${randomUUID()}.json`;
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: objectKey, Body: text }));
    const { payload: _none, ...pointer } = makeEnvelope({
      id: key,
      dedupKey: key,
      type: TYPE,
      payload: null,
    });
    const ref = {
      bucket,
      key: objectKey,
      bytes: Buffer.byteLength(text),
      sha256: createHash('sha256').update(text).digest('hex'),
    };
    const id = await sendRaw(env, JSON.stringify({ ...pointer, payloadRef: ref }));
    expect((await settle(w, await receive(id))).action).toBe('dead-lettered');
    expect((await w.store.get(key))?.status).toBe(JobStatus.Dead);
    // The bucket's lifecycle rule removes the object before anyone redrives the job.
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: objectKey }));
    const report = await redrive(target, { filter: { dedupKey: key }, by: 'ops@test' });
    expect(report).toMatchObject({ redriven: 1 });
    expect((await w.store.get(key))?.status).toBe(JobStatus.RetryWait);
    const sent = report.items[0]?.newMessageId ?? '';

    // Act: the redriven message; its payload can no longer be read.
    const outcome = await settle(w, await receive(sent));

    // Assess
    expect(outcome.action).toBe('dead-lettered');
    await assertDeadFor(w, key, 'invalid-payload-missing', sent);
  }, 180_000);

  it('an edit-and-retry whose corrected payload fails the schema: the redriven job ends DEAD, invalid-bad-payload', async () => {
    // Prepare: the job dies for good; the operator redrives it with a payload the schema refuses.
    const w = worker(false, 'w-old');
    const key = uniqueName('edited');
    const id = await sendJob(env, { dedupKey: key, type: TYPE, payload: { n: 1, fail: 'always' } });
    expect((await settle(w, await receive(id))).action).toBe('dead-lettered');
    const report = await redrive(target, {
      filter: { dedupKey: key },
      by: 'ops@test',
      payload: { value: { n: 'one' } },
    });
    expect(report).toMatchObject({ redriven: 1 });
    const sent = report.items[0]?.newMessageId ?? '';

    // Act
    const outcome = await settle(w, await receive(sent));

    // Assess
    expect(outcome.action).toBe('dead-lettered');
    await assertDeadFor(w, key, 'invalid-bad-payload', sent);
  }, 180_000);
});
