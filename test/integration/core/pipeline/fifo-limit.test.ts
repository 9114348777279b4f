// On FIFO a bounced head holds its group (in flight) and every bounce hands its batch-mates back: both are
// receives that are not attempts. None may reach the queue's redrive (it moves a message unrun, with no
// reason and no DEAD item).
import {
  GetQueueAttributesCommand,
  SendMessageCommand,
  SetQueueAttributesCommand,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  leaseStore,
  makeWorker,
  queueCounts,
  receiveAll,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

/** The queue's redrive count, small so that a few receives that are not attempts would reach it. */
const MAX_RECEIVES = 3;

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('fifolimit', { fifo: true, maxAttempts: 1, batchSize: 10 });
  const dlq = await env.clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: env.dlqUrl, AttributeNames: ['QueueArn'] }),
  );
  await env.clients.sqs.send(
    new SetQueueAttributesCommand({
      QueueUrl: env.queueUrl,
      Attributes: {
        RedrivePolicy: JSON.stringify({
          deadLetterTargetArn: dlq.Attributes?.QueueArn,
          maxReceiveCount: MAX_RECEIVES,
        }),
      },
    }),
  );
});
afterAll(() => env?.close());

describe('FIFO: a job kept waiting by its concurrency limit', () => {
  it('never reaches the queue redrive, nor do its batch-mates: all run once the slot frees, no letter', async () => {
    // Prepare: tenant A's only slot is held (another job) for longer than the queue's receives allow;
    // a group of 3 jobs, A's first.
    const type = `t.${uniqueName('fifolimited')}`;
    const runs: string[] = [];
    const job = defineJob({
      type,
      payload: z.object({ tenant: z.string(), key: z.string() }),
      concurrency: { limit: 1, key: (p: { tenant: string }) => p.tenant },
      async run(_ctx, payload) {
        runs.push(payload.key);
        return { result: 'ok' };
      },
    });
    const worker = makeWorker(env, JobRegistry.of([job]), { maxAttempts: 1, maxReceiveCount: MAX_RECEIVES });
    const tenant = uniqueName('A');
    const slot = await leaseStore(env).tryAcquire(
      `slot:${type}:k:${tenant}#0`,
      'other-job',
      12_000,
      Date.now(),
    );
    expect(slot.acquired).toBe(true);
    const group = uniqueName('g');
    const keys = [uniqueName('a1'), uniqueName('b1'), uniqueName('b2')];
    const tenants = [tenant, uniqueName('B'), uniqueName('C')];
    for (const [i, key] of keys.entries()) {
      await env.clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: env.queueUrl,
          MessageBody: JSON.stringify(
            makeEnvelope({ id: uniqueName('m'), dedupKey: key, type, payload: { tenant: tenants[i], key } }),
          ),
          MessageGroupId: group,
          MessageDeduplicationId: key,
        }),
      );
    }

    // Act: work the queue until it is empty (the slot frees after 12 s).
    const drained = await eventually(
      async () => {
        await worker.poll(1);
        const c = await queueCounts(env);
        return c.visible + c.inFlight + c.delayed === 0;
      },
      90_000,
      0,
    );

    // Assess: every job ran once and completed; the DLQ holds nothing.
    expect(drained).toBe(true);
    const items = await Promise.all(keys.map((k) => worker.store.get(k)));
    expect(items.map((i) => i?.status)).toEqual([
      JobStatus.Completed,
      JobStatus.Completed,
      JobStatus.Completed,
    ]);
    expect([...runs].sort()).toEqual([...keys].sort());
    expect(await receiveAll(env, env.dlqUrl, 10, 1)).toEqual([]);
  }, 120_000);
});
