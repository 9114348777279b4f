import { randomUUID } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { type AwsClients, awsConfigFromEnv, createAwsClients } from '../aws/clients.ts';
import { DynamoDbJobStore } from '../core/adapters/dynamodb-job-store.ts';
import { DynamoDbLeaseStore } from '../core/adapters/dynamodb-lease-store.ts';
import { DynamoDbRateStore } from '../core/adapters/dynamodb-rate-store.ts';
import { instrumentJobStore } from '../core/adapters/instrumented-store.ts';
import { S3PayloadStore } from '../core/adapters/s3-payload-store.ts';
import { SqsJobQueue } from '../core/adapters/sqs-job-queue.ts';
import { JobRegistry, type JobSource } from '../core/model/registry.ts';
import { InMemoryMetrics, type MetricsSink } from '../core/observe/metrics.ts';
import { processBatch } from '../core/pipeline/batch.ts';
import { CompletedCache } from '../core/pipeline/completed-cache.ts';
import { JobProcessor } from '../core/pipeline/processor.ts';
import { describe, errorText, type RedactError } from '../error-text.ts';
import { ConfigError } from '../errors.ts';
import { EffectTables } from '../jobs/effect-tables.ts';
import { type WorkerConfig, workerConfigFromEnv } from './config.ts';
import { EmfMetrics } from './emf-metrics.ts';
import { startTracingFromEnv, type WorkerTracing } from './tracing.ts';

/** Options of {@link createWorkerHandler}; only `jobs` is required, the rest defaults to the environment. */
export interface WorkerHandlerOptions {
  /** The job module's jobs: `defineJobs([...])` or a plain array of `defineJob(...)` results. */
  readonly jobs: JobSource;
  /** Environment the defaults below are read from. @default process.env */
  readonly env?: NodeJS.ProcessEnv;
  /** Worker settings. @default workerConfigFromEnv(env) */
  readonly config?: WorkerConfig;
  /** SQS and DynamoDB clients. @default createAwsClients(awsConfigFromEnv(env)) (honours AWS_ENDPOINT_URL) */
  readonly clients?: AwsClients;
  /** Physical names of the jobs' application tables, by logical name. @default `LEASEQ_TABLE_<NAME>` of env */
  readonly tableNames?: Readonly<Record<string, string>>;
  /** This worker's id (lease owner, on every log line). @default config.workerId, else `<function name>:<random>` */
  readonly worker?: string;
  /** @default a Powertools Logger (POWERTOOLS_SERVICE_NAME, else 'leaseq'; POWERTOOLS_LOG_LEVEL) */
  readonly logger?: Logger;
  /**
   * Where metrics go; a sink with `flush` is flushed at the end of every invocation (also when it throws).
   * @default in Lambda (`AWS_LAMBDA_FUNCTION_NAME` set): an {@link EmfMetrics} (namespace `leaseq`,
   * dimension `jobType` from the registry's types); elsewhere an InMemoryMetrics that local workers
   * report to their parent
   */
  readonly metrics?: MetricsSink;
  /**
   * Applied to every error text before the worker stores it (`lastError`, the dead letter's attributes)
   * or emits it (log lines, span status and events); the result is capped at ERROR_TEXT_MAX (1000)
   * characters. E.g. `(text) => text.replace(/\d{12,19}/g, '[card]')`. A hook that throws gives
   * "[error text withheld: redactError threw]". docs/security.md, "What leaves the process".
   * @default none (the text as thrown, capped)
   */
  readonly redactError?: RedactError;
}

/** The SQS batch handler Lambda runs and local workers run: one per process, built once. */
export interface WorkerHandler {
  (event: SQSEvent, context: Pick<Context, 'getRemainingTimeInMillis'>): Promise<SQSBatchResponse>;
  /** The lease owner this handler writes. */
  readonly workerId: string;
  readonly metrics: MetricsSink;
}

/**
 * Builds the worker's SQS batch handler for a Lambda (`export const handler = createWorkerHandler({ jobs })`)
 * or a local worker. Settings, clients and table names are read once, here, so a bad environment fails
 * at start with every problem named. Each invocation's deadline (`getRemainingTimeInMillis` less
 * `LEASEQ_DEADLINE_MARGIN_MS`) caps every lease, so no lease outlives the invocation. Records listed
 * in `batchItemFailures` stay in the queue; the rest are done (completed, skipped or dead-lettered).
 */
