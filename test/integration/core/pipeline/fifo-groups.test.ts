import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Message } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { groupIdForKey } from '../../../../shared/aws/message-group.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobProducer } from '../../../../shared/producer/job-producer.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  receiveAll,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { deleteMessages, drainQueue, freshQueues } from '../../../support/fresh-queues.ts';
import { testRegistry } from '../../../support/test-jobs.ts';
import { leaseq } from '../../cli/run-cli.ts';

// AWS's documented rule for MessageGroupId and MessageDeduplicationId (the emulator takes anything):
// up to 128 alphanumerics and !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~, no spaces.
const AWS_ID = /^[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]{1,128}$/;

let base: CoreEnv;
let env: CoreEnv;

beforeAll(async () => {
  base = await coreEnv('fifogrp', { fifo: true });
});
beforeEach(async () => {
  env = await freshQueues(base);
});
afterAll(() => base?.close());

/**
 * The file's own queues, emptied, for a case that runs the CLI: it finds the queues by the stack's
 * prefix, so it cannot work on a case's fresh pair.
 */
async function namedQueues(): Promise<CoreEnv> {
  await Promise.all([drainQueue(base, base.queueUrl), drainQueue(base, base.dlqUrl)]);
  return base;
}

function producer(options: Partial<ConstructorParameters<typeof JobProducer>[0]> = {}): JobProducer {
  return new JobProducer({ queueUrl: env.queueUrl, client: env.clients.sqs, ...options });
}

function byKey(messages: readonly Message[]): Map<string, Message> {
  return new Map(messages.map((m) => [JSON.parse(m.Body ?? '{}').dedupKey as string, m]));
}

