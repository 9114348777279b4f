import {
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
} from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { versionedPut } from '../../../../shared/core/decisions/optimistic.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import type { RecordOutcome } from '../../../../shared/core/pipeline/processor.ts';
import { TransientJobError } from '../../../../shared/errors.ts';
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
  type Worker,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { freshQueues } from '../../../support/fresh-queues.ts';

// Issue 18 against the emulator's real DynamoDB conditions and SQS: a message of another type with the
// same dedupKey never takes over a job waiting for its retry (the claim's and the fast commit's
// `#type = :type`), and a bad payload is dead-lettered before any claim, so a corrected resend runs. The
// in-memory twin is test/unit/core/pipeline/dedup-collision.test.ts.

let base: CoreEnv;
let env: CoreEnv;
const ran: string[] = [];

beforeAll(async () => {
  base = await coreEnv('collision');
});
afterAll(() => base?.close());
beforeEach(async () => {
  ran.length = 0;
  env = await freshQueues(base);
});

function registry(): JobRegistry {
  const move = async (ctxAccount: string, delta: number) => {
    const row = await getBalance(env, ctxAccount);
    return versionedPut({
      tableName: env.ledgerTable,
      key: { account: ctxAccount },
      seenVersion: row?.version,
      item: { balance: (row?.balance ?? 0) + delta },
    });
  };
  // Debits in a step, then fails its first attempt before the credit (RETRY_WAIT, debit committed).
  const transfer = defineJob({
    type: 'ledger.transfer',
    payload: z.object({ from: z.string(), to: z.string(), amount: z.number().positive() }),
    async run(ctx, p) {
      ran.push(`transfer#${ctx.attempt}`);
      await ctx.step('debit', async () => ({ effects: [await move(p.from, -p.amount)] }));
      if (ctx.attempt === 1) throw new TransientJobError('credit service down');
      await ctx.step('credit', async () => ({ effects: [await move(p.to, p.amount)] }));
      return { result: 'moved' };
    },
  });
  const report = defineJob({
    type: 'report.send',
    payload: z.object({ n: z.number() }),
    async run() {
      ran.push('report');
      return { result: 'sent' };
    },
  });
  const fastReport = defineJob({
    type: 'report.fast',
    fastPath: true,
    payload: z.object({ n: z.number() }),
    async run() {
      ran.push('report.fast');
      return { result: 'sent' };
    },
  });
  return JobRegistry.of([transfer, report, fastReport]);
}

/**
 * Receives the message `messageId` (waiting until it is visible), holding it for `visibility` seconds;
 * nothing else is visible meanwhile.
 */
async function receive(messageId: string, visibility = 30): Promise<SQSRecord> {
  for (let i = 0; i < 20; i++) {
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
    if (!message) continue;
    if (message.MessageId !== messageId)
      throw new Error(`expected ${messageId}, received ${message.MessageId}`);
    return toSqsRecord(message, env.queueArn, env.region);
  }
  throw new Error(`message ${messageId} never became visible`);
}

