// Where a redrive meets the workers and the store at the same moment (issue 31, item 1): the redrive plans
// from one read of the job item and resets it later; whatever claimed the key in between must win.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAwsClients, destroyAwsClients } from '../../../shared/aws/clients.ts';
import { FaultInjector } from '../../../shared/aws/fault-injector.ts';
import { parseEnvelope } from '../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../shared/core/model/registry.ts';
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
import { testEndpoint, uniqueName } from '../../support/env.ts';

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
  const clients = createAwsClients({ endpoint: testEndpoint(), region: env.region });
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
    const faulty = createAwsClients({ endpoint: testEndpoint(), region: env.region });
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
    const faulty = createAwsClients({ endpoint: testEndpoint(), region: env.region, maxAttempts: 1 });
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
