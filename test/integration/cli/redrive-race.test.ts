// Where a redrive meets the workers and the store at the same moment (issue 31, item 1): the redrive plans
// from one read of the job item and resets it later; whatever claimed the key in between must win.
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { DeleteCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAwsClients, destroyAwsClients } from '../../../shared/aws/clients.ts';
import { FaultInjector } from '../../../shared/aws/fault-injector.ts';
import { parseEnvelope } from '../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../shared/core/model/registry.ts';
import { payloadProblem } from '../../../shared/core/model/standard-schema.ts';
import { PermanentJobError } from '../../../shared/errors.ts';
import { listDeadJobs } from '../../../shared/ops/dlq-jobs.ts';
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
import { testAwsConfig, uniqueName } from '../../support/env.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('rdrace');
});
afterAll(() => env?.close());

const TYPE = 'test.race';
/** Dead keys of this type take a fresh send 2 s after their death. */
const registry = new JobRegistry().register({
  type: TYPE,
  deadKeyTtl: 2,
  payload: z.object({ mode: z.enum(['die', 'retry']), v: z.number() }),
  run: async (_ctx, p) => {
    if (p.mode === 'die') throw new PermanentJobError(`broken v${p.v}`);
    throw new Error(`try again v${p.v}`);
  },
});

const names = () => ({
  queueUrl: env.queueUrl,
  dlqUrl: env.dlqUrl,
  jobsTable: env.jobsTable,
  leasesTable: env.leasesTable,
});

/** Runs a worker until the item under `key` has `status` (a retry waits 10 minutes). */
async function runUntil(key: string, status: string): Promise<void> {
  const worker = makeWorker(env, registry, { backoff: { baseSeconds: 600, capSeconds: 600 } });
  const reached = await eventually(async () => {
    await worker.poll(1);
    return (await worker.store.get(key))?.status === status;
  }, 20_000);
  expect(reached).toBe(true);
}

/** Payload versions of the visible jobs-queue messages of `key` (received, so hidden after). */
async function sentVersions(key: string): Promise<number[]> {
  const messages = await receiveAll(env, env.queueUrl, 60);
  return messages
    .map((m) => parseEnvelope(m.Body ?? ''))
    .filter((e) => e.dedupKey === key)
    .map((e) => (e.payload as { v: number }).v);
}

/** Clients whose first job-item read (GetItem) runs `between` after its answer came, before the caller sees it. */
function clientsPausingAfterRead(between: () => Promise<void>) {
  const clients = createAwsClients({ ...testAwsConfig(), region: env.region });
  let armed = true;
  clients.ddb.middlewareStack.add(
    (next, context) => async (args) => {
      const out = await next(args);
      if (armed && /^Get(Item)?Command$/.test(String(context.commandName))) {
        armed = false;
        await between();
      }
      return out;
    },
    { step: 'finalizeRequest', name: 'pauseAfterRead' },
  );
  return clients;
}

