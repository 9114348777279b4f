import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { AwsClients } from '../../../shared/aws/clients.ts';
import { makeEnvelope } from '../../../shared/core/contract/envelope.ts';
import { MetricName } from '../../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics } from '../../../shared/core/observe/metrics.ts';
import { defineJob, defineJobs } from '../../../shared/jobs/define-job.ts';
import { workerConfigFromEnv, workerEnv } from '../../../shared/worker/config.ts';
import { EmfMetrics } from '../../../shared/worker/emf-metrics.ts';
import { createWorkerHandler } from '../../../shared/worker/handler.ts';

const DEDUP_KEY = 'secret-dedup-key-7f3a';

interface EmfBlob {
  _aws: {
    Timestamp: number;
    CloudWatchMetrics: {
      Namespace: string;
      Dimensions: string[][];
      Metrics: { Name: string; Unit: string }[];
    }[];
  };
  [key: string]: unknown;
}

/** Every stdout line while a test runs; EMF blobs are the JSON lines with `_aws`. */
let lines: string[] = [];
const emf = (): EmfBlob[] => lines.filter((l) => l.includes('"_aws"')).map((l) => JSON.parse(l) as EmfBlob);

beforeEach(() => {
  lines = [];
  // POWERTOOLS_DEV turns Powertools Metrics off unless POWERTOOLS_METRICS_DISABLED says otherwise.
  vi.stubEnv('POWERTOOLS_DEV', '');
  vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(...String(chunk).split('\n').filter(Boolean));
    return true;
  });
});
afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

