import type { Logger } from '@aws-lambda-powertools/logger';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import type { AwsClients } from '../aws/clients.ts';
import { processBatch } from '../core/batch.ts';
import { CompletedCache } from '../core/completed-cache.ts';
import { DynamoDbJobStore } from '../core/dynamodb-job-store.ts';
import type { MetricsSink } from '../core/metrics.ts';
import { JobProcessor } from '../core/processor.ts';
import type { JobRegistry } from '../core/registry.ts';
import { SqsJobQueue } from '../core/sqs-job-queue.ts';
import type { WorkerConfig } from './config.ts';

export interface WorkerHandlerOptions {
  readonly clients: AwsClients;
  readonly config: WorkerConfig;
  readonly registry: JobRegistry;
  readonly worker: string;
  readonly logger: Logger;
  readonly metrics?: MetricsSink;
}

/** The SQS batch handler Lambda runs and local workers run: one per process, built once. */
export type WorkerHandler = (
  event: SQSEvent,
  context: Pick<Context, 'getRemainingTimeInMillis'>,
) => Promise<SQSBatchResponse>;

/**
 * Builds the worker's batch handler from injected clients and config. The deadline of each invocation
 * (`getRemainingTimeInMillis` less a margin) caps every lease, so no lease outlives the invocation.
 */
export function createWorkerHandler(options: WorkerHandlerOptions): WorkerHandler {
  const { clients, config } = options;
  const processor = new JobProcessor({
    store: new DynamoDbJobStore({ client: clients.doc, tableName: config.jobsTable }),
    queue: new SqsJobQueue({
      client: clients.sqs,
      queueUrl: config.queueUrl,
      deadLetterQueueUrl: config.dlqUrl,
    }),
    registry: options.registry,
    worker: options.worker,
    logger: options.logger,
    cache: new CompletedCache(),
    leaseMs: config.leaseMs,
    maxAttempts: config.maxAttempts,
    backoff: { baseSeconds: config.backoffBaseSeconds, capSeconds: config.backoffCapSeconds },
    ...(options.metrics ? { metrics: options.metrics } : {}),
  });
  return async (event, context) => {
    const deadline = Date.now() + context.getRemainingTimeInMillis() - config.deadlineMarginMs;
    const { response, outcomes } = await processBatch(event.Records, processor, {
      concurrency: config.concurrency,
      deadline,
    });
    options.logger.debug('batch done', {
      records: outcomes.length,
      failures: response.batchItemFailures.length,
      actions: countBy(outcomes.map((o) => o.action)),
    });
    return response;
  };
}

function countBy(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}
