import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  receiveAll,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { testRegistry } from '../../../support/test-jobs.ts';

let env: CoreEnv;

beforeAll(async () => {
  // The stack's attempt limit and the worker's agree: 3.
  env = await coreEnv('fiforedrive', { fifo: true, maxAttempts: 3 });
});
afterAll(() => env?.close());

describe('FIFO redrive safety net', () => {
  it('lets no message of a failing group reach the DLQ through SQS: every letter carries leaseq reasons', async () => {
    // Prepare: one group of 8 jobs that always fail. Every retry of the head hands the rest back, a
    // receive each; with a safety net sized for standard queues the tail would be moved by SQS itself.
    const { registry } = testRegistry(env);
    const worker = makeWorker(env, registry, {
      maxAttempts: 3,
      backoff: { baseSeconds: 1, capSeconds: 1 },
      random: () => 0.5,
    });
    const group = uniqueName('g');
    const keys = Array.from({ length: 8 }, (_, i) => uniqueName(`f${i}`));
    for (const key of keys) {
      await env.clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: env.queueUrl,
          MessageBody: JSON.stringify(
            makeEnvelope({
              id: uniqueName('m'),
              dedupKey: key,
              type: 'test.credit',
              payload: { account: uniqueName('a'), amount: 1, failTimes: 100 },
            }),
          ),
          MessageGroupId: group,
          MessageDeduplicationId: key,
        }),
      );
    }

    // Act: work the queue until it is empty.
    const drained = await eventually(
      async () => {
        await worker.poll(1);
        const c = await queueCounts(env);
        return c.visible + c.inFlight + c.delayed === 0;
      },
      80_000,
      0,
    );

    // Assess: eight letters, each dead-lettered by leaseq after its 3 attempts, none by SQS.
    expect(drained).toBe(true);
    const letters = await receiveAll(env, env.dlqUrl, 30, 2);
    const reasons = letters.map((m) => readDeadLetterAttributes(m.MessageAttributes));
    expect(reasons.map((r) => r.reason)).toEqual(Array(8).fill('max-attempts'));
    expect(reasons.map((r) => r.dedupKey).sort()).toEqual([...keys].sort());
  }, 180_000);
});
