// E13 on a FIFO queue: the job's own message refused while a live lease holds its job is hidden, and a
// FIFO head hidden holds back its group. Until when, and at what cost in receives (the queue's redrive
// counts every one)? Against the emulator's FIFO queue and DynamoDB.
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import { type CoreEnv, coreEnv, eventually, makeWorker, sleep } from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

const TYPE = 'report.fifo.refused';
let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('refusedfifo', { fifo: true });
});
afterAll(() => env?.close());

async function sendFifo(group: string, dedupKey: string, n: number): Promise<string> {
  const out = await env.clients.sqs.send(
    new SendMessageCommand({
      QueueUrl: env.queueUrl,
      MessageBody: JSON.stringify(
        makeEnvelope({ id: uniqueName('m'), dedupKey, type: TYPE, payload: { n } }),
      ),
      MessageGroupId: group,
      MessageDeduplicationId: dedupKey,
    }),
  );
  return out.MessageId ?? '';
}

async function receiveOne(visibility: number): Promise<SQSRecord | undefined> {
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
  const m = out.Messages?.[0];
  return m ? toSqsRecord(m, env.queueArn, env.region) : undefined;
}

describe('E13 on FIFO', () => {
  it("a group's head refused under a live lease holds the group until the lease ends, then dies; the group goes on", async () => {
    // The next deploy's schema (n at least 10) refuses the head; the message behind it is fine.
    const report = defineJob({
      type: TYPE,
      payload: z.object({ n: z.number().min(10) }),
      async run() {
        return { result: 'sent' };
      },
    });
    const w = makeWorker(env, JobRegistry.of([report]), { worker: 'w-new' });
    const group = uniqueName('g');
    const [head, next] = [uniqueName('head'), uniqueName('next')];
    const headId = await sendFifo(group, head, 1);
    await sendFifo(group, next, 11);
    // An old deploy's worker holds the head's job for 4 s; its message shows again (visibility 1 s).
    const first = await receiveOne(1);
    expect(first?.messageId).toBe(headId);
    const held = await w.store.claim({
      dedupKey: head,
      owner: 'w-old',
      messageId: headId,
      type: TYPE,
      createdAt: new Date().toISOString(),
      leaseMs: 4000,
      now: Date.now(),
    });
    expect(held.claimed).toBe(true);
    await sleep(1200);

    // Act: the workers poll the queue as the event source would, for up to 30 s.
    const started = Date.now();
    const done = await eventually(
      async () => {
        await w.poll(1);
        return (await w.store.get(next))?.status === JobStatus.Completed;
      },
      30_000,
      0,
    );

    // Assess: the head is DEAD of its refusal once the lease ended, the group went on after it, and
    // the head's receives stayed few (far from any maxReceiveCount).
    expect(done).toBe(true);
    expect(await w.store.get(head)).toMatchObject({
      status: JobStatus.Dead,
      deadReason: 'invalid-bad-payload',
    });
    const headDied = (await w.store.get(head))?.deadAt ?? 0;
    expect(headDied).toBeGreaterThanOrEqual((held.claimed ? held.lease.leaseUntil : 0) - 50);
    expect(Date.now() - started).toBeLessThan(15_000);
    const early = w.metrics.get(MetricName.OwnMessageEarly);
    expect(early).toBeGreaterThanOrEqual(1);
    expect(early).toBeLessThanOrEqual(2);
  }, 120_000);
});