describe('FIFO message groups (against the emulator)', () => {
  it('sends valid group and deduplication ids for any valid dedup key: the key itself, else a stable derived id', async () => {
    // Arrange: keys the envelope allows (256 printable characters, inner spaces) but SQS refuses as groups.
    const plain = uniqueName('plain');
    const spaced = `order ${uniqueName('n')}`;
    const long = `${uniqueName('long')}-${'k'.repeat(180)}`;
    const p = producer();

    // Act: the spaced key twice (a resend), so its group must be the same both times.
    await p.send(
      ...[plain, spaced, long, spaced].map((dedupKey) => ({
        type: 'test.credit',
        dedupKey,
        payload: { account: 'a', amount: 1 },
      })),
    );

    // Assess
    const messages = await receiveAll(env, env.queueUrl, 30);
    expect(messages).toHaveLength(4);
    for (const m of messages) {
      expect(m.Attributes?.MessageGroupId).toMatch(AWS_ID);
      expect(m.Attributes?.MessageDeduplicationId).toMatch(AWS_ID);
    }
    expect(byKey(messages).get(plain)?.Attributes?.MessageGroupId).toBe(plain);
    const spacedGroups = messages
      .filter((m) => JSON.parse(m.Body ?? '{}').dedupKey === spaced)
      .map((m) => m.Attributes?.MessageGroupId);
    expect(spacedGroups).toHaveLength(2);
    expect(spacedGroups[0]).toBe(spacedGroups[1]);
    expect(byKey(messages).get(long)?.Attributes?.MessageGroupId).not.toBe(spacedGroups[0]);
  });

  it('a chosen group (per job, or the producer option) keeps its jobs in order: a failing head holds back the rest', async () => {
    // Arrange: three jobs of one account in one group; the head fails once.
    const { registry, log } = testRegistry(env);
    const worker = makeWorker(env, registry, {
      backoff: { baseSeconds: 1, capSeconds: 1 },
      random: () => 0.99,
    });
    const account = uniqueName('acct');
    const [a, b, c] = [uniqueName('a'), uniqueName('b'), uniqueName('c')];
    const group = `account-${account}`;
    await producer().send({
      type: 'test.credit',
      dedupKey: a,
      groupId: group,
      payload: { account, amount: 1, failTimes: 1 },
    });
    // The producer option: the group as a function of the job.
    await producer({ groupId: (job) => `account-${(job.payload as { account: string }).account}` }).send(
      { type: 'test.credit', dedupKey: b, payload: { account, amount: 2 } },
      { type: 'test.credit', dedupKey: c, payload: { account, amount: 3 } },
    );

    // Act: the first turn runs the head, which fails; the rest of its group must wait for it.
    await eventually(async () => (await worker.poll(1)) > 0, 10_000, 0);
    expect(log.count(a)).toBe(1);
    expect(log.count(b)).toBe(0);
    expect(log.count(c)).toBe(0);
    const done = await eventually(
      async () => {
        await worker.poll(1);
        const counts = await queueCounts(env);
        return counts.visible + counts.inFlight === 0;
      },
      30_000,
      0,
    );

    // Assess: all three ran, in order.
    expect(done).toBe(true);
    const items = await Promise.all([a, b, c].map((k) => worker.store.get(k)));
    expect(items.map((i) => i?.status)).toEqual(Array(3).fill(JobStatus.Completed));
    const [ta, tb, tc] = items.map((i) => i?.completedAt ?? 0);
    expect(ta).toBeLessThanOrEqual(tb ?? 0);
    expect(tb).toBeLessThanOrEqual(tc ?? 0);
  });

  it('`leaseq send --group-id` puts every job of the send in that group; a bad one is refused before sending', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'leaseq-fifo-group-'));
    const file = join(dir, 'jobs.ndjson');
    const keys = [`order ${uniqueName('x')}`, uniqueName('y')];
    writeFileSync(
      file,
      keys
        .map((dedupKey) =>
          JSON.stringify({ type: 'ledger.credit', dedupKey, payload: { account: 'a', amount: 1 } }),
        )
        .join('\n'),
    );
    env = await namedQueues();
    const prefix = env.jobsTable.replace(/-jobs$/, '');
    const fifo = { LEASEQ_FIFO: 'true' };

    const bad = await leaseq(['send', '--prefix', prefix, '--file', file, '--group-id', 'acct 7'], fifo);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--group-id.*not a valid SQS MessageGroupId/);
    expect(await queueCounts(env)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });

    const ok = await leaseq(['send', '--prefix', prefix, '--file', file, '--group-id', 'acct-7'], fifo);
    expect(ok.code, ok.stderr).toBe(0);
    const messages = await receiveAll(env, env.queueUrl, 30);
    expect(messages.map((m) => m.Attributes?.MessageGroupId)).toEqual(['acct-7', 'acct-7']);

    // Without the flag, the key with a space still gets a valid group.
    await deleteMessages(env, env.queueUrl, messages);
    const plain = await leaseq(['send', '--prefix', prefix, '--file', file], fifo);
    expect(plain.code).toBe(0);
    const again = await receiveAll(env, env.queueUrl, 30);
    expect(again).toHaveLength(2);
    for (const m of again) expect(m.Attributes?.MessageGroupId).toMatch(AWS_ID);
    await deleteMessages(env, env.queueUrl, again);
  });

  it('a dead letter and its redrive stay in the group the producer gave a key SQS would refuse as a group', async () => {
    // Arrange: a job whose key has a space fails for good, so the worker dead-letters it.
    env = await namedQueues();
    const { registry, log } = testRegistry(env);
    const worker = makeWorker(env, registry);
    const key = `order ${uniqueName('d')}`;
    await producer().send({
      type: 'test.credit',
      dedupKey: key,
      payload: { account: uniqueName('acct'), amount: 1, permanent: true },
    });
    const lettered = await eventually(
      async () => {
        await worker.poll(1);
        return (await queueCounts(env, env.dlqUrl)).visible === 1;
      },
      15_000,
      0,
    );
    expect(lettered).toBe(true);
    expect(log.count(key)).toBe(1);

    // Act
    const prefix = env.jobsTable.replace(/-jobs$/, '');
    const run = await leaseq(['dlq', 'redrive', '--prefix', prefix, '--yes', '--json'], {
      LEASEQ_FIFO: 'true',
    });

    // Assess: back in the jobs queue, in the key's derived group (valid, the same every send).
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ redriven: 1, failed: 0 });
    const back = await receiveAll(env, env.queueUrl, 30);
    expect(back).toHaveLength(1);
    expect(back[0]?.Attributes?.MessageGroupId).toMatch(AWS_ID);
    expect(back[0]?.Attributes?.MessageGroupId).toBe(groupIdForKey(key));
    await deleteMessages(env, env.queueUrl, back);
  });
});
