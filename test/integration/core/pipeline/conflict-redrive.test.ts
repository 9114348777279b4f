// An optimistic conflict's give-back is a receive that is no attempt, as a limit's bounce is. On a queue
// whose redrive count the worker is told (maxReceiveCount, below the construct's), no give-back may reach
// it: SQS would move the message unrun, with no reason and no DEAD item.
import { GetQueueAttributesCommand, SetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  putBalance,
  queueCounts,
  receiveAll,
  sendJob,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { testRegistry } from '../../../support/test-jobs.ts';

/** The queue's redrive count, small so that a few give-backs would reach it. */
const MAX_RECEIVES = 3;

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('conflictrd');
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

describe('A conflicting job on a queue with a small redrive count', () => {
  it('never reaches the queue redrive: it conflicts until maxConflicts and ends DEAD max-conflicts', async () => {
    // Prepare: every commit of the job conflicts (a writer bumps the row's version before it).
    const account = uniqueName('acct');
    await putBalance(env, account, 0, 1);
    let bumps = 0;
    const { registry } = testRegistry(env, undefined, {
      beforeCommit: async () => {
        bumps += 1;
        await putBalance(env, account, 0, 1 + bumps);
      },
    });
    const worker = makeWorker(env, registry, {
      optimisticTries: 1,
      maxConflicts: 5,
      conflictBackoff: { baseSeconds: 1, capSeconds: 1 },
      maxReceiveCount: MAX_RECEIVES,
      random: () => 0.99,
    });
    const key = uniqueName('order');
    await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 5 } });

    // Act: work the queue until it is empty.
    const drained = await eventually(
      async () => {
        await worker.poll(1);
        const c = await queueCounts(env);
        return c.visible + c.inFlight + c.delayed === 0;
      },
      60_000,
      0,
    );

    // Assess: the job ended DEAD for its conflicts, with its own letter (a reason), not moved by SQS.
    expect(drained).toBe(true);
    expect(await worker.store.get(key)).toMatchObject({
      status: JobStatus.Dead,
      deadReason: 'max-conflicts',
    });
    const letters = await receiveAll(env, env.dlqUrl, 10, 1);
    expect(letters.map((l) => readDeadLetterAttributes(l.MessageAttributes).reason)).toEqual([
      'max-conflicts',
    ]);
  }, 90_000);
});
