import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ToxiproxyFront, toxiproxyBinary } from '../../../../chaos/toxiproxy.ts';
import { createAwsClients, destroyAwsClients } from '../../../../shared/aws/clients.ts';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { SqsJobQueue } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics } from '../../../../shared/core/observe/metrics.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import { type CoreEnv, coreEnv, quietLogger, receiveAll, sendJob } from '../../../support/core-fixture.ts';
import { testCredentials, testEndpoint, uniqueName } from '../../../support/env.ts';

// A slow store for real: the job store's DynamoDB calls go through Toxiproxy to the emulator, and the
// proxy holds every answer back longer than what is left of the lease. The processor must stop the job
// by the end of its lease (no second worker could have been excluded longer) and, since nobody refused
// it, end the attempt with a fenced release that refunds it (outcome lease-ran-out, docs/protocol.md E8).

const LEASE_MS = 3000;
let env: CoreEnv;
let proxy: ToxiproxyFront | undefined;

beforeAll(async () => {
  env = await coreEnv('slowstore');
  const stateDir = resolve('.leaseq');
  mkdirSync(join(stateDir, 'test'), { recursive: true });
  const binary = toxiproxyBinary(stateDir, (line) => process.stderr.write(`[slow-store] ${line}\n`));
  if (!binary) throw new Error('toxiproxy could not be built (go install): this test needs it');
  proxy = await ToxiproxyFront.start(binary, testEndpoint(), join(stateDir, 'test', 'toxiproxy.log'));
}, 300_000);
afterAll(async () => {
  proxy?.stop();
  env?.close();
});

describe('A slow store, through Toxiproxy (against the emulator)', () => {
  it('stops the job by the end of its lease when answers come late, and refunds the attempt', async () => {
    if (!proxy) throw new Error('no proxy');
    const front = proxy;
    // Through the proxy (another port): the emulator's credential, given explicitly.
    const slow = createAwsClients({
      endpoint: front.endpoint,
      region: env.region,
      maxAttempts: 1,
      credentials: testCredentials(),
    });
    const runs: { start: number; end?: number; aborted?: boolean }[] = [];
    const work = defineJob({
      type: 'test.slow',
      payload: z.object({}),
      async run(ctx) {
        const run: { start: number; end?: number; aborted?: boolean } = { start: Date.now() };
        runs.push(run);
        // The first run meets the slow store: from its first renewal on, every answer is 2.5 s late.
        if (runs.length === 1) {
          await front.add({
            name: 'late',
            type: 'latency',
            stream: 'downstream',
            attributes: { latency: 2500 },
          });
        }
        await new Promise<void>((done) => {
          const timer = setTimeout(done, 2 * LEASE_MS);
          ctx.signal.addEventListener('abort', () => {
            run.aborted = true;
            clearTimeout(timer);
            done();
          });
        });
        run.end = Date.now();
        return { result: 'ok' };
      },
    });
    const metrics = new InMemoryMetrics();
    const store = new DynamoDbJobStore({ client: slow.doc, tableName: env.jobsTable });
    const processor = new JobProcessor({
      store,
      queue: new SqsJobQueue({
        client: env.clients.sqs,
        queueUrl: env.queueUrl,
        deadLetterQueueUrl: env.dlqUrl,
      }),
      registry: JobRegistry.of([work]),
      worker: uniqueName('w'),
      logger: quietLogger(),
      metrics,
      leaseMs: LEASE_MS,
      backoff: { baseSeconds: 1, capSeconds: 1 },
    });
    const key = uniqueName('slow');
    await sendJob(env, { dedupKey: key, type: 'test.slow', payload: {} });
    const [message] = await receiveAll(env, env.queueUrl, 30);
    if (!message) throw new Error('no message');

    try {
      const outcome = await processor.process(toSqsRecord(message, env.queueArn, env.region));

      // Stopped within its lease, although the job itself would have run for two.
      expect(outcome.action).toBe('lease-ran-out');
      const first = runs[0];
      expect(first?.aborted).toBe(true);
      expect((first?.end ?? Number.POSITIVE_INFINITY) - (first?.start ?? 0)).toBeLessThan(LEASE_MS);
      // The release got through (late, within its own bound) and took the attempt back.
      const fast = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
      expect(await fast.get(key)).toMatchObject({
        status: JobStatus.RetryWait,
        attempts: 0,
        lastErrorClass: 'LeaseRanOutError',
      });
      expect(metrics.get(MetricName.StoreTimeout)).toBe(0);

      // Once the store answers in time again, the redelivery runs the job to the end as attempt 1.
      await front.clear();
      const [again] = await receiveAll(env, env.queueUrl, 30, 3);
      if (!again) throw new Error('the message did not come back');
      const second = await processor.process(toSqsRecord(again, env.queueArn, env.region));
      expect(second.action).toBe('completed');
      expect(await fast.get(key)).toMatchObject({ status: JobStatus.Completed, attempts: 1 });
      expect(runs).toHaveLength(2);
    } finally {
      await front.clear();
      destroyAwsClients(slow);
    }
  }, 180_000);
});