export function createWorkerHandler(options: WorkerHandlerOptions): WorkerHandler {
  const env = options.env ?? process.env;
  const registry = JobRegistry.from(options.jobs);
  const config = options.config ?? workerConfigFromEnv(env);
  const tableNames = options.tableNames ?? EffectTables.namesFromEnv(registry, env);
  // Every table a job declares must have a name before the first job runs: found out per job, the
  // error would dead-letter healthy jobs instead of stopping a misconfigured worker.
  const unnamed = registry.tables().filter((t) => !tableNames[t.name]);
  if (unnamed.length > 0) {
    throw new ConfigError(
      `invalid worker configuration: no physical name for table${unnamed.length === 1 ? '' : 's'} ${unnamed.map((t) => t.name).join(', ')} (tableNames)`,
    );
  }
  const clients = options.clients ?? createAwsClients(awsConfigFromEnv(env));
  const worker =
    options.worker ??
    config.workerId ??
    `${env.AWS_LAMBDA_FUNCTION_NAME ?? 'worker'}:${randomUUID().slice(0, 8)}`;
  // Without POWERTOOLS_SERVICE_NAME (local workers) Powertools would log "service_undefined".
  const logger = options.logger ?? new Logger({ serviceName: env.POWERTOOLS_SERVICE_NAME ?? 'leaseq' });
  logger.appendKeys({ worker });
  // Once per worker (a Lambda cold start): what it runs on and with which settings, never secrets.
  logger.info('worker started', {
    redactError: options.redactError !== undefined,
    node: process.version,
    leaseMs: config.leaseMs,
    maxAttempts: config.maxAttempts,
    maxBodyBytes: config.maxBodyBytes,
    testHooks: config.testHooks,
    jobTypes: registry.types(),
  });
  const metrics =
    options.metrics ??
    (env.AWS_LAMBDA_FUNCTION_NAME
      ? new EmfMetrics({ env, values: { jobType: registry.types() } })
      : new InMemoryMetrics());
  const processor = new JobProcessor({
    store: instrumentJobStore(
      new DynamoDbJobStore({ client: clients.doc, tableName: config.jobsTable }),
      metrics,
    ),
    queue: new SqsJobQueue({
      client: clients.sqs,
      queueUrl: config.queueUrl,
      deadLetterQueueUrl: config.dlqUrl,
    }),
    registry,
    tables: new EffectTables(clients.doc, tableNames),
    leases: new DynamoDbLeaseStore({ client: clients.doc, tableName: config.leasesTable }),
    rates: new DynamoDbRateStore({ client: clients.doc, tableName: config.leasesTable }),
    // The S3 client is loaded on the first claim-checked job only.
    ...(config.payloadBucket
      ? {
          payloads: new S3PayloadStore({
            bucket: config.payloadBucket,
            config: awsConfigFromEnv(env),
            ...(config.payloadPrefix ? { keyPrefix: config.payloadPrefix } : {}),
            ...(config.payloadMaxBytes ? { maxBytes: config.payloadMaxBytes } : {}),
          }),
        }
      : {}),
    testHooks: config.testHooks,
    worker,
    logger,
    cache: new CompletedCache(),
    leaseMs: config.leaseMs,
    maxAttempts: config.maxAttempts,
    maxBodyBytes: config.maxBodyBytes,
    backoff: { baseSeconds: config.backoffBaseSeconds, capSeconds: config.backoffCapSeconds },
    metrics,
    ...(options.redactError ? { redactError: options.redactError } : {}),
  });
  const tracing = startTracingFromEnv(env, (error) =>
    logger.warn('tracing is off: the OpenTelemetry SDK could not be loaded', { error: describe(error) }),
  );
  const handle = async (event: SQSEvent, context: Pick<Context, 'getRemainingTimeInMillis'>) => {
    if ('awsRequestId' in context) logger.addContext(context as Context);
    // The SDK loads on the first invocation (tracing.ts); its spans must reach the exporter.
    if (tracing) await tracing.ready();
    try {
      const deadline = Date.now() + context.getRemainingTimeInMillis() - config.deadlineMarginMs;
      const { response, outcomes } = await processBatch(event.Records, processor, {
        concurrency: config.concurrency,
        deadline,
      });
      logger.debug('batch done', {
        records: outcomes.length,
        failures: response.batchItemFailures.length,
        actions: countBy(outcomes.map((o) => o.action)),
      });
      return response;
    } finally {
      // Once per invocation: EMF lines and spans must be out before the runtime freezes the environment.
      flushMetrics(metrics, logger, options.redactError);
      if (tracing) {
        const budgetMs = Math.min(context.getRemainingTimeInMillis() - FLUSH_MARGIN_MS, FLUSH_MAX_MS);
        await flushTraces(tracing, budgetMs, logger);
      }
    }
  };
  return Object.assign(handle, { workerId: worker, metrics });
}

/** Left of the invocation after the trace flush, for the batch response to reach the runtime. */
const FLUSH_MARGIN_MS = 250;
/**
 * The longest a flush may take even with time left: an export to a healthy collector takes milliseconds,
 * and a collector that hangs for good would otherwise bill every later invocation up to its timeout.
 */
const FLUSH_MAX_MS = 2_000;

/**
 * Flushes spans for at most `budgetMs`. A collector that hangs must not hold the invocation past its
 * timeout: Lambda would fail the whole batch, and every record it completed would come back as a
 * duplicate until the queue dead-letters it (`sqs-max-receives`). A flush that fails or is abandoned
 * loses those spans and logs one WARN line; an abandoned one that settles later logs nothing.
 */
async function flushTraces(tracing: WorkerTracing, budgetMs: number, logger: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, budgetMs), 'late');
  });
  const flushed = tracing.flush().then(
    () => 'flushed' as const,
    (error: unknown) => ({ error }),
  );
  try {
    const outcome = await Promise.race([flushed, late]);
    if (outcome === 'late') {
      logger.warn('trace export abandoned: the collector did not answer before the invocation deadline', {
        budgetMs: Math.max(0, budgetMs),
      });
    } else if (outcome !== 'flushed') {
      logger.warn('could not export traces', { error: describe(outcome.error) });
    }
  } finally {
    clearTimeout(timer);
  }
}

/** A failing flush must not turn a processed batch into a failed invocation (every record would rerun). */
function flushMetrics(metrics: MetricsSink, logger: Logger, redact: RedactError | undefined): void {
  try {
    metrics.flush?.();
  } catch (error) {
    logger.warn('metrics flush failed', { error: errorText(error, redact) });
  }
}

function countBy(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}
