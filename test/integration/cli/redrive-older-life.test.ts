// A redrive's message in flight across two lives of its key (the interleaving model's seed -1515368965):
// the redrive resets the dead job and sends its letter back, a copy claims the reset job first and dies
// again, a fresh send past the dead key's TTL resets the key as a new job, which fails once and waits;
// then the redrive's message, late, must not claim the new job's retry and run the old job's body on it.
import { ChangeMessageVisibilityCommand, type Message } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseEnvelope } from '../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../shared/core/model/registry.ts';
import { PermanentJobError } from '../../../shared/errors.ts';
import { redrive } from '../../../shared/ops/dlq-redrive.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  receiveAll,
  sendJob,
  sleep,
} from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('rdlife');
});
afterAll(() => env?.close());

const TYPE = 'test.lives';
/** Runs of each payload version, by key: what ran on which life. */
const runs: { key: string; v: number }[] = [];
/** Dead keys of this type run again 2 s after their death. */
const registry = new JobRegistry().register({
  type: TYPE,
  deadKeyTtl: 2,
  payload: z.object({ key: z.string(), mode: z.enum(['die', 'retry']), v: z.number() }),
  run: async (_ctx, p) => {
    runs.push({ key: p.key, v: p.v });
    if (p.mode === 'die') throw new PermanentJobError(`broken v${p.v}`);
    throw new Error(`try again v${p.v}`);
  },
});

const target = () => ({
  clients: env.clients,
  names: {
    queueUrl: env.queueUrl,
    dlqUrl: env.dlqUrl,
    jobsTable: env.jobsTable,
    leasesTable: env.leasesTable,
  },
});

const worker = () => makeWorker(env, registry);

/** Polls one worker until the item under `key` has `status` and `attempts`. */
async function runUntil(key: string, status: string, attempts: number): Promise<void> {
  const w = worker();
  const reached = await eventually(async () => {
    await w.poll(1);
    const item = await w.store.get(key);
    return item?.status === status && item.attempts === attempts;
  }, 20_000);
  expect(reached).toBe(true);
}

/** Receives the visible messages of `key` and holds them (in flight) for `seconds`. */
async function hold(key: string, seconds: number): Promise<Message[]> {
  const all = await receiveAll(env, env.queueUrl, seconds);
  return all.filter((m) => parseEnvelope(m.Body ?? '').dedupKey === key);
}

describe('Function: redrive, its message late across a dead key reset', () => {
  it('is dropped by the newer job it meets (never run on it), and the newer job waits for its own message', async () => {
    // Prepare: life 0 (v1) dies; the redrive resets it and sends v1 back, which the test holds.
    const key = uniqueName('lives');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { key, mode: 'die', v: 1 } });
    await runUntil(key, JobStatus.Dead, 1);
    expect(await redrive(target(), { filter: { dedupKey: key }, by: 'test' })).toMatchObject({ redriven: 1 });
    const [redriven] = await hold(key, 120);
    expect(redriven).toBeDefined();
    // A copy of v1 claims the reset job first and dies again (still life 0).
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { key, mode: 'die', v: 1 } });
    await runUntil(key, JobStatus.Dead, 1);
    // Past the dead key's TTL a fresh send (v2) resets the key: life 1, which fails once and waits.
    await sleep(2_100);
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { key, mode: 'retry', v: 2 } });
    await runUntil(key, JobStatus.RetryWait, 1);
    await sleep(1_100);
    const [own] = await hold(key, 120);
    expect(own).toBeDefined();
    const waiting = await worker().store.get(key);
    expect(waiting?.lastError).toContain('try again v2');

    // Act: the redrive's message comes back after the new job's retry time.
    await env.clients.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: env.queueUrl,
        ReceiptHandle: redriven?.ReceiptHandle ?? '',
        VisibilityTimeout: 0,
      }),
    );
    const late = worker();
    const received = await eventually(async () => (await late.poll(1)) > 0, 10_000);

    // Assess: it ran nothing and was deleted; the new job still waits, at its attempt, for its own message.
    expect(received).toBe(true);
    expect(runs.filter((r) => r.key === key).map((r) => r.v)).toEqual([1, 1, 2]);
    expect(late.metrics.counters.get('OtherLifeDropped')).toBe(1);
    const after = await late.store.get(key);
    expect(after).toMatchObject({ status: JobStatus.RetryWait, attempts: 1, lastError: waiting?.lastError });
    expect(after?.history?.at(-1)).toMatchObject({ e: 'dropped', count: 1, messageId: redriven?.MessageId });
    expect(await hold(key, 0)).toEqual([]);
    // The new job's own message still claims it.
    await env.clients.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: env.queueUrl,
        ReceiptHandle: own?.ReceiptHandle ?? '',
        VisibilityTimeout: 0,
      }),
    );
    await runUntil(key, JobStatus.RetryWait, 2);
    expect(runs.filter((r) => r.key === key).map((r) => r.v)).toEqual([1, 1, 2, 2]);
  }, 90_000);

  it("after a dead key's reset sends the key's new life, skips the older life's letter, and its message runs the newer job", async () => {
    // Prepare: life 0 (v1) dies; past the TTL a fresh send (v2) resets the key (life 1) and dies too.
    const key = uniqueName('lives');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { key, mode: 'die', v: 1 } });
    await runUntil(key, JobStatus.Dead, 1);
    await sleep(2_100);
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { key, mode: 'die', v: 2 } });
    await eventually(async () => {
      await worker().poll(1);
      return (await worker().store.get(key))?.life === 1;
    }, 20_000);
    await runUntil(key, JobStatus.Dead, 1);

    // Act: both letters are the key's; the redrive reads the item's life
    const report = await redrive(target(), { filter: { dedupKey: key }, by: 'test' });
    const [sent] = await hold(key, 30);

    // Assess: v1's letter stays (a newer job holds the key), v2's goes back for life 1 and runs it
    expect(report).toMatchObject({ redriven: 1 });
    expect(report.items.map((i) => i.outcome).sort()).toEqual(['redriven', 'skipped']);
    expect(report.items.find((i) => i.outcome === 'skipped')).toMatchObject({ skip: 'newer-job' });
    expect(parseEnvelope(sent?.Body ?? '').payload).toMatchObject({ v: 2 });
    expect(sent?.MessageAttributes?.['leaseq-life']?.StringValue).toBe('1');
    await env.clients.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: env.queueUrl,
        ReceiptHandle: sent?.ReceiptHandle ?? '',
        VisibilityTimeout: 0,
      }),
    );
    await runUntil(key, JobStatus.Dead, 1);
    expect(runs.filter((r) => r.key === key).map((r) => r.v)).toEqual([1, 2, 2]);
    expect((await worker().store.get(key))?.life).toBe(1);
  }, 90_000);
});
