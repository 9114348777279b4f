import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exampleJobs } from '../../../jobs/registry.ts';
import { JobStatus } from '../../../shared/core/statuses.ts';
import { toSqsRecord } from '../../../shared/runner/sqs-records.ts';
import { workerConfigFromEnv, workerEnv } from '../../../shared/worker/config.ts';
import { createWorkerHandler } from '../../../shared/worker/handler.ts';
import {
  type CoreEnv,
  coreEnv,
  makeWorker,
  queueCounts,
  quietLogger,
  receiveAll,
  sendJob,
} from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('handler');
});
afterAll(() => env?.close());

describe('Function: createWorkerHandler', () => {
  it('never lets a lease outlive the invocation deadline: a job still running then is given back', async () => {
    // Prepare: a 30 s lease, but an invocation with 2.5 s left and a 0.5 s margin.
    const config = workerConfigFromEnv(
      workerEnv({
        queueUrl: env.queueUrl,
        dlqUrl: env.dlqUrl,
        jobsTable: env.jobsTable,
        ledgerTable: env.ledgerTable,
        leaseMs: 30_000,
        deadlineMarginMs: 500,
      }),
    );
    const handler = createWorkerHandler({
      clients: env.clients,
      config,
      registry: exampleJobs({ doc: env.clients.doc, ledgerTable: env.ledgerTable }),
      worker: 'w-deadline',
      logger: quietLogger(),
    });
    const key = uniqueName('deadline');
    await sendJob(env, {
      dedupKey: key,
      type: 'ledger.credit',
      payload: { account: uniqueName('a'), amount: 1, simulate: { sleepMs: 8000 } },
    });
    const [message] = await receiveAll(env, env.queueUrl, 30, 2);
    expect(message).toBeDefined();
    if (!message) return;

    // Act: watch the job item while the invocation runs.
    const invokedAt = Date.now();
    const store = makeWorker(env, exampleJobs({ doc: env.clients.doc, ledgerTable: env.ledgerTable })).store;
    let running = true;
    const leaseEnds: number[] = [];
    const watcher = (async () => {
      while (running) {
        const item = await store.get(key);
        if (item?.status === JobStatus.InProgress) leaseEnds.push(item.leaseUntil);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const response = await handler(
      { Records: [toSqsRecord(message, env.queueArn, env.region)] },
      { getRemainingTimeInMillis: () => Math.max(0, invokedAt + 2500 - Date.now()) },
    );
    const returnedAt = Date.now();
    running = false;
    await watcher;

    // Assess
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: message.MessageId }]);
    expect(returnedAt - invokedAt).toBeLessThan(8000);
    const item = await makeWorker(
      env,
      exampleJobs({ doc: env.clients.doc, ledgerTable: env.ledgerTable }),
    ).store.get(key);
    expect(item?.status).toBe(JobStatus.RetryWait);
    expect(item?.lastErrorClass).toBe('DeadlineError');
    // While it ran, its lease never reached past the deadline (remaining time less the margin), not
    // the 30 s lease it would have taken without one.
    expect(leaseEnds.length).toBeGreaterThan(0);
    expect(Math.max(...leaseEnds)).toBeLessThanOrEqual(invokedAt + 2000);
    // Given back at once (visibility 0), not after the 30 s it was received with.
    expect(await queueCounts(env)).toMatchObject({ visible: 1 });
  });

  it('rejects a worker environment that lacks names, listing each', () => {
    expect(() => workerConfigFromEnv({})).toThrow(
      /LEASEQ_JOBS_QUEUE_URL is required.*LEASEQ_DLQ_URL is required.*LEASEQ_JOBS_TABLE is required/,
    );
    expect(() =>
      workerConfigFromEnv({
        ...workerEnv({ queueUrl: 'q', dlqUrl: 'd', jobsTable: 'j', ledgerTable: 'l' }),
        LEASEQ_LEASE_MS: '-5',
      }),
    ).toThrow(/LEASEQ_LEASE_MS must be > 0/);
  });
});
