import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { type CoreEnv, coreEnv, makeWorker } from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { testRegistry } from '../../../support/test-jobs.ts';

let env: CoreEnv;
const SLEEP_MS = 1500;

beforeAll(async () => {
  env = await coreEnv('fair');
});
afterAll(() => env?.close());

describe('standard fair queue (against the emulator)', () => {
  it("runs one tenant's records at once as a standard batch: a failing record holds back none of the others", async () => {
    // Arrange: a standard queue whose messages carry a MessageGroupId (an SQS fair queue's tenant). Only a
    // `.fifo` queue promises group order; here no record may wait for another or be handed back unstarted.
    expect(env.queueUrl.endsWith('.fifo')).toBe(false);
    const { registry, log } = testRegistry(env);
    const worker = makeWorker(env, registry);
    const keys = [uniqueName('t1'), uniqueName('t2'), uniqueName('t3')];
    for (const [i, dedupKey] of keys.entries()) {
      // Own accounts: jobs crediting one account would conflict on its versioned write and run again.
      const payload = {
        account: uniqueName('acct'),
        amount: 1,
        sleepMs: SLEEP_MS,
        ...(i === 0 ? { failTimes: 1 } : {}),
      };
      await env.clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: env.queueUrl,
          MessageBody: JSON.stringify(
            makeEnvelope({ id: uniqueName('m'), dedupKey, type: 'test.credit', payload }),
          ),
          MessageGroupId: 'tenant-a',
        }),
      );
    }

    // Act: one event-source turn receives all three.
    const started = Date.now();
    const received = await worker.poll(1);
    const elapsed = Date.now() - started;

    // Assess: all three ran in this turn (the failing head stopped nothing), side by side, not one by one.
    expect(received).toBe(3);
    expect(keys.map((k) => log.count(k))).toEqual([1, 1, 1]);
    // One after another would take at least three sleeps.
    expect(elapsed).toBeLessThan(3 * SLEEP_MS);
    const second = await worker.store.get(keys[1] ?? '');
    expect(second?.attempts).toBe(1);
  });
});
