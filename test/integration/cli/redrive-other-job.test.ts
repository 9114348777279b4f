// A redrive never sends a letter over another job (issue 31, item 1): a letter whose job is not the one
// the item names now (a fresh send reset the key after its death, or the job died again since under
// another message) is skipped with its reason, and of two letters of one key the newest death's is sent.
import { type Message, type MessageAttributeValue, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseEnvelope } from '../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../shared/core/model/registry.ts';
import { PermanentJobError } from '../../../shared/errors.ts';
import { cancelJob } from '../../../shared/ops/cancel.ts';
import { type RedriveReport, redrive } from '../../../shared/ops/dlq-redrive.ts';
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
import { leaseq, leaseqJson } from './run-cli.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('rdother');
});
afterAll(() => env?.close());

const TYPE = 'test.generations';
/** Dead keys of this type run again 2 s after their death. */
const registry = new JobRegistry().register({
  type: TYPE,
  deadKeyTtl: 2,
  payload: z.object({ mode: z.enum(['die', 'retry']), v: z.number() }),
  run: async (_ctx, p) => {
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

/** Runs the worker until the item under `key` has `status` (and, if given, `attempts`). */
async function runUntil(key: string, status: string, attempts?: number): Promise<void> {
  // A retry waits 10 minutes: the job stays in RETRY_WAIT for the whole test.
  const worker = makeWorker(env, registry, { backoff: { baseSeconds: 600, capSeconds: 600 } });
  const reached = await eventually(async () => {
    await worker.poll(1);
    const item = await worker.store.get(key);
    return item?.status === status && (attempts === undefined || item.attempts === attempts);
  }, 20_000);
  expect(reached).toBe(true);
}

/** A job under `key` that died for good with payload version `v`; waits out the dead key's 2 s. */
async function deadGeneration(key: string, v: number): Promise<void> {
  await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'die', v } });
  await runUntil(key, JobStatus.Dead);
}

/** Payload versions of the messages of `key` that are visible in the jobs queue (received, so hidden after). */
async function sentVersions(key: string): Promise<number[]> {
  const messages = await receiveAll(env, env.queueUrl, 60);
  return messages
    .map((m) => parseEnvelope(m.Body ?? ''))
    .filter((e) => e.dedupKey === key)
    .map((e) => (e.payload as { v: number }).v);
}

/** The letters of `key` in the DLQ, by payload version (received with visibility 0: they stay visible). */
async function letterVersions(key: string): Promise<number[]> {
  const messages = await receiveAll(env, env.dlqUrl, 0);
  const ours = new Map<string, Message>();
  for (const m of messages) if (m.MessageId) ours.set(m.MessageId, m);
  return [...ours.values()]
    .map((m) => parseEnvelope(m.Body ?? ''))
    .filter((e) => e.dedupKey === key)
    .map((e) => (e.payload as { v: number }).v)
    .sort();
}

function itemOf(report: RedriveReport, outcome: string) {
  return report.items.filter((i) => i.outcome === outcome);
}

