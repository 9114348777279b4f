import { DeleteMessageBatchCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { versionedPut } from '../../../../shared/core/decisions/optimistic.ts';
import { type PayloadMismatch, payloadHash } from '../../../../shared/core/decisions/payload-hash.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import type { RecordOutcome } from '../../../../shared/core/pipeline/processor.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import {
  type CoreEnv,
  coreEnv,
  getBalance,
  makeWorker,
  receiveAll,
  sendJob,
  type Worker,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { freshQueues } from '../../../support/fresh-queues.ts';

// Issue 34, item 3, against the emulator's real DynamoDB conditions and SQS: a message whose dedupKey
// names a completed job with another payload is dead-lettered `payload-mismatch` (both hashes on the
// letter and in the job's history), the job's effect applied once; `copy` drops it as before, `new-job`
// runs it as a new job of the key. The in-memory twin is test/unit/core/pipeline/payload-mismatch.test.ts.

let base: CoreEnv;
let env: CoreEnv;

beforeAll(async () => {
  base = await coreEnv('mismatch');
});
afterAll(() => base?.close());
beforeEach(async () => {
  env = await freshQueues(base);
});

function registry(): JobRegistry {
  const job = (type: string, policy: PayloadMismatch) =>
    defineJob({
      type,
      payload: z.object({ account: z.string(), amount: z.number() }),
      onPayloadMismatch: policy,
      async run(_ctx, p) {
        const row = await getBalance(env, p.account);
        const credit = versionedPut({
          tableName: env.ledgerTable,
          key: { account: p.account },
          seenVersion: row?.version,
          item: { balance: (row?.balance ?? 0) + p.amount },
        });
        return { effects: [credit], result: 'paid' };
      },
    });
  return JobRegistry.of([
    job('order.letter', 'dead-letter'),
    job('order.copy', 'copy'),
    job('order.renew', 'new-job'),
  ]);
}

async function receive(messageId: string): Promise<SQSRecord> {
  for (let i = 0; i < 20; i++) {
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
    if (message.MessageId !== messageId)
      throw new Error(`expected ${messageId}, received ${message.MessageId}`);
    return toSqsRecord(message, env.queueArn, env.region);
  }
  throw new Error(`message ${messageId} never became visible`);
}

/** Sends the job and processes its message as the event source would (deleted when its outcome says so). */
async function sendAndRun(worker: Worker, job: { dedupKey: string; type: string; payload: unknown }) {
  const id = await sendJob(env, job);
  const record = await receive(id);
  const outcome: RecordOutcome = await worker.processor.process(record);
  if (outcome.disposition === 'delete') {
    await env.clients.sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: env.queueUrl,
        Entries: [{ Id: '0', ReceiptHandle: record.receiptHandle }],
      }),
    );
  }
  return { id, outcome };
}

describe('A duplicate with another payload (emulator)', () => {
  it('is dead-lettered payload-mismatch with both hashes in the history and on the letter; the effect applied once', async () => {
    const worker = makeWorker(env, registry());
    const [key, account] = [uniqueName('order'), uniqueName('acct')];
    const first = await sendAndRun(worker, {
      dedupKey: key,
      type: 'order.letter',
      payload: { account, amount: 5 },
    });
    expect(first.outcome.action).toBe('completed');
    const done = await worker.store.get(key);

    const other = await sendAndRun(worker, {
      dedupKey: key,
      type: 'order.letter',
      payload: { account, amount: 7 },
    });
    expect(other.outcome.action).toBe('dead-lettered');

    const jobHash = payloadHash({ account, amount: 5 });
    const messageHash = payloadHash({ account, amount: 7 });
    const letters = (await receiveAll(env, env.dlqUrl, 30, 1)).map((m) =>
      readDeadLetterAttributes(m.MessageAttributes),
    );
    expect(letters).toEqual([
      expect.objectContaining({
        reason: 'payload-mismatch',
        attempts: '0',
        dedupKey: key,
        originalMessageId: other.id,
        payloadHashes: `job=${jobHash} message=${messageHash}`,
      }),
    ]);
    expect(letters[0]?.errorMessage).toContain(jobHash);
    const item = await worker.store.get(key);
    expect(item).toMatchObject({ status: JobStatus.Completed, token: done?.token, payloadHash: jobHash });
    expect(item?.history).toEqual([
      expect.objectContaining({ e: 'mismatch', messageId: other.id, hash: jobHash, got: messageHash }),
    ]);
    expect((await getBalance(env, account))?.balance).toBe(5);
    expect(worker.metrics.get('PayloadMismatch')).toBe(1);

    // The same payload again is a copy, as before.
    const copy = await sendAndRun(worker, {
      dedupKey: key,
      type: 'order.letter',
      payload: { account, amount: 5 },
    });
    expect(copy.outcome.action).toBe('duplicate');
  }, 120_000);

  it("copy: another payload is dropped as a duplicate (no hash stored); new-job: it runs as the key's new job", async () => {
    const worker = makeWorker(env, registry());
    const [copyKey, renewKey, account] = [uniqueName('order'), uniqueName('order'), uniqueName('acct')];
    for (const [key, type] of [
      [copyKey, 'order.copy'],
      [renewKey, 'order.renew'],
    ] as const) {
      expect(
        (await sendAndRun(worker, { dedupKey: key, type, payload: { account, amount: 5 } })).outcome.action,
      ).toBe('completed');
    }
    expect((await worker.store.get(copyKey))?.payloadHash).toBeUndefined();

    const copied = await sendAndRun(worker, {
      dedupKey: copyKey,
      type: 'order.copy',
      payload: { account, amount: 7 },
    });
    expect(copied.outcome.action).toBe('duplicate');
    const renewed = await sendAndRun(worker, {
      dedupKey: renewKey,
      type: 'order.renew',
      payload: { account, amount: 7 },
    });
    expect(renewed.outcome.action).toBe('completed');

    // 5 (copy type) + 5 and 7 (new-job type): the copy's 7 never ran.
    expect((await getBalance(env, account))?.balance).toBe(17);
    expect(await worker.store.get(renewKey)).toMatchObject({
      status: JobStatus.Completed,
      messageId: renewed.id,
      attempts: 1,
      payloadHash: payloadHash({ account, amount: 7 }),
    });
    expect(await receiveAll(env, env.dlqUrl, 30, 1)).toEqual([]);
  }, 120_000);
});
