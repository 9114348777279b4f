// The team's producer, as it was before the migration and stays: it sends its own JSON, no leaseq
// envelope and no leaseq package. (docs/migrate-from-powertools.md, step 1.)
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { Order } from './jobs.ts';

/** Sends one order to the queue; returns the SQS message id. */
export async function sendOrder(sqs: SQSClient, queueUrl: string, o: Order): Promise<string> {
  const out = await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(o) }));
  return out.MessageId ?? '';
}
