// The worker Lambda: a thin composition root. Clients, stores and the job registry are built once per
// execution environment; every invocation runs the same batch handler that local workers run.
import { randomUUID } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { exampleJobs } from '../jobs/registry.ts';
import { awsConfigFromEnv, createAwsClients } from '../shared/aws/clients.ts';
import { InMemoryMetrics } from '../shared/core/metrics.ts';
import { workerConfigFromEnv } from '../shared/worker/config.ts';
import { createWorkerHandler } from '../shared/worker/handler.ts';

// Service name and level come from POWERTOOLS_SERVICE_NAME / POWERTOOLS_LOG_LEVEL.
const logger = new Logger();
const config = workerConfigFromEnv();
const clients = createAwsClients(awsConfigFromEnv());
const worker =
  config.workerId ?? `${process.env.AWS_LAMBDA_FUNCTION_NAME ?? 'worker'}:${randomUUID().slice(0, 8)}`;
logger.appendKeys({ worker });

/**
 * This environment's counters (bounded). Local worker processes report them to their parent; the AWS
 * observability work replaces this sink with EMF metrics.
 */
export const metrics = new InMemoryMetrics();

const handle = createWorkerHandler({
  clients,
  config,
  registry: exampleJobs({ doc: clients.doc, ledgerTable: config.ledgerTable }),
  worker,
  logger,
  metrics,
});

/** Handles one SQS batch; records listed in `batchItemFailures` stay in the queue for a retry. */
export { worker as workerId };

export async function handler(event: SQSEvent, context: Context): Promise<SQSBatchResponse> {
  logger.addContext(context);
  return handle(event, context);
}
