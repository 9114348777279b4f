/**
 * The four consumers, each as the batch handler a user would write for an SQS-triggered Lambda. The
 * benchmark's poll loop (worker.ts) is the same for all of them; only the handler differs.
 *
 * Powertools 2.35.0 is a devDependency of this repository only. It depends on its own
 * `@aws-lambda-powertools/commons` 2.35.0, which npm nests beside the product's logger and metrics
 * (2.36.0, whose pins stay as they are): two copies of `commons` in the benchmark, none in the product.
 */
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { Context, SQSBatchResponse, SQSRecord } from 'aws-lambda';
import type { AwsClients } from '../../shared/aws/clients.ts';
import { InMemoryMetrics } from '../../shared/core/observe/metrics.ts';
import { workerConfigFromEnv, workerEnv } from '../../shared/worker/config.ts';
import { createWorkerHandler } from '../../shared/worker/handler.ts';
import { COUNTER_UPDATE, fastJobs, leasedJobs, limitJobs, noEffectJobs } from './jobs.ts';
import type { ConsumerId, JobShape, LimitVariantId } from './scenarios.ts';

/** A consumer: the batch handler, and counters of what it decided (for the report's notes). */
export interface Consumer {
  handle(records: SQSRecord[], context: Context): Promise<SQSBatchResponse>;
  stats(): Record<string, number>;
}

/** The names a consumer works with. */
export interface ConsumerNames {
  readonly queueUrl: string;
  readonly dlqUrl: string;
  readonly jobsTable: string;
  readonly leasesTable: string;
  readonly countersTable: string;
  /** Powertools' own table (`id` partition key). */
  readonly idempotencyTable: string;
}

/** What building a consumer needs. */
export interface ConsumerDeps {
  readonly clients: AwsClients;
  readonly names: ConsumerNames;
  readonly worker: string;
}

/** The job key of a message body (every consumer reads the same leaseq envelope). */
function dedupKeyOf(body: string): string {
  const key = (JSON.parse(body) as { dedupKey?: unknown }).dedupKey;
  if (typeof key !== 'string') throw new Error('message has no dedupKey');
  return key;
}

/** The job's effect as a plain UpdateItem (what the bare and Powertools consumers send). */
function applyEffect(deps: ConsumerDeps, key: string): Promise<unknown> {
  return deps.clients.doc.send(
    new UpdateCommand({
      TableName: deps.names.countersTable,
      Key: { id: key },
      UpdateExpression: COUNTER_UPDATE.expression,
      ExpressionAttributeNames: { ...COUNTER_UPDATE.names },
      ExpressionAttributeValues: { ...COUNTER_UPDATE.values },
    }),
  );
}

/** (a) No guarantees: every message applies its effect, a duplicate twice; failures stay in the queue. */
function bare(deps: ConsumerDeps): Consumer {
  let failed = 0;
  return {
    async handle(records) {
      const failures: SQSBatchResponse['batchItemFailures'] = [];
      await Promise.all(
        records.map(async (record) => {
          try {
            await applyEffect(deps, dedupKeyOf(record.body));
          } catch {
            failed += 1;
            failures.push({ itemIdentifier: record.messageId });
          }
        }),
      );
      return { batchItemFailures: failures };
    },
    stats: () => ({ failed }),
  };
}

/**
 * (b) Powertools as its documentation shows it for SQS batches: `makeIdempotent` on the record handler,
 * `processPartialResponse` with a `BatchProcessor`, the Lambda context passed on (so each record's
 * in-progress expiry is the invocation's remaining time), the DynamoDB persistence layer on an injected
 * client. The idempotency key is the job's dedup key from the body, the same key leaseq dedups by (the
 * messageId would not catch a producer's duplicate, which is a new message). Defaults otherwise:
 * records expire after 1 h, no local cache, no payload validation.
 */
function powertools(deps: ConsumerDeps): Consumer {
  const persistenceStore = new DynamoDBPersistenceLayer({
    tableName: deps.names.idempotencyTable,
    awsSdkV3Client: deps.clients.ddb,
  });
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'powertools_json(body).dedupKey' });
  const recordHandler = async (record: SQSRecord): Promise<void> => {
    await applyEffect(deps, dedupKeyOf(record.body));
  };
  const processRecord = makeIdempotent(recordHandler, { persistenceStore, config });
  const processor = new BatchProcessor(EventType.SQS);
  const errors: Record<string, number> = {};
  return {
    async handle(records, context) {
      config.registerLambdaContext(context);
      try {
        return await processPartialResponse({ Records: records }, processRecord, processor, { context });
      } finally {
        for (const error of processor.errors) {
          const name = error instanceof Error ? error.name : 'unknown';
          errors[name] = (errors[name] ?? 0) + 1;
        }
      }
    },
    stats: () => ({ ...errors }),
  };
}

/**
 * (c, d) leaseq as a user deploys it: `createWorkerHandler` with the job module (the leased job, or the
 * same job with `fastPath: true`), its defaults (local completed-job cache, Powertools logger at INFO to
 * the worker's log file, 30 s lease capped by the invocation deadline).
 */
function leaseq(
  deps: ConsumerDeps,
  fast: boolean,
  shape: JobShape,
  limits: LimitVariantId | undefined,
): Consumer {
  const tables = { counters: deps.names.countersTable };
  const config = workerConfigFromEnv({
    ...process.env,
    ...workerEnv({
      queueUrl: deps.names.queueUrl,
      dlqUrl: deps.names.dlqUrl,
      jobsTable: deps.names.jobsTable,
      leasesTable: deps.names.leasesTable,
      workerId: deps.worker,
      tables,
    }),
  });
  const metrics = new InMemoryMetrics();
  const handler = createWorkerHandler({
    jobs:
      limits !== undefined
        ? limitJobs(limits, fast)
        : shape === 'no-effect'
          ? noEffectJobs((key) => applyEffect(deps, key), fast)
          : fast
            ? fastJobs
            : leasedJobs,
    config,
    clients: deps.clients,
    tableNames: tables,
    worker: deps.worker,
    metrics,
  });
  return {
    handle: (records, context) => handler({ Records: records }, context),
    stats: () => {
      const counters = metrics.snapshot().counters;
      // Totals only (the dimensioned breakdowns repeat them).
      return Object.fromEntries(Object.entries(counters).filter(([k]) => !k.includes('{')));
    },
  };
}

/** Builds one consumer. */
export function createConsumer(
  id: ConsumerId,
  deps: ConsumerDeps,
  shape: JobShape = 'effect',
  limits?: LimitVariantId,
): Consumer {
  switch (id) {
    case 'bare':
      return bare(deps);
    case 'powertools':
      return powertools(deps);
    case 'leased':
      return leaseq(deps, false, shape, limits);
    case 'fast':
      return leaseq(deps, true, shape, limits);
  }
}
