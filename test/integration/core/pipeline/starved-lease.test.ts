import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import type { RecordAction } from '../../../../shared/core/pipeline/outcome.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import { type CoreEnv, coreEnv, makeWorker, receiveAll, sendJob } from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

// Defect 4 of issue 18, against the emulator with a real event loop: a job that blocks its own event loop
// for 1.3 s under a 1.2 s lease (then awaits) trips the heartbeat's watchdog. The attempt used to be refunded on every
// run-out (8 receives, attempts 0 after each, RETRY_WAIT forever, no letter). Now it counts: with
// maxAttempts 2 the second run-out dead-letters the job.

const LEASE_MS = 1200;

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('starved');
});
afterAll(() => env?.close());

/** Blocks the event loop for `ms`, as heavy synchronous work does (the heartbeat cannot run meanwhile). */
function blockFor(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // spin
  }
}

describe('A job that blocks its own event loop past its lease (against the emulator)', () => {
  it('uses its attempts and is dead-lettered, instead of being refunded and retried forever', async () => {
    // Prepare
    const work = defineJob({
      type: 'test.hog',
      payload: z.object({}),
      async run() {
        blockFor(LEASE_MS + 100);
        // Its next await lets the watchdog fire: the worker stops waiting for the job there.
        await new Promise((resolve) => setTimeout(resolve, 200));
        return { result: 'never committed' };
      },
    });
    const worker = makeWorker(env, JobRegistry.of([work]), {
      leaseMs: LEASE_MS,
      maxAttempts: 2,
      backoff: { baseSeconds: 1, capSeconds: 1 },
    });
    const key = uniqueName('hog');
    await sendJob(env, { dedupKey: key, type: 'test.hog', payload: {} });

    // Act: deliver the message until it is no longer given back (at most 6 receives).
    const actions: RecordAction[] = [];
    const attemptsAfter: (number | undefined)[] = [];
    for (let round = 0; round < 6; round++) {
      const mine = (await receiveAll(env, env.queueUrl, 30, 2)).find((m) => m.Body?.includes(key));
      if (!mine) continue;
      const outcome = await worker.processor.process(toSqsRecord(mine, env.queueArn, env.region));
      actions.push(outcome.action);
      attemptsAfter.push((await worker.store.get(key))?.attempts);
      if (outcome.action === 'dead-lettered') break;
    }

    // Assess: the first run-out is released with its attempt counted, the second one dead-letters.
    expect(actions).toEqual(['lease-ran-out', 'dead-lettered']);
    expect(attemptsAfter).toEqual([1, 2]);
    const item = await worker.store.get(key);
    expect(item).toMatchObject({ status: JobStatus.Dead, attempts: 2, lastErrorClass: 'LeaseRanOutError' });
    expect(item?.refunds).toBeUndefined();
    expect(worker.metrics.get(MetricName.StoreUnavailable)).toBe(0);
    const letters = (await receiveAll(env, env.dlqUrl, 30, 2)).filter((m) => m.Body?.includes(key));
    expect(letters).toHaveLength(1);
    expect(readDeadLetterAttributes(letters[0]?.MessageAttributes ?? {})).toMatchObject({
      reason: 'max-attempts',
      errorClass: 'LeaseRanOutError',
      attempts: '2',
    });
  }, 180_000);
});
