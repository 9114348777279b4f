// Placeholder worker: the composition root the Lambda runs. It only logs the batch for now and reports
// no failures; the reliability protocol (claim, heartbeat, fencing, retry) replaces this body.
import { Logger } from '@aws-lambda-powertools/logger';
import type { Context, SQSBatchResponse, SQSEvent, SQSHandler } from 'aws-lambda';

// Service name and level come from POWERTOOLS_SERVICE_NAME / POWERTOOLS_LOG_LEVEL set by the stack.
const logger = new Logger();

/** Handles one SQS batch; records listed in `batchItemFailures` go back to the queue. */
export const handler = (async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
  logger.addContext(context);
  logger.info('batch received', {
    records: event.Records.length,
    messageIds: event.Records.map((record) => record.messageId),
  });
  return { batchItemFailures: [] };
}) satisfies SQSHandler;
