// Where E13 (a job refused before its claim, refused-job.ts) meets the other features: a cancelled job,
// a limit's re-send, a lost claim answer, two deliveries of one message, a store outage on its read,
// and the cost of the happy path. Against the emulator's SQS and DynamoDB.
import { DeleteMessageBatchCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FaultInjector } from '../../../../shared/aws/fault-injector.ts';
import { RequestCounter } from '../../../../shared/aws/request-counter.ts';
import { readDeadLetterAttributes, SqsJobQueue } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { JobLog } from '../../../../shared/core/observe/job-log.ts';
import type { RecordOutcome } from '../../../../shared/core/pipeline/processor.ts';
import { RecordMessage } from '../../../../shared/core/pipeline/record-message.ts';
import { PermanentJobError, TransientJobError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { cancelJob } from '../../../../shared/ops/cancel.ts';
import { redrive } from '../../../../shared/ops/dlq-redrive.ts';
import type { OpsTarget } from '../../../../shared/ops/target.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import {
  type CoreEnv,
  coreEnv,
  makeWorker,
  quietLogger,
  receiveAll,
  sendJob,
  sleep,
  type Worker,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

const TYPE = 'report.meets';
const DEAD_KEY_TYPE = 'report.meets.deadkey';
const FAST_TYPE = 'report.meets.fast';

let env: CoreEnv;
let target: OpsTarget;
let faults: FaultInjector;
let counter: RequestCounter;

beforeAll(async () => {
  env = await coreEnv('meets');
  target = {
    clients: env.clients,
    names: {
      queueUrl: env.queueUrl,
      dlqUrl: env.dlqUrl,
      jobsTable: env.jobsTable,
      leasesTable: env.leasesTable,
    },
  };
  faults = new FaultInjector().attach(env.clients);
  counter = new RequestCounter().attach(env.clients);
});
afterEach(() => faults.clear());
afterAll(() => env?.close());

/** The job type as one deploy has it (`strict`: the next deploy's schema, `n` at least 10). */
function worker(strict: boolean, name: string): Worker {
  const report = defineJob({
    type: TYPE,
    payload: z.object({ n: strict ? z.number().min(10) : z.number(), fail: z.literal('once').optional() }),
    async run(ctx, p) {
      if (p.fail === 'once' && ctx.attempt === 1) throw new TransientJobError('mail server busy');
      return { result: 'sent' };
    },
  });
  return makeWorker(env, JobRegistry.of([report]), { worker: name });
}

/** A fast-path type (E12): `strict` as in {@link worker}. */
function fastWorker(strict: boolean, name: string): Worker {
  const report = defineJob({
    type: FAST_TYPE,
    fastPath: true,
    payload: z.object({ n: strict ? z.number().min(10) : z.number() }),
    async run() {
      return { result: 'sent' };
    },
  });
  return makeWorker(env, JobRegistry.of([report]), { worker: name });
}

/** A type whose dead key a fresh send resets after 1 s (deadKeyTtl); `fail: 'always'` dies at once. */
function deadKeyWorker(strict: boolean, name: string): Worker {
  const report = defineJob({
    type: DEAD_KEY_TYPE,
    deadKeyTtl: 1,
    payload: z.object({ n: strict ? z.number().min(10) : z.number(), fail: z.literal('always').optional() }),
    async run(_ctx, p) {
      if (p.fail === 'always') throw new PermanentJobError('this report can never be sent');
      return { result: 'sent' };
    },
  });
  return makeWorker(env, JobRegistry.of([report]), { worker: name });
}

/** Receives the next message of the queue (the tests keep one at a time in it). */
async function receiveNext(visibility = 30): Promise<SQSRecord> {
  const record = await receiveNextIfAny(visibility, 30);
  if (!record) throw new Error('no message became visible');
  return record;
}

/** The next message, or undefined when none shows within `rounds` 1 s long polls. */
async function receiveNextIfAny(visibility = 30, rounds = 30): Promise<SQSRecord | undefined> {
  for (let i = 0; i < rounds; i++) {
    const out = await env.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: env.queueUrl,
        MaxNumberOfMessages: 1,
        WaitTimeSeconds: 1,
        VisibilityTimeout: visibility,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    const message = out.Messages?.[0];
    if (message) return toSqsRecord(message, env.queueArn, env.region);
  }
  return undefined;
}

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

async function lettersOf(dedupKey: string) {
  const seen = new Map<string, ReturnType<typeof readDeadLetterAttributes>>();
  for (const m of await receiveAll(env, env.dlqUrl, 0, 1)) {
    const attributes = readDeadLetterAttributes(m.MessageAttributes);
    if (attributes.dedupKey === dedupKey) seen.set(m.MessageId ?? '', attributes);
  }
  return [...seen.values()];
}

/** The job's first attempt fails: RETRY_WAIT under its message; returns once the retry is due. */
async function waitsForRetry(w: Worker, dedupKey: string, record?: SQSRecord): Promise<JobItem> {
  const first = record ?? (await receiveNext());
  expect((await settle(w, first)).action).toBe('retry');
  const item = (await w.store.get(dedupKey)) as JobItem;
  expect(item).toMatchObject({ status: JobStatus.RetryWait, messageId: first.messageId, attempts: 1 });
  await sleep(Math.max(0, item.leaseUntil - Date.now()) + 50);
  return item;
}

/** What a limit's bounce does to a message (limit-bounce.ts): the body sent again, this one deleted. */
async function resendAsBounce(record: SQSRecord): Promise<void> {
  const queue = new SqsJobQueue({
    client: env.clients.sqs,
    queueUrl: env.queueUrl,
    deadLetterQueueUrl: env.dlqUrl,
  });
  const message = new RecordMessage(queue, record, new JobLog(quietLogger(), {}));
  expect(await message.resend(0)).toBe(true);
}

async function assertDead(w: Worker, dedupKey: string, reason: string) {
  expect(await w.store.get(dedupKey)).toMatchObject({ status: JobStatus.Dead, deadReason: reason });
}

describe('A refused own message where E13 meets the other features', () => {
  it("a cancelled job's own message refused by a stricter schema: the job stays CANCELLED", async () => {
    const key = uniqueName('cancelled');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { n: 1, fail: 'once' } });
    await waitsForRetry(worker(false, 'w-old'), key);
    expect((await cancelJob(target, key, { by: 'ops@test' })).outcome).toBeDefined();

    const outcome = await settle(worker(true, 'w-new'), await receiveNext());

    // Dropped as the claim drops a cancelled job's copy: no DEAD, and no letter to skip on every redrive.
    expect(outcome).toMatchObject({ action: 'cancelled-copy', disposition: 'delete' });
    expect((await worker(true, 'w-new').store.get(key))?.status).toBe(JobStatus.Cancelled);
    expect(await lettersOf(key)).toEqual([]);
  }, 120_000);

  it('a message a limit re-sent, claimed, failed and re-sent again, then refused: the job ends DEAD', async () => {
    // The item names the re-sent message that claimed it (M2); the refused one (M3) is M2 re-sent.
    // Whatever attribute a re-send carries, the refusal must know M3 as the job's own message.
    const key = uniqueName('resent');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { n: 1, fail: 'once' } });
    await resendAsBounce(await receiveNext());
    await waitsForRetry(worker(false, 'w-old'), key);
    await resendAsBounce(await receiveNext());

    const strict = worker(true, 'w-new');
    const outcome = await settle(strict, await receiveNext());

    expect(outcome.action).toBe('dead-lettered');
    await assertDead(strict, key, 'invalid-bad-payload');
  }, 120_000);

  it("the E13 claim's answer lost (the write landed): the retry knows its own claim, the job ends DEAD", async () => {
    const key = uniqueName('lost');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { n: 1, fail: 'once' } });
    await waitsForRetry(worker(false, 'w-old'), key);
    const record = await receiveNext();
    const strict = worker(true, 'w-new');
    faults.fail({ service: 'DynamoDB', command: 'UpdateItem', times: 1, when: 'after' });

    const outcome = await settle(strict, record);

    expect(faults.injected.get('DynamoDB.UpdateItem')).toBe(1);
    expect(outcome.action).toBe('dead-lettered');
    await assertDead(strict, key, 'invalid-bad-payload');
    expect(await lettersOf(key)).toHaveLength(1);
  }, 120_000);

  it('the read on refusal under a store outage: the message comes back, no letter, the item as it was', async () => {
    const key = uniqueName('outage');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { n: 1, fail: 'once' } });
    const before = await waitsForRetry(worker(false, 'w-old'), key);
    const record = await receiveNext();
    const strict = worker(true, 'w-new');
    faults.fail({ service: 'DynamoDB', command: 'GetItem' });

    const outcome = await settle(strict, record);
    faults.clear();

    expect(outcome).toMatchObject({ action: 'store-unavailable', disposition: 'retain' });
    expect(await lettersOf(key)).toEqual([]);
    expect(await strict.store.get(key)).toEqual(before);
    // Back after its backoff, it is judged again: the job ends DEAD.
    expect((await settle(strict, await receiveNext())).action).toBe('dead-lettered');
    await assertDead(strict, key, 'invalid-bad-payload');
  }, 120_000);

  it('two deliveries of one refused message at once: one DEAD item, one letter', async () => {
    const key = uniqueName('twice');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { n: 1, fail: 'once' } });
    await waitsForRetry(worker(false, 'w-old'), key);
    // SQS hands one message out twice (its visibility ran out): two records of one message id.
    const first = await receiveNext(1);
    await sleep(1200);
    const second = await receiveNext(30);
    expect(second.messageId).toBe(first.messageId);

    const [a, b] = [worker(true, 'w-a'), worker(true, 'w-b')];
    const outcomes = await Promise.all([settle(a, first), settle(b, second)]);
    // One hid its copy behind the other's lease: it comes back once the job is DEAD, unless the other's
    // delete by the older receipt took the message (SQS: such a delete succeeds, and the message "might"
    // be deleted; moto deletes it, MiniStack refuses the receipt). The hide lasts the 3 s lease.
    for (const o of outcomes) {
      if (o.disposition !== 'retain') continue;
      const back = await receiveNextIfAny(30, 10);
      if (back) await settle(a, back);
    }

    await assertDead(a, key, 'invalid-bad-payload');
    expect(await lettersOf(key)).toHaveLength(1);
  }, 120_000);

  it("a dead job's own message back after its deadKeyUntil, refused: dropped, the death keeps one letter", async () => {
    // The dead-lettering's delete is lost (not deleted here): the message shows again once the key's
    // deadKeyTtl passed, and the next deploy's schema refuses it.
    const key = uniqueName('deadown');
    await sendJob(env, { dedupKey: key, type: DEAD_KEY_TYPE, payload: { n: 1, fail: 'always' } });
    const first = await receiveNext(2);
    faults.fail({ service: 'SQS', command: 'DeleteMessage' });
    expect((await deadKeyWorker(false, 'w-old').processor.process(first)).action).toBe('dead-lettered');
    faults.clear();
    await sleep(2200);
    const strict = deadKeyWorker(true, 'w-new');

    const outcome = await settle(strict, await receiveNext());

    expect(outcome).toMatchObject({ action: 'dead-copy', disposition: 'delete' });
    expect(await strict.store.get(key)).toMatchObject({
      status: JobStatus.Dead,
      deadReason: 'permanent-error',
    });
    expect(await lettersOf(key)).toEqual([expect.objectContaining({ reason: 'permanent-error' })]);
  }, 120_000);

  it("a fresh send refused after the dead key's deadKeyUntil: its own letter (attempts 0), the death untouched", async () => {
    const key = uniqueName('deadfresh');
    await sendJob(env, { dedupKey: key, type: DEAD_KEY_TYPE, payload: { n: 1, fail: 'always' } });
    expect((await settle(deadKeyWorker(false, 'w-old'), await receiveNext())).action).toBe('dead-lettered');
    await sleep(1100);
    const strict = deadKeyWorker(true, 'w-new');
    const fresh = await sendJob(env, { dedupKey: key, type: DEAD_KEY_TYPE, payload: { n: 2 } });

    const outcome = await settle(strict, await receiveNext());

    expect(outcome.action).toBe('dead-lettered');
    expect(await strict.store.get(key)).toMatchObject({
      status: JobStatus.Dead,
      deadReason: 'permanent-error',
    });
    const letters = await lettersOf(key);
    expect(letters).toHaveLength(2);
    expect(letters).toContainEqual(
      expect.objectContaining({ reason: 'invalid-bad-payload', attempts: '0', originalMessageId: fresh }),
    );
  }, 120_000);

  it("a fast job's only message refused: no item to mark, its letter (attempts 0) is redriven and runs", async () => {
    const key = uniqueName('fast');
    const id = await sendJob(env, { dedupKey: key, type: FAST_TYPE, payload: { n: 1 } });

    const outcome = await settle(fastWorker(true, 'w-new'), await receiveNext());

    expect(outcome).toMatchObject({ action: 'dead-lettered', disposition: 'delete' });
    const w = fastWorker(false, 'w-fixed');
    expect(await w.store.get(key)).toBeUndefined();
    expect(await lettersOf(key)).toEqual([
      expect.objectContaining({ reason: 'invalid-bad-payload', attempts: '0', originalMessageId: id }),
    ]);
    // The schema fixed (the next deploy), the operator's redrive sends the letter and the job runs.
    expect(await redrive(target, { filter: { dedupKey: key }, by: 'ops@test' })).toMatchObject({
      redriven: 1,
    });
    expect((await settle(w, await receiveNext())).action).toBe('completed');
    expect((await w.store.get(key))?.status).toBe(JobStatus.Completed);
  }, 120_000);

  it('a fast job that succeeds first time costs its one write and its delete, no read', async () => {
    const key = uniqueName('fasthappy');
    const w = fastWorker(false, 'w-fast');
    await sendJob(env, { dedupKey: key, type: FAST_TYPE, payload: { n: 1 } });
    const record = await receiveNext();
    counter.reset();

    expect((await settle(w, record)).action).toBe('completed');

    expect(counter.snapshot()).toEqual({ 'DynamoDB.UpdateItem': 1, 'SQS.DeleteMessageBatch': 1 });
  }, 120_000);

  it('a job that succeeds first time pays no read for E13: one claim, one commit, one delete', async () => {
    const key = uniqueName('happy');
    const w = worker(false, 'w-happy');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { n: 1 } });
    const record = await receiveNext();
    counter.reset();

    expect((await settle(w, record)).action).toBe('completed');

    expect(counter.snapshot()).toEqual({ 'DynamoDB.UpdateItem': 2, 'SQS.DeleteMessageBatch': 1 });
  }, 120_000);
});
