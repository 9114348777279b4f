import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { JobProducer } from '../../../shared/producer/job-producer.ts';
import { WorkerPool } from '../../../shared/runner/worker-pool.ts';
import { workerEnv } from '../../../shared/worker/config.ts';
import { type CoreEnv, coreEnv, eventually, putBalance } from '../../support/core-fixture.ts';
import { testEndpoint, uniqueName } from '../../support/env.ts';

// One job's trace end to end: the producer's send span (this process), then the worker's spans (a
// real worker process whose exporter the standard OTEL_* variables switch on), all received by an
// OTLP/HTTP sink here: send -> process -> claim, step, commit.

const LEDGER_JOB_MODULE = fileURLToPath(new URL('../../../examples/ledger/jobs.ts', import.meta.url));

interface OtlpSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly attributes?: { key: string; value: Record<string, unknown> }[];
}

const received: { service: string; span: OtlpSpan }[] = [];
let sink: Server;
let sinkUrl = '';
let env: CoreEnv;
let provider: NodeTracerProvider;

beforeAll(async () => {
  sink = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      const parsed = JSON.parse(body) as {
        resourceSpans?: {
          resource?: { attributes?: { key: string; value: { stringValue?: string } }[] };
          scopeSpans?: { spans?: OtlpSpan[] }[];
        }[];
      };
      for (const rs of parsed.resourceSpans ?? []) {
        const service =
          rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? '?';
        for (const ss of rs.scopeSpans ?? [])
          for (const span of ss.spans ?? []) received.push({ service, span });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const address = sink.address();
  sinkUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'test-producer' }),
    spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `${sinkUrl}/v1/traces` }))],
  });
  provider.register();
  env = await coreEnv('trace');
});

afterAll(async () => {
  await provider?.shutdown();
  trace.disable();
  env?.close();
  await new Promise<void>((resolve) => sink.close(() => resolve()));
});

describe('Tracing (OpenTelemetry, OTLP)', () => {
  it('follows one job from the send through the claim, its step and the commit', async () => {
    const run = uniqueName('tr');
    await putBalance(env, `${run}-a`, 100, 1);
    const producer = new JobProducer({ queueUrl: env.queueUrl, client: env.clients.sqs });
    const [sent] = await producer.send({
      type: 'ledger.transfer',
      dedupKey: `${run}-t1`,
      payload: { from: `${run}-a`, to: `${run}-b`, amount: 5 },
    });
    const traceId = sent?.traceparent.split('-')[1];
    const logDir = mkdtempSync(join(tmpdir(), 'leaseq-trace-'));
    const workerLog = () =>
      readdirSync(logDir, { recursive: true })
        .map(String)
        .filter((f) => f.endsWith('.log'))
        .map((f) => readFileSync(join(logDir, f), 'utf8').slice(-2000))
        .join('\n');
    const pool = new WorkerPool({
      count: 1,
      logDir,
      idPrefix: `${run}-w`,
      jobsModule: LEDGER_JOB_MODULE,
      env: {
        AWS_ENDPOINT_URL: testEndpoint(),
        OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
        OTEL_SERVICE_NAME: 'test-worker',
        ...workerEnv({
          queueUrl: env.queueUrl,
          dlqUrl: env.dlqUrl,
          jobsTable: env.jobsTable,
          leasesTable: env.leasesTable,
          tables: { ledger: env.ledgerTable },
          leaseMs: 3000,
        }),
      },
    });
    try {
      await pool.start();
      const completed = await eventually(
        async () => {
          const item = await env.clients.doc.send(
            new GetCommand({
              TableName: env.jobsTable,
              Key: { dedupKey: `${run}-t1` },
              ConsistentRead: true,
            }),
          );
          return item.Item?.status === JobStatus.Completed;
        },
        30_000,
        250,
      );
      expect(completed, `job not completed; worker log: ${workerLog()}`).toBe(true);
      await eventually(
        async () => received.some((r) => r.span.name.startsWith('leaseq.commit')),
        10_000,
        200,
      );
    } finally {
      await pool.stop(5000);
    }

    const spans = received.filter((r) => r.span.traceId === traceId);
    const byName = (prefix: string) => spans.find((r) => r.span.name.startsWith(prefix));
    const send = byName('leaseq.send');
    const process = byName('leaseq.process');
    expect(send?.service).toBe('test-producer');
    expect(process?.service).toBe('test-worker');
    expect(process?.span.parentSpanId).toBe(send?.span.spanId);
    for (const child of ['leaseq.claim', 'leaseq.step debit', 'leaseq.commit']) {
      expect(byName(child)?.span.parentSpanId, child).toBe(process?.span.spanId);
    }
    const commit = byName('leaseq.commit')?.span.attributes?.map((a) => a.key);
    expect(commit).toEqual(expect.arrayContaining(['leaseq.token', 'leaseq.attempt']));
    // Never the payload or the dedup key in span attributes.
    expect(JSON.stringify(spans)).not.toContain(`${run}-t1`);
  }, 180_000);
});
