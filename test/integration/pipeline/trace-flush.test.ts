import { createServer, type Server, type Socket } from 'node:net';
import { Logger } from '@aws-lambda-powertools/logger';
import { trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { toSqsRecord } from '../../../shared/runner/sqs-records.ts';
import { workerConfigFromEnv, workerEnv } from '../../../shared/worker/config.ts';
import { createWorkerHandler } from '../../../shared/worker/handler.ts';
import { startTracingFromEnv } from '../../../shared/worker/tracing.ts';
import { type CoreEnv, coreEnv, makeWorker, receiveAll, sendJob } from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';

// A collector that hangs (accepts the connection, never answers) must not hold the invocation past its
// deadline: Lambda would fail the whole batch and every completed record would come back. Its own file:
// the worker's trace pipeline is registered once per process.

let env: CoreEnv;
let blackHole: Server;
const sockets = new Set<Socket>();

beforeAll(async () => {
  blackHole = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
  const address = blackHole.address();
  // The exporter reads the endpoint from process.env itself.
  vi.stubEnv(
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`,
  );
  env = await coreEnv('flush');
});

afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => blackHole.close(() => resolve()));
  await startTracingFromEnv()
    ?.shutdown()
    .catch(() => undefined);
  trace.disable();
  vi.unstubAllEnvs();
  env?.close();
});

describe('Function: createWorkerHandler, trace flush', () => {
  // 3 s left: the deadline bounds the flush. 30 s left: the flush's own cap (2 s) does, so a collector
  // that hangs for good does not bill every invocation up to its timeout.
  it.each([
    { leftMs: 3000, withinMs: 3000 },
    { leftMs: 30_000, withinMs: 3500 },
  ])(
    'returns the batch result in time when the OTLP collector never answers ($leftMs ms left)',
    async ({ leftMs, withinMs }) => {
      // Prepare: tracing on (endpoint = the black hole), an invocation with `leftMs` left and a 1 s margin.
      const logger = new Logger({ serviceName: 'leaseq-test', logLevel: 'SILENT' });
      const warn = vi.spyOn(logger, 'warn');
      const config = workerConfigFromEnv(
        workerEnv({
          queueUrl: env.queueUrl,
          dlqUrl: env.dlqUrl,
          jobsTable: env.jobsTable,
          leasesTable: env.leasesTable,
          deadlineMarginMs: 1000,
        }),
      );
      const handler = createWorkerHandler({
        jobs: ledgerJobs,
        config,
        env: process.env,
        clients: env.clients,
        tableNames: { ledger: env.ledgerTable },
        worker: 'w-flush',
        logger,
      });
      const key = uniqueName('flush');
      await sendJob(env, {
        dedupKey: key,
        type: 'ledger.credit',
        payload: { account: uniqueName('a'), amount: 1 },
      });
      const [message] = await receiveAll(env, env.queueUrl, 30, 2);
      expect(message?.Body).toContain(key);
      if (!message) return;

      // Act
      const invokedAt = Date.now();
      const response = await handler(
        { Records: [toSqsRecord(message, env.queueArn, env.region)] },
        { getRemainingTimeInMillis: () => Math.max(0, invokedAt + leftMs - Date.now()) },
      );
      const tookMs = Date.now() - invokedAt;

      // Assess: in time, the record done (not listed), the job completed, one WARN line without the key.
      expect(tookMs).toBeLessThan(withinMs);
      expect(response.batchItemFailures).toEqual([]);
      expect((await makeWorker(env, ledgerJobs).store.get(key))?.status).toBe(JobStatus.Completed);
      const flushWarnings = warn.mock.calls.filter(([m]) => String(m).includes('trace'));
      expect(flushWarnings).toHaveLength(1);
      expect(JSON.stringify(flushWarnings)).not.toContain(key);
    },
  );
});