describe('Function: redrive, when the letter is not the job the item names', () => {
  it('skips the letter of a dead job whose key a fresh send reset (deadKeyTtl), and leaves the new job waiting for its retry', async () => {
    // Prepare: J1 dies (letter L1); after the dead key's TTL a fresh send J2 resets the key, fails once and
    // waits in RETRY_WAIT.
    const key = uniqueName('reset');
    await deadGeneration(key, 1);
    await sleep(2_100);
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'retry', v: 2 } });
    await runUntil(key, JobStatus.RetryWait, 1);
    const waiting = await makeWorker(env, registry).store.get(key);

    // Act
    const report = await redrive(target(), { filter: { dedupKey: key }, by: 'test' });

    // Assess: L1 skipped with its reason; J2's item untouched; nothing sent; L1 still in the DLQ.
    expect(report).toMatchObject({ matched: 1, redriven: 0, skipped: 1 });
    const [skipped] = itemOf(report, 'skipped');
    expect(skipped).toMatchObject({ skip: 'newer-job', reset: false });
    expect(skipped?.detail).toMatch(/reset by a fresh send after this letter's death/);
    const after = await makeWorker(env, registry).store.get(key);
    expect(after).toMatchObject({ status: JobStatus.RetryWait, attempts: 1, version: waiting?.version });
    expect(await sentVersions(key)).toEqual([]);
    expect(await letterVersions(key)).toEqual([1]);

    // The CLI says so too, in its text and its JSON (a skip changes nothing: asking again is the same).
    const prefix = env.jobsTable.replace(/-jobs$/, '');
    const text = await leaseq(['dlq', 'redrive', '--dedup-key', key, '--prefix', prefix, '--yes']);
    expect(text.stdout).toMatch(/skipped \(newer-job\)/);
    expect(text.stdout).toContain('skipped 1 (1 newer-job)');
    const json = await leaseqJson<RedriveReport>([
      'dlq',
      'redrive',
      '--dedup-key',
      key,
      '--prefix',
      prefix,
      '--yes',
    ]);
    expect(json.items).toEqual([expect.objectContaining({ outcome: 'skipped', skip: 'newer-job' })]);
  }, 60_000);

  it('of two letters of one key (two deaths, a reset between), sends the newest death and skips the older', async () => {
    // Prepare: J1 dies (L1, v1); after the TTL J2 dies too (L2, v2). L1 is older, so browsed first.
    const key = uniqueName('twice');
    await deadGeneration(key, 1);
    await sleep(2_100);
    await deadGeneration(key, 2);
    expect(await letterVersions(key)).toEqual([1, 2]);

    // Act
    const report = await redrive(target(), { filter: { dedupKey: key }, by: 'test' });

    // Assess: v2 runs again (the item reset), v1 stays in the DLQ, reported as not the item's job.
    expect(report).toMatchObject({ matched: 2, redriven: 1, skipped: 1, duplicates: 0 });
    expect(itemOf(report, 'skipped')[0]).toMatchObject({ skip: 'newer-job' });
    expect(await sentVersions(key)).toEqual([2]);
    expect(await letterVersions(key)).toEqual([1]);
    const item = await makeWorker(env, registry).store.get(key);
    expect(item).toMatchObject({ status: JobStatus.RetryWait, attempts: 0 });
  }, 60_000);

  it('of two deaths of one job (a redrive between whose letter stayed), sends the newest death, not the older payload', async () => {
    // Prepare: the job dies with v1 (L1); an edit-and-retry sends v2, whose delete of L1 fails (a copy of
    // L1 is put back); v2 dies too (L2). The item names v2's death.
    const key = uniqueName('again');
    await deadGeneration(key, 1);
    const [l1] = (await receiveAll(env, env.dlqUrl, 0)).filter(
      (m) => parseEnvelope(m.Body ?? '').dedupKey === key,
    );
    const first = await redrive(target(), {
      filter: { dedupKey: key },
      by: 'test',
      payload: { value: { mode: 'die', v: 2 } },
    });
    expect(first).toMatchObject({ redriven: 1 });
    await env.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: env.dlqUrl,
        MessageBody: l1?.Body ?? '',
        MessageAttributes: l1?.MessageAttributes as Record<string, MessageAttributeValue>,
      }),
    );
    await runUntil(key, JobStatus.Dead);
    expect(await letterVersions(key)).toEqual([1, 2]);

    // Act
    const report = await redrive(target(), { filter: { dedupKey: key }, by: 'test' });

    // Assess
    expect(report).toMatchObject({ matched: 2, redriven: 1, skipped: 1, duplicates: 0 });
    expect(itemOf(report, 'skipped')[0]).toMatchObject({ skip: 'older-letter' });
    expect(await sentVersions(key)).toEqual([2]);
    expect(await letterVersions(key)).toEqual([1]);
  }, 60_000);
});

/**
 * A job under `key` waiting 10 minutes for its retry, and the letter of a copy whose payload its schema
 * refused before any claim (attempts 0).
 */
async function waitingJobWithRefusedCopy(key: string): Promise<void> {
  await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'retry', v: 1 } });
  await runUntil(key, JobStatus.RetryWait, 1);
  await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'bogus', v: 9 } });
  const worker = makeWorker(env, registry);
  const lettered = await eventually(async () => {
    await worker.poll(1);
    return (await letterVersions(key)).includes(9);
  }, 20_000);
  expect(lettered).toBe(true);
}

describe('Function: redrive, with a never-claimed letter (attempts 0) of a key that holds a job', () => {
  it('skips the letter when the job was cancelled, rather than reporting it redriven', async () => {
    // Prepare
    const key = uniqueName('cancelled');
    await waitingJobWithRefusedCopy(key);
    expect(await cancelJob(target(), key, { by: 'test' })).toMatchObject({ outcome: 'cancelled' });

    // Act
    const report = await redrive(target(), { filter: { dedupKey: key }, by: 'test' });

    // Assess
    expect(report).toMatchObject({ matched: 1, redriven: 0, skipped: 1 });
    expect(report.items[0]).toMatchObject({ outcome: 'skipped', skip: 'cancelled' });
    expect(await sentVersions(key)).toEqual([]);
    expect(await letterVersions(key)).toEqual([9]);
  }, 60_000);

  it('skips the letter while the job waits on its own message: the copy would be dropped, or run over it', async () => {
    // Prepare
    const key = uniqueName('waiting');
    await waitingJobWithRefusedCopy(key);
    const before = await makeWorker(env, registry).store.get(key);

    // Act
    const report = await redrive(target(), { filter: { dedupKey: key }, by: 'test' });

    // Assess
    expect(report.items[0]).toMatchObject({ outcome: 'skipped', skip: 'other-message' });
    expect(await sentVersions(key)).toEqual([]);
    expect(await makeWorker(env, registry).store.get(key)).toMatchObject({
      status: JobStatus.RetryWait,
      version: before?.version,
    });
  }, 60_000);
});