/** Processes one record as the event source would: deleted (a batch delete) when its outcome says so. */
async function settle(worker: Worker, record: SQSRecord): Promise<RecordOutcome> {
  const outcome = await worker.processor.process(record);
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

/**
 * The transfer's first attempt: debit committed, released to RETRY_WAIT (1 s backoff). Once the give-back
 * makes its message visible again, a receive holds it for a minute (as if its redelivery were slow: a
 * message already visible cannot be hidden again by its old receipt on AWS), and the backoff is let run
 * out, so the job item is claimable by its condition. Returns the transfer's message id and the receipt
 * that holds it.
 */
async function transferWaitsForRetry(worker: Worker, key: string, from: string, to: string) {
  const id = await sendJob(env, { dedupKey: key, type: 'ledger.transfer', payload: { from, to, amount: 5 } });
  const record = await receive(id);
  expect((await settle(worker, record)).action).toBe('retry');
  const held = await receive(id, 60);
  const item = await worker.store.get(key);
  expect(item).toMatchObject({ status: JobStatus.RetryWait, type: 'ledger.transfer', attempts: 1 });
  expect(item?.checkpoint?.done).toEqual(['debit']);
  expect((await getBalance(env, from))?.balance).toBe(-5);
  await sleep(Math.max(0, (item?.leaseUntil ?? 0) - Date.now()) + 50);
  return { id, record: held };
}

/** Makes the transfer's held message visible again (it is in flight) and runs it: its own second attempt credits. */
async function transferFinishes(worker: Worker, transfer: { id: string; record: SQSRecord }) {
  await env.clients.sqs.send(
    new ChangeMessageVisibilityCommand({
      QueueUrl: env.queueUrl,
      ReceiptHandle: transfer.record.receiptHandle,
      VisibilityTimeout: 0,
    }),
  );
  return settle(worker, await receive(transfer.id));
}

async function letters() {
  return (await receiveAll(env, env.dlqUrl, 30, 1)).map((m) => readDeadLetterAttributes(m.MessageAttributes));
}

describe('Another type under the same dedupKey (emulator)', () => {
  for (const otherType of ['report.send', 'report.fast']) {
    it(`a ${otherType} message never takes over a transfer waiting for its retry; the transfer still credits`, async () => {
      const worker = makeWorker(env, registry());
      const key = uniqueName('tx');
      const [from, to] = [uniqueName('a'), uniqueName('b')];
      const transfer = await transferWaitsForRetry(worker, key, from, to);
      const before = await worker.store.get(key);

      const otherId = await sendJob(env, { dedupKey: key, type: otherType, payload: { n: 1 } });
      const other = await settle(worker, await receive(otherId));

      expect(other.action).toBe('dead-lettered');
      expect(ran.filter((r) => r.startsWith('report'))).toEqual(
        otherType === 'report.fast' ? ['report.fast'] : [],
      );
      expect(await worker.store.get(key)).toEqual(before);
      expect(await letters()).toEqual([
        expect.objectContaining({
          reason: 'dedup-key-collision',
          attempts: '0',
          dedupKey: key,
          type: otherType,
        }),
      ]);

      expect((await transferFinishes(worker, transfer)).action).toBe('completed');
      expect((await getBalance(env, from))?.balance).toBe(-5);
      expect((await getBalance(env, to))?.balance).toBe(5);
      expect(await worker.store.get(key)).toMatchObject({
        status: JobStatus.Completed,
        type: 'ledger.transfer',
      });
    }, 180_000);
  }
});

describe('A bad payload is refused before the claim (emulator)', () => {
  it('a bad-payload copy between attempts is dead-lettered and does not touch the waiting transfer', async () => {
    const worker = makeWorker(env, registry());
    const key = uniqueName('tx');
    const [from, to] = [uniqueName('a'), uniqueName('b')];
    const transfer = await transferWaitsForRetry(worker, key, from, to);
    const before = await worker.store.get(key);

    const badId = await sendJob(env, {
      dedupKey: key,
      type: 'ledger.transfer',
      payload: { from, to, amount: -5 },
    });
    expect((await settle(worker, await receive(badId))).action).toBe('dead-lettered');

    expect(await worker.store.get(key)).toEqual(before);
    expect(await letters()).toEqual([
      expect.objectContaining({
        reason: 'invalid-bad-payload',
        attempts: '0',
        dedupKey: key,
        type: 'ledger.transfer',
      }),
    ]);
    expect((await transferFinishes(worker, transfer)).action).toBe('completed');
    expect((await getBalance(env, to))?.balance).toBe(5);
  }, 180_000);

  it('leaves no job item, so a corrected resend with the same dedupKey runs', async () => {
    const worker = makeWorker(env, registry());
    const key = uniqueName('report');

    const badId = await sendJob(env, { dedupKey: key, type: 'report.send', payload: { n: 'one' } });
    expect((await settle(worker, await receive(badId))).action).toBe('dead-lettered');
    expect(await worker.store.get(key)).toBeUndefined();
    expect(ran).toEqual([]);

    const fixedId = await sendJob(env, { dedupKey: key, type: 'report.send', payload: { n: 1 } });
    expect((await settle(worker, await receive(fixedId))).action).toBe('completed');
    expect(ran).toEqual(['report']);
    expect(await worker.store.get(key)).toMatchObject({ status: JobStatus.Completed, attempts: 1 });
  }, 180_000);
});