describe('Function: redrive, racing a worker on the same key', () => {
  it('leaves the letter when a fresh send reset the dead key between the read and the reset (the newer job waits untouched)', async () => {
    // Prepare: J1 dies (letter L1) and its dead key's 2 s pass. The redrive reads J1's DEAD item; before
    // its reset, a fresh send J2 resets the key, a real worker runs it, it fails once and waits in RETRY_WAIT.
    const key = uniqueName('race');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'die', v: 1 } });
    await runUntil(key, JobStatus.Dead);
    await sleep(2_100);
    let waiting: Awaited<ReturnType<ReturnType<typeof makeWorker>['store']['get']>>;
    const racing = clientsPausingAfterRead(async () => {
      await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'retry', v: 2 } });
      await runUntil(key, JobStatus.RetryWait);
      waiting = await makeWorker(env, registry).store.get(key);
    });

    // Act
    const report = await redrive(
      { clients: racing, names: names() },
      { filter: { dedupKey: key }, by: 'test' },
    );
    destroyAwsClients(racing);

    // Assess: L1 is not sent over J2; J2's item is as its own failure left it; L1 stays in the DLQ.
    expect(waiting?.history?.some((e) => e.e === 'reset')).toBe(true);
    expect(report.items).toEqual([expect.objectContaining({ outcome: 'skipped', skip: 'changed' })]);
    expect(await sentVersions(key)).toEqual([]);
    const after = await makeWorker(env, registry).store.get(key);
    expect(after).toMatchObject({ status: JobStatus.RetryWait, attempts: 1, version: waiting?.version });
  }, 60_000);

  it('redrives once when the reset landed and its answer was lost (the retry finds its own reset)', async () => {
    // Prepare: J1 dies (letter L1). The reset's UpdateItem is applied, then its answer lost (a 503): the
    // SDK tries it again.
    const key = uniqueName('lost');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'die', v: 1 } });
    await runUntil(key, JobStatus.Dead);
    const dead = await makeWorker(env, registry).store.get(key);
    const faulty = createAwsClients({ ...testAwsConfig(), region: env.region });
    const faults = new FaultInjector()
      .attach(faulty)
      .fail({ service: 'DynamoDB', command: 'UpdateItem', times: 1, when: 'after' });

    // Act
    const report = await redrive(
      { clients: faulty, names: names() },
      { filter: { dedupKey: key }, by: 'test' },
    );
    destroyAwsClients(faulty);

    // Assess: one reset (one redrive event, the version moved by one), L1 sent once and gone from the DLQ.
    expect(faults.injected.get('DynamoDB.UpdateItem')).toBe(1);
    expect(report.items).toEqual([expect.objectContaining({ outcome: 'redriven', reset: true })]);
    const after = await makeWorker(env, registry).store.get(key);
    expect(after).toMatchObject({ status: JobStatus.RetryWait, attempts: 0 });
    expect(after?.history?.filter((e) => e.e === 'redrive')).toHaveLength(1);
    expect(after?.version).toBe((dead?.version ?? 0) + 1);
    expect(await sentVersions(key)).toEqual([1]);
  }, 60_000);
});

describe('Function: redrive, when its send fails after the reset', () => {
  it('puts the job back DEAD as it was, listed by dlq list, not waiting in RETRY_WAIT for a message never sent', async () => {
    // Prepare: J1 dies (letter L1). Every SendMessage of the redrive fails (the SDK's tries too).
    const key = uniqueName('unsent');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'die', v: 1 } });
    await runUntil(key, JobStatus.Dead);
    const dead = await makeWorker(env, registry).store.get(key);
    const faulty = createAwsClients({ ...testAwsConfig(), region: env.region, maxAttempts: 1 });
    new FaultInjector().attach(faulty).fail({ service: 'SQS', command: 'SendMessage', times: 1 });

    // Act
    const report = await redrive(
      { clients: faulty, names: names() },
      { filter: { dedupKey: key }, by: 'test' },
    );
    destroyAwsClients(faulty);

    // Assess: reported failed; the item DEAD with its reason and attempts (no message brings it back
    // otherwise); dlq list shows it; L1 still in the DLQ; the next redrive sends it.
    expect(report.items).toEqual([expect.objectContaining({ outcome: 'failed' })]);
    const after = await makeWorker(env, registry).store.get(key);
    expect(after).toMatchObject({
      status: JobStatus.Dead,
      attempts: dead?.attempts,
      deadReason: dead?.deadReason,
      deadKeyUntil: dead?.deadKeyUntil,
    });
    const listed = await eventually(async () => {
      const { jobs } = await listDeadJobs({ clients: env.clients, names: names() });
      return jobs.some((j) => j.dedupKey === key);
    }, 10_000);
    expect(listed).toBe(true);
    const again = await redrive(
      { clients: env.clients, names: names() },
      { filter: { dedupKey: key }, by: 'test' },
    );
    expect(again.items).toEqual([expect.objectContaining({ outcome: 'redriven', reset: true })]);
    expect(await sentVersions(key)).toEqual([1]);
  }, 60_000);
});

/** The DLQ's letters of `key` (received with visibility 0: they stay visible). */
async function lettersOf(key: string) {
  return (await receiveAll(env, env.dlqUrl, 0)).filter((m) => parseEnvelope(m.Body ?? '').dedupKey === key);
}

