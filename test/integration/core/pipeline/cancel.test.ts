import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { versionedPut } from '../../../../shared/core/decisions/optimistic.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import {
  type CoreEnv,
  coreEnv,
  getBalance,
  makeWorker,
  queueCounts,
  receiveAll,
  sendJob,
  sleep,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { testRegistry } from '../../../support/test-jobs.ts';

// Issue 21, item 1, against the emulator's SQS and DynamoDB: a cancelled job stops at its next heartbeat
// and writes nothing (its effect, its completion); a cancel before the message leaves a tombstone that
// drops it; a cancelled retry never runs.

const LEASE_MS = 3000;
/** The heartbeat's period under LEASE_MS (leased-run.ts: a third of the lease). */
const BEAT_MS = LEASE_MS / 3;

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('cancel');
});
afterAll(() => env?.close());

/** Receives this key's message (waiting for it up to `rounds` receives). */
async function receiveFor(key: string, rounds = 8) {
  for (let i = 0; i < rounds; i++) {
    const mine = (await receiveAll(env, env.queueUrl, 30, 2)).find((m) => m.Body?.includes(key));
    if (mine) return toSqsRecord(mine, env.queueArn, env.region);
  }
  throw new Error(`no message for ${key}`);
}

/**
 * A job that runs long, ignoring its signal (as a careless job would), and then commits a ledger effect:
 * `sawCancel` is when its signal aborted, `started` resolves once it runs.
 */
function slowCredit() {
  const seen = { started: 0, sawCancel: 0, reason: undefined as unknown, runs: 0 };
  let markStarted: () => void = () => {};
  const started = new Promise<void>((resolve) => {
    markStarted = resolve;
  });
  const job = defineJob({
    type: 'test.slow-credit',
    payload: z.object({ account: z.string(), runMs: z.number() }),
    async run(ctx, p) {
      seen.runs += 1;
      seen.started = Date.now();
      ctx.signal.addEventListener('abort', () => {
        seen.sawCancel = Date.now();
        seen.reason = ctx.signal.reason;
      });
      markStarted();
      await sleep(p.runMs);
      return {
        result: 'should never be stored',
        effects: [
          versionedPut({
            tableName: env.ledgerTable,
            key: { account: p.account },
            seenVersion: undefined,
            item: { balance: 1 },
          }),
        ],
      };
    },
  });
  return { job, seen, started };
}

describe('Cancelling a job (against the emulator)', () => {
  it('stops a running job within one heartbeat; neither its effect nor its completion is written', async () => {
    // Prepare
    const { job, seen, started } = slowCredit();
    const worker = makeWorker(env, JobRegistry.of([job]), { leaseMs: LEASE_MS });
    const key = uniqueName('running');
    const account = uniqueName('acct');
    await sendJob(env, { dedupKey: key, type: job.type, payload: { account, runMs: 4 * BEAT_MS } });
    const record = await receiveFor(key);

    // Act: cancel once the job runs, timing the ack.
    const processing = worker.processor.process(record);
    await started;
    await sleep(200);
    const answer = await worker.store.cancel(key, { by: 'test@host', reason: 'mistake', now: Date.now() });
    const ackedAt = Date.now();
    const outcome = await processing;

    // Assess
    expect(answer).toEqual({ outcome: 'cancelled', status: 'IN_PROGRESS', wasRunning: true });
    expect(outcome.action).toBe('cancelled');
    expect(seen.sawCancel).toBeGreaterThan(0);
    const latency = seen.sawCancel - ackedAt;
    console.log(
      `cancel latency (cancel ack -> the job's signal aborted): ${latency} ms (heartbeat ${BEAT_MS} ms)`,
    );
    expect(latency).toBeLessThanOrEqual(BEAT_MS + 500);
    expect((seen.reason as Error).name).toBe('JobCancelledError');
    expect(await getBalance(env, account)).toBeUndefined();
    const item = await worker.store.get(key);
    expect(item).toMatchObject({ status: JobStatus.Cancelled, attempts: 1 });
    expect(item?.result).toBeUndefined();
    expect(item?.completedAt).toBeUndefined();
    expect(item?.history?.map((e) => e.e)).toEqual(['cancelled']);
    expect(worker.metrics.get(MetricName.JobCancelled)).toBe(1);
    expect(worker.metrics.get(MetricName.JobSucceeded)).toBe(0);
    expect(worker.metrics.get(MetricName.LeaseLost)).toBe(0);
    // Its message is gone: no retry, no dead letter.
    await sleep(500);
    expect(await queueCounts(env)).toMatchObject({ visible: 0, inFlight: 0 });
    expect((await queueCounts(env, env.dlqUrl)).visible).toBe(0);
  });

  it('drops a message that comes after a cancel (a tombstone): the job never runs, leased or fast', async () => {
    for (const fastPath of [false, true]) {
      // Prepare
      const registry = testRegistry(env, undefined, { fastPath });
      const worker = makeWorker(env, registry.registry);
      const key = uniqueName(fastPath ? 'tomb-fast' : 'tomb');
      const account = uniqueName('acct');
      const answer = await worker.store.cancel(key, { by: 'test@host', now: Date.now() });
      expect(answer).toEqual({ outcome: 'tombstone' });

      // Act
      await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 5 } });
      const outcome = await worker.processor.process(await receiveFor(key));

      // Assess: dropped and counted; the leased path never runs it, the fast path commits nothing.
      expect(outcome).toMatchObject({ action: 'cancelled-copy', disposition: 'delete' });
      expect(worker.metrics.get(MetricName.CancelledCopyDropped)).toBe(1);
      if (!fastPath) expect(registry.log.count(key)).toBe(0);
      expect(await getBalance(env, account)).toBeUndefined();
      expect((await worker.store.get(key))?.status).toBe(JobStatus.Cancelled);
    }
  });

  it('cancels a job waiting for its retry: the retry never runs', async () => {
    // Prepare: the first attempt fails and waits 1 s for its retry.
    const registry = testRegistry(env);
    const worker = makeWorker(env, registry.registry);
    const key = uniqueName('retry');
    const account = uniqueName('acct');
    await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 5, failTimes: 1 } });
    const first = await worker.processor.process(await receiveFor(key));
    expect(first.action).toBe('retry');

    // Act
    const answer = await worker.store.cancel(key, { by: 'test@host', now: Date.now() });
    const again = await worker.processor.process(await receiveFor(key));

    // Assess
    expect(answer).toEqual({ outcome: 'cancelled', status: 'RETRY_WAIT', wasRunning: false });
    expect(again.action).toBe('cancelled-copy');
    expect(registry.log.count(key)).toBe(1);
    expect(await getBalance(env, account)).toBeUndefined();
    expect((await worker.store.get(key))?.history?.map((e) => e.e)).toEqual(['failed', 'cancelled']);
  });

  it('answers finished for a COMPLETED job and leaves it as it was', async () => {
    // Prepare
    const registry = testRegistry(env);
    const worker = makeWorker(env, registry.registry);
    const key = uniqueName('done');
    await sendJob(env, {
      dedupKey: key,
      type: 'test.credit',
      payload: { account: uniqueName('a'), amount: 1 },
    });
    expect((await worker.processor.process(await receiveFor(key))).action).toBe('completed');
    const before = await worker.store.get(key);

    // Act
    const answer = await worker.store.cancel(key, { by: 'test@host', now: Date.now() });

    // Assess
    expect(answer).toEqual({ outcome: 'finished', status: 'COMPLETED' });
    expect(await worker.store.get(key)).toEqual(before);
  });
});