describe('EmfMetrics', () => {
  it('buffers until flush, then writes one EMF blob per dimension set', () => {
    const sink = new EmfMetrics({ env: {}, values: { jobType: ['ledger.transfer'] } });
    sink.count(MetricName.JobSucceeded, 1, { jobType: 'ledger.transfer' });
    sink.count(MetricName.JobSucceeded, 2, { jobType: 'ledger.transfer' });
    sink.observe(MetricName.JobDuration, 12, { jobType: 'ledger.transfer' });
    sink.observe(MetricName.JobDuration, 30, { jobType: 'ledger.transfer' });
    sink.count(MetricName.CacheMiss);
    sink.observe(MetricName.StoreLatency, 4);
    expect(emf()).toHaveLength(0);

    sink.flush();
    const blobs = emf();
    expect(blobs).toHaveLength(2);
    for (const b of blobs) expect(b._aws.CloudWatchMetrics[0]?.Namespace).toBe('leaseq');
    const typed = blobs.find((b) => b.jobType === 'ledger.transfer');
    expect(typed).toMatchObject({ service: 'leaseq', JobSucceeded: 3, JobDuration: [12, 30] });
    expect(typed?._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service', 'jobType'], ['service']]);
    expect(typed?._aws.CloudWatchMetrics[0]?.Metrics).toEqual([
      { Name: 'JobSucceeded', Unit: 'Count' },
      { Name: 'JobDuration', Unit: 'Milliseconds' },
    ]);
    const plain = blobs.find((b) => b.jobType === undefined);
    expect(plain).toMatchObject({ CacheMiss: 1, StoreLatency: 4 });
    expect(plain?._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service']]);

    sink.flush();
    expect(emf()).toHaveLength(2); // nothing left buffered
  });

  it('drops dimensions outside the allow-list and holds values to their vocabulary', () => {
    const sink = new EmfMetrics({
      env: { POWERTOOLS_SERVICE_NAME: 'payments' },
      values: { jobType: ['a.one'] },
    });
    sink.count(MetricName.JobsPerWorker, 1, { jobType: 'a.one', worker: 'fn:1234abcd', dedupKey: DEDUP_KEY });
    sink.count(MetricName.JobSucceeded, 1, { jobType: 'not-registered' });
    sink.flush();
    const out = lines.join('\n');
    expect(out).not.toContain(DEDUP_KEY);
    expect(out).not.toContain('fn:1234abcd');
    const blobs = emf();
    expect(blobs.map((b) => [b.service, b.jobType]).sort()).toEqual([
      ['payments', 'a.one'],
      ['payments', 'other'],
    ]);
    for (const b of blobs) {
      expect(b._aws.CloudWatchMetrics[0]?.Dimensions.flat()).not.toContain('worker');
      expect(b).not.toHaveProperty('worker');
    }
  });

  it('splits more than 100 values of one metric itself, keeping the dimensions on every blob', () => {
    const sink = new EmfMetrics({ env: {} });
    for (let i = 0; i < 150; i++) sink.observe(MetricName.StoreLatency, i, { jobType: 'a.one' });
    sink.count(MetricName.JobSucceeded, 150, { jobType: 'a.one' });
    sink.flush();
    const blobs = emf();
    expect(blobs).toHaveLength(2);
    expect(blobs.map((b) => (b.StoreLatency as number[]).length)).toEqual([99, 51]);
    expect(blobs.map((b) => b.jobType)).toEqual(['a.one', 'a.one']);
    expect(blobs.map((b) => b.JobSucceeded)).toEqual([150, undefined]);
  });

  it('writes nothing when nothing was recorded', () => {
    const warn = vi.spyOn(console, 'warn');
    new EmfMetrics({ env: {} }).flush();
    expect(lines).toHaveLength(0);
    expect(warn).not.toHaveBeenCalled();
  });
});

describe('InMemoryMetrics with dimensions', () => {
  it('keeps the bare name as the total and the dimensioned key as its breakdown', () => {
    const m = new InMemoryMetrics();
    m.count(MetricName.JobSucceeded, 1, { jobType: 'a.one' });
    m.count(MetricName.JobSucceeded, 1, { jobType: 'a.two' });
    m.count(MetricName.JobSucceeded);
    m.observe(MetricName.JobDuration, 5, { jobType: 'a.one' });
    expect(m.get(MetricName.JobSucceeded)).toBe(3);
    expect(m.get(MetricName.JobSucceeded, { jobType: 'a.one' })).toBe(1);
    expect(m.snapshot().counters).toEqual({
      JobSucceeded: 3,
      'JobSucceeded{jobType=a.one}': 1,
      'JobSucceeded{jobType=a.two}': 1,
    });
    expect(m.snapshot().observations.JobDuration).toMatchObject({ count: 1, sum: 5, min: 5, max: 5 });
  });
});

// The handler on fake AWS clients that answer every call with an empty success: a claim with no old
// item is a fresh claim, the commit and the message calls succeed.
const fakeClients = (): AwsClients => {
  const ok = { send: async () => ({ MessageId: 'letter-1' }) };
  return { sqs: ok, ddb: ok, doc: ok } as unknown as AwsClients;
};

const echo = defineJob({
  type: 'demo.echo',
  payload: z.object({ n: z.number() }),
  run: async (_ctx, p) => ({ result: { n: p.n } }),
});

let seq = 0;
function record(body: string): SQSRecord {
  seq += 1;
  return {
    messageId: `m-${seq}`,
    receiptHandle: `r-${seq}`,
    body,
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: String(Date.now()),
      SenderId: 'local',
      ApproximateFirstReceiveTimestamp: String(Date.now()),
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:jobs',
    awsRegion: 'us-east-1',
  };
}
const job = (n: number) =>
  record(
    JSON.stringify(
      makeEnvelope({ id: `id-${n}`, dedupKey: `${DEDUP_KEY}-${n}`, type: echo.type, payload: { n } }),
    ),
  );
const context = { getRemainingTimeInMillis: () => 60_000 };

function lambdaHandler(logger = new Logger({ serviceName: 'leaseq-test', logLevel: 'SILENT' })) {
  const env = {
    ...workerEnv({
      queueUrl: 'https://sqs.us-east-1.amazonaws.com/000000000000/jobs',
      dlqUrl: 'https://sqs.us-east-1.amazonaws.com/000000000000/jobs-dlq',
      jobsTable: 'jobs',
      leasesTable: 'leases',
    }),
    AWS_LAMBDA_FUNCTION_NAME: 'leaseq-worker',
  };
  return createWorkerHandler({
    jobs: defineJobs([echo]),
    env,
    config: workerConfigFromEnv(env),
    clients: fakeClients(),
    logger,
  });
}

describe('createWorkerHandler metrics', () => {
  it('uses EMF in Lambda and flushes once per invocation', async () => {
    const handler = lambdaHandler();
    expect(handler.metrics).toBeInstanceOf(EmfMetrics);

    const first = await handler({ Records: [job(1), job(2)] }, context);
    expect(first.batchItemFailures).toEqual([]);
    const afterFirst = emf().filter((b) => b.JobSucceeded !== undefined);
    expect(afterFirst).toHaveLength(1);
    expect(afterFirst[0]).toMatchObject({ service: 'leaseq', jobType: 'demo.echo', JobSucceeded: 2 });
    expect(afterFirst[0]?.JobDuration).toHaveLength(2);

    await handler({ Records: [job(3), record('not json')] }, context);
    const succeeded = emf().filter((b) => b.JobSucceeded !== undefined);
    expect(succeeded).toHaveLength(2);
    expect(succeeded[1]).toMatchObject({ JobSucceeded: 1 });
    // The bad envelope has no trusted type: counted without a jobType.
    expect(emf().find((b) => b.JobDeadLettered !== undefined)).toMatchObject({ JobDeadLettered: 1 });
    expect(emf().find((b) => b.JobDeadLettered !== undefined)).not.toHaveProperty('jobType');

    const names = new Set<string>(Object.values(MetricName));
    for (const b of emf()) {
      expect(b._aws.CloudWatchMetrics[0]?.Namespace).toBe('leaseq');
      for (const m of b._aws.CloudWatchMetrics[0]?.Metrics ?? []) expect(names).toContain(m.Name);
      for (const set of b._aws.CloudWatchMetrics[0]?.Dimensions ?? []) {
        for (const d of set) expect(['service', 'jobType', 'outcome', 'operation']).toContain(d);
      }
    }
    expect(
      emf()
        .map((b) => JSON.stringify(b))
        .join('\n'),
    ).not.toContain(DEDUP_KEY);
  });

  it('flushes when the invocation throws', async () => {
    class FailingLogger extends Logger {
      override debug(): void {
        throw new Error('boom after the batch');
      }
    }
    const handler = lambdaHandler(new FailingLogger({ serviceName: 'leaseq-test', logLevel: 'SILENT' }));
    await expect(handler({ Records: [job(4)] }, context)).rejects.toThrow('boom after the batch');
    expect(emf().filter((b) => b.JobSucceeded === 1)).toHaveLength(1);
  });

  it('keeps InMemoryMetrics outside Lambda, and an explicit sink wins', () => {
    const env = workerEnv({ queueUrl: 'q', dlqUrl: 'd', jobsTable: 'jobs', leasesTable: 'leases' });
    const base = { jobs: defineJobs([echo]), env, config: workerConfigFromEnv(env), clients: fakeClients() };
    const logger = new Logger({ serviceName: 'leaseq-test', logLevel: 'SILENT' });
    expect(createWorkerHandler({ ...base, logger }).metrics).toBeInstanceOf(InMemoryMetrics);
    const own = new InMemoryMetrics();
    const inLambda = { ...env, AWS_LAMBDA_FUNCTION_NAME: 'fn' };
    expect(createWorkerHandler({ ...base, env: inLambda, logger, metrics: own }).metrics).toBe(own);
  });
});
