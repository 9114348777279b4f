import { Logger } from '@aws-lambda-powertools/logger';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { toSqsRecord } from '../../../shared/runner/sqs-records.ts';
import { workerConfigFromEnv, workerEnv } from '../../../shared/worker/config.ts';
import { createWorkerHandler } from '../../../shared/worker/handler.ts';
import { type CoreEnv, coreEnv, makeWorker, receiveAll, sendJob } from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';

// The OpenTelemetry SDK loads lazily, on the first invocation with OTEL_* set (tracing.ts). A load that
// fails (the module left out of the bundle, a bad OTEL_* setting the SDK throws on) costs the traces only:
// the jobs still run. Its own file: the worker's trace pipeline is registered once per process.
vi.mock('../../../shared/worker/tracing-sdk.ts', () => {
  throw new Error("Cannot find module '@opentelemetry/sdk-trace-node'");
});

let env: CoreEnv;

beforeAll(async () => {
  vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', 'http://127.0.0.1:9');
  env = await coreEnv('traceload');
});

afterAll(() => {
  vi.unstubAllEnvs();
  env?.close();
});

describe('Function: createWorkerHandler, tracing SDK that fails to load', () => {
  it('runs the batch without traces and warns once, when the tracing SDK cannot be loaded', async () => {
    // Prepare: tracing on, its SDK module missing; the handler created at init as in Lambda.
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    const logger = new Logger({ serviceName: 'leaseq-test', logLevel: 'SILENT' });
    const warn = vi.spyOn(logger, 'warn');
    const config = workerConfigFromEnv(
      workerEnv({
        queueUrl: env.queueUrl,
        dlqUrl: env.dlqUrl,
        jobsTable: env.jobsTable,
        leasesTable: env.leasesTable,
      }),
    );
    const handler = createWorkerHandler({
      jobs: ledgerJobs,
      config,
      env: process.env,
      clients: env.clients,
      tableNames: { ledger: env.ledgerTable },
      worker: 'w-traceload',
      logger,
    });
    // Init ends before the first invocation: the failed load must not be an unhandled rejection.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const keys = [uniqueName('tl'), uniqueName('tl')];

    // Act: two invocations, one job each.
    const responses = [];
    for (const key of keys) {
      await sendJob(env, {
        dedupKey: key,
        type: 'ledger.credit',
        payload: { account: uniqueName('a'), amount: 1 },
      });
      const [message] = await receiveAll(env, env.queueUrl, 30, 1);
      expect(message?.Body).toContain(key);
      if (!message) return;
      responses.push(
        await handler(
          { Records: [toSqsRecord(message, env.queueArn, env.region)] },
          { getRemainingTimeInMillis: () => 30_000 },
        ),
      );
    }
    process.off('unhandledRejection', onRejection);

    // Assess: both records done, both jobs completed, no unhandled rejection, one WARN about tracing.
    expect(responses).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
    const store = makeWorker(env, ledgerJobs).store;
    for (const key of keys) expect((await store.get(key))?.status).toBe(JobStatus.Completed);
    expect(rejections).toEqual([]);
    expect(warn.mock.calls.filter(([m]) => /trac/.test(String(m)))).toHaveLength(1);
  });
});
