import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { type CoreEnv, coreEnv, eventually, makeWorker, queueCounts } from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { testRegistry } from '../../../support/test-jobs.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('fifo', { fifo: true });
});
afterAll(() => env?.close());

async function sendFifo(group: string, dedupKey: string, payload: unknown): Promise<void> {
  await env.clients.sqs.send(
    new SendMessageCommand({
      QueueUrl: env.queueUrl,
      MessageBody: JSON.stringify(
        makeEnvelope({ id: uniqueName('m'), dedupKey, type: 'test.credit', payload }),
      ),
      MessageGroupId: group,
      MessageDeduplicationId: dedupKey,
    }),
  );
}

describe('FIFO queue (against the emulator)', () => {
  it('keeps a message group in order: a failed head holds back the rest of its group, other groups go on', async () => {
    const { registry, log } = testRegistry(env);
    const worker = makeWorker(env, registry, {
      backoff: { baseSeconds: 1, capSeconds: 1 },
      random: () => 0.99,
    });
    const account = uniqueName('acct');
    const [g1a, g1b, g1c, g2a] = [uniqueName('g1a'), uniqueName('g1b'), uniqueName('g1c'), uniqueName('g2a')];
    await sendFifo('g1', g1a, { account, amount: 1, failTimes: 1 });
    await sendFifo('g1', g1b, { account, amount: 2 });
    await sendFifo('g1', g1c, { account, amount: 3 });
    await sendFifo('g2', g2a, { account: uniqueName('other'), amount: 4 });

    // First turn: the head of g1 fails; g1's later messages must not run before it.
    await eventually(async () => (await worker.poll(1)) > 0, 10_000, 0);
    expect(log.count(g1a)).toBe(1);
    expect(log.count(g1b)).toBe(0);
    expect(log.count(g1c)).toBe(0);
    // Another group is not held back by g1's failure.
    const g2Ran = await eventually(
      async () => {
        if (log.count(g2a) === 0) await worker.poll(1);
        return log.count(g2a) === 1;
      },
      10_000,
      0,
    );
    expect(g2Ran).toBe(true);

    const done = await eventually(
      async () => {
        await worker.poll(1);
        const c = await queueCounts(env);
        return c.visible + c.inFlight === 0;
      },
      30_000,
      0,
    );
    expect(done).toBe(true);
    const items = await Promise.all([g1a, g1b, g1c, g2a].map((k) => worker.store.get(k)));
    expect(items.map((i) => i?.status)).toEqual(Array(4).fill(JobStatus.Completed));
    const [a, b, c] = items.map((i) => i?.completedAt ?? 0);
    expect(a).toBeLessThanOrEqual(b ?? 0);
    expect(b).toBeLessThanOrEqual(c ?? 0);
    expect(items[0]?.attempts).toBe(2);
  });
});
