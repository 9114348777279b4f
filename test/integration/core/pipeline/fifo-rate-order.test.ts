// On FIFO a rate-limited head holds its group's place as a slot-limited one does (docs/protocol.md,
// "Limits on FIFO": hides that double per receive, about 3 minutes before the re-send to the tail). A
// rate bounce hid the head only for the time to the next permit, so a head that kept losing the permit to
// other groups spent its ten receives in seconds and was moved behind its group's later messages.
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DynamoDbRateStore } from '../../../../shared/core/adapters/dynamodb-rate-store.ts';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { type CoreEnv, coreEnv, eventually, makeWorker, queueCounts } from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('fiforate', { fifo: true, maxAttempts: 1, batchSize: 10 });
});
afterAll(() => env?.close());

describe('FIFO: a head kept waiting by a contended rate limit', () => {
  it('keeps its place in its group: the group runs in order once the permits come free', async () => {
    // Prepare: a rate key of one permit per second that another taker wins every second for 30 s;
    // a group whose head needs that key and whose second job needs none.
    const type = `t.${uniqueName('fiforate')}`;
    const runs: string[] = [];
    const job = defineJob({
      type,
      payload: z.object({ tenant: z.string(), key: z.string() }),
      rateLimit: { key: (p: { tenant: string }) => p.tenant, limit: 1, perSeconds: 1 },
      async run(_ctx, payload) {
        runs.push(payload.key);
        return { result: 'ok' };
      },
    });
    const worker = makeWorker(env, JobRegistry.of([job]), { maxAttempts: 1 });
    const hot = uniqueName('hot');
    const rates = new DynamoDbRateStore({ client: env.clients.doc, tableName: env.leasesTable });
    const starveUntil = Date.now() + 30_000;
    const starving = (async () => {
      while (Date.now() < starveUntil) {
        // Its clock 900 ms ahead (within what a decision keeps): it wins each permit first.
        await rates.take(`rate:${type}:k:${hot}`, 1, 1, Date.now() + 900);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const group = uniqueName('g');
    const keys = [uniqueName('first'), uniqueName('second')];
    const tenants = [hot, uniqueName('cold')];
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

    // Act: work the queue until both ran.
    const done = await eventually(
      async () => {
        await worker.poll(1);
        const c = await queueCounts(env);
        return runs.length === 2 && c.visible + c.inFlight + c.delayed === 0;
      },
      120_000,
      0,
    );
    await starving;

    // Assess: the group's order held.
    expect(done).toBe(true);
    expect(runs).toEqual(keys);
  }, 150_000);
});