describe('Function: redrive, where it meets what was there (probes)', () => {
  it('two operators redriving two letters of one death at once send the job once', async () => {
    // Prepare: J1 dies (L1). Operator A browses L1 and reads the item; meanwhile a second letter of the
    // same death reaches the DLQ (an interrupted dead-lettering sends two) and operator B redrives it.
    const key = uniqueName('twoops');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'die', v: 1 } });
    await runUntil(key, JobStatus.Dead);
    const [l1] = await lettersOf(key);
    let other: Awaited<ReturnType<typeof redrive>> | undefined;
    const racing = clientsPausingAfterRead(async () => {
      await env.clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: env.dlqUrl,
          MessageBody: l1?.Body ?? '',
          MessageAttributes: l1?.MessageAttributes as never,
        }),
      );
      other = await redrive({ clients: env.clients, names: names() }, { filter: { dedupKey: key }, by: 'b' });
    });

    // Act
    const report = await redrive({ clients: racing, names: names() }, { filter: { dedupKey: key }, by: 'a' });
    destroyAwsClients(racing);

    // Assess: one of the two runs sent the job; the other's reset found the item moved.
    const sent = [...report.items, ...(other?.items ?? [])].filter((i) => i.outcome === 'redriven');
    expect(sent).toHaveLength(1);
    expect(report.items).toEqual([expect.objectContaining({ outcome: 'skipped', skip: 'changed' })]);
    expect(await sentVersions(key)).toEqual([1]);
  }, 60_000);

  it('sends the letter of a job whose item TTL removed (no item at all), as it is', async () => {
    // Prepare: J1 dies; its item is deleted as TTL would.
    const key = uniqueName('expired');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'die', v: 1 } });
    await runUntil(key, JobStatus.Dead);
    await env.clients.doc.send(new DeleteCommand({ TableName: env.jobsTable, Key: { dedupKey: key } }));

    // Act
    const report = await redrive(
      { clients: env.clients, names: names() },
      { filter: { dedupKey: key }, by: 'test' },
    );

    // Assess
    expect(report.items).toEqual([expect.objectContaining({ outcome: 'redriven', reset: false })]);
    expect(await sentVersions(key)).toEqual([1]);
    expect(await lettersOf(key)).toEqual([]);
  }, 60_000);

  it("skips a letter the queue's own redrive moved (no leaseq attributes) of a key a fresh send reset since", async () => {
    // Prepare: J1 dies; a copy of its message reaches the DLQ the way SQS moves one (body only), before
    // the dead key's TTL; then a fresh send J2 resets the key and waits in RETRY_WAIT.
    const key = uniqueName('sqsmoved');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'die', v: 1 } });
    await runUntil(key, JobStatus.Dead);
    const [l1] = await lettersOf(key);
    await env.clients.sqs.send(new SendMessageCommand({ QueueUrl: env.dlqUrl, MessageBody: l1?.Body ?? '' }));
    await sleep(2_100);
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'retry', v: 2 } });
    await runUntil(key, JobStatus.RetryWait);
    const waiting = await makeWorker(env, registry).store.get(key);

    // Act
    const report = await redrive(
      { clients: env.clients, names: names() },
      { filter: { dedupKey: key }, by: 'test' },
    );

    // Assess: both letters skipped as older than the reset, the moved one too; J2 untouched.
    expect(report.items.map((i) => [i.reason, i.outcome, i.skip]).sort()).toEqual([
      ['permanent-error', 'skipped', 'newer-job'],
      ['sqs-max-receives', 'skipped', 'newer-job'],
    ]);
    expect(await sentVersions(key)).toEqual([]);
    expect((await makeWorker(env, registry).store.get(key))?.version).toBe(waiting?.version);
  }, 60_000);

  it('checks an edited payload against a transforming schema but sends the payload as given, not the parsed output', async () => {
    // Prepare: J1 dies; the schema trims and lower-cases `to`, and defaults `n`.
    const key = uniqueName('transform');
    await sendJob(env, { dedupKey: key, type: TYPE, payload: { mode: 'die', v: 1 } });
    await runUntil(key, JobStatus.Dead);
    const schema = z.object({
      mode: z.string(),
      v: z.number(),
      to: z.string().transform((t) => t.trim().toLowerCase()),
      n: z.number().default(5),
    });
    const value = { mode: 'die', v: 3, to: '  Ana@Example.COM ' };

    // Act
    const report = await redrive(
      { clients: env.clients, names: names() },
      {
        filter: { dedupKey: key },
        by: 'test',
        payload: { value, check: (_type, payload) => payloadProblem(schema, payload) },
      },
    );

    // Assess: the body carries the operator's payload; the worker's parse transforms it once.
    expect(report.items).toEqual([expect.objectContaining({ outcome: 'redriven' })]);
    const messages = (await receiveAll(env, env.queueUrl, 60)).filter(
      (m) => parseEnvelope(m.Body ?? '').dedupKey === key,
    );
    expect(messages.map((m) => parseEnvelope(m.Body ?? '').payload)).toEqual([value]);
  }, 60_000);
});
