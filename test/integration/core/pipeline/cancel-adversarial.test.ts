import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { PermanentJobError, TransientJobError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  receiveAll,
  sendJob,
  sleep,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

// Issue 21, item 1, the interleavings the first tests leave out, against the emulator: a cancel that
// lands while the job fails (for good, or for a retry) before its heartbeat sees it, and a cancelled job
// holding a concurrency slot and a named lease.

const LEASE_MS = 3000;

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('cancel-adv');
});
afterAll(() => env?.close());

async function receiveFor(key: string, rounds = 8) {
  for (let i = 0; i < rounds; i++) {
    const mine = (await receiveAll(env, env.queueUrl, 30, 2)).find((m) => m.Body?.includes(key));
    if (mine) return toSqsRecord(mine, env.queueArn, env.region);
  }
  throw new Error(`no message for ${key}`);
}

/** A job that waits for the test's cancel, then fails at once (before its next beat) as `how` says. */
function failsAfterCancel(how: 'permanent' | 'transient') {
  let markStarted: () => void = () => {};
  const started = new Promise<void>((resolve) => {
    markStarted = resolve;
  });
  let markCancelled: () => void = () => {};
  const cancelled = new Promise<void>((resolve) => {
    markCancelled = resolve;
  });
  const job = defineJob({
    type: `test.fails-after-cancel-${how}`,
    payload: z.object({ n: z.number() }),
    async run() {
      markStarted();
      await cancelled;
      throw how === 'permanent' ? new PermanentJobError('gave up') : new TransientJobError('try later');
    },
  });
  return { job, started, markCancelled };
}

describe('Cancel interleavings (against the emulator)', () => {
  for (const how of ['permanent', 'transient'] as const) {
    it(`a job failing (${how}) right after its cancel, before its heartbeat saw it: no letter, no retry`, async () => {
      // Prepare
      const { job, started, markCancelled } = failsAfterCancel(how);
      const worker = makeWorker(env, JobRegistry.of([job]), { leaseMs: LEASE_MS });
      const key = uniqueName(`fail-${how}`);
      await sendJob(env, { dedupKey: key, type: job.type, payload: { n: 1 } });
      const processing = worker.processor.process(await receiveFor(key));
      await started;

      // Act: the cancel lands between two beats; the job fails at once.
      const answer = await worker.store.cancel(key, { by: 'test@host', now: Date.now() });
      markCancelled();
      const outcome = await processing;

      // Assess
      expect(answer).toMatchObject({ outcome: 'cancelled', wasRunning: true });
      expect(outcome).toMatchObject({ action: 'cancelled', disposition: 'delete' });
      expect(worker.metrics.get(MetricName.JobCancelled)).toBe(1);
      expect(worker.metrics.get(MetricName.JobDeadLettered)).toBe(0);
      expect(worker.metrics.get(MetricName.JobRetried)).toBe(0);
      expect((await worker.store.get(key))?.status).toBe(JobStatus.Cancelled);
      await sleep(300);
      expect((await queueCounts(env, env.dlqUrl)).visible).toBe(0);
      expect(await queueCounts(env)).toMatchObject({ visible: 0, inFlight: 0 });
    });
  }

  it('a cancelled job that stops on its signal gives back its concurrency slot and its named lease', async () => {
    // Prepare: a type-wide limit of 1; the job holds a named lease while it runs and stops when told.
    // (One that ignores its signal keeps its slot until it ends: test "does not free the slot to another
    // job while the abandoned run is still running".)
    const type = uniqueName('t_cslot');
    const named = uniqueName('named');
    let markStarted: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      markStarted = resolve;
    });
    const job = defineJob({
      type,
      payload: z.object({ runMs: z.number() }),
      concurrency: { limit: 1 },
      async run(ctx, p) {
        await ctx.withLease(named, async () => {
          markStarted();
          await new Promise<void>((resolve, reject) => {
            const timer = setTimeout(resolve, p.runMs);
            ctx.signal.addEventListener('abort', () => {
              clearTimeout(timer);
              reject(ctx.signal.reason);
            });
          });
        });
      },
    });
    const worker = makeWorker(env, JobRegistry.of([job]), { leaseMs: LEASE_MS });
    const key = uniqueName('slotted');
    await sendJob(env, { dedupKey: key, type, payload: { runMs: 4 * LEASE_MS } });
    const processing = worker.processor.process(await receiveFor(key));
    await started;

    // Act
    await worker.store.cancel(key, { by: 'test@host', now: Date.now() });
    const outcome = await processing;

    // Assess: both lease items are free (no owner, lease ended) well within one lease of the outcome.
    expect(outcome.action).toBe('cancelled');
    const read = async (leaseKey: string) =>
      (await env.clients.doc.send(new GetCommand({ TableName: env.leasesTable, Key: { leaseKey } }))).Item;
    const keys = [`slot:${type}:*#0`, named];
    const freed = await eventually(
      async () => (await Promise.all(keys.map(read))).every((item) => item?.owner === undefined),
      LEASE_MS / 2,
      50,
    );
    for (const leaseKey of keys) {
      const item = await read(leaseKey);
      expect(item, leaseKey).toBeDefined();
      expect(item?.owner, leaseKey).toBeUndefined();
      expect(item?.leaseUntil, leaseKey).toBe(0);
    }
    expect(freed).toBe(true);
  });
});
