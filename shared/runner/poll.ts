import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSRecord } from 'aws-lambda';
import { toSqsRecord } from './sqs-records.ts';

export interface PollOnceOptions {
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  readonly queueArn: string;
  readonly region: string;
  /** Runs the batch (the Lambda handler, or processBatch directly). */
  readonly handle: (records: SQSRecord[]) => Promise<SQSBatchResponse>;
  /** @default 10 */
  readonly maxMessages?: number;
  /** Long-poll wait. @default 1 */
  readonly waitSeconds?: number;
  /** Visibility for the received batch (the event source mapping uses the queue's). */
  readonly visibilitySeconds?: number;
  readonly abortSignal?: AbortSignal;
}

export interface PollResult {
  readonly received: number;
  readonly deleted: number;
  readonly failed: number;
  /** Successful records whose delete SQS refused (stale receipt handle): they come back, and are dropped
   * then as duplicates of a completed job. */
  readonly deleteFailed: number;
}

/**
 * One turn of the SQS event source mapping: long-poll a batch, hand it to the handler, delete every
 * record the handler did not report in `batchItemFailures` (those stay, with whatever visibility the
 * handler set).
 */
export async function pollOnce(options: PollOnceOptions): Promise<PollResult> {
  const out = await options.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: options.queueUrl,
      MaxNumberOfMessages: options.maxMessages ?? 10,
      WaitTimeSeconds: options.waitSeconds ?? 1,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
      ...(options.visibilitySeconds === undefined ? {} : { VisibilityTimeout: options.visibilitySeconds }),
    }),
    options.abortSignal ? { abortSignal: options.abortSignal } : {},
  );
  const messages = out.Messages ?? [];
  if (messages.length === 0) return { received: 0, deleted: 0, failed: 0, deleteFailed: 0 };
  const records = messages.map((m) => toSqsRecord(m, options.queueArn, options.region));
  const response = await options.handle(records);
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  const done = records.filter((r) => !failed.has(r.messageId));
  if (done.length > 0) {
    const del = await options.sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: options.queueUrl,
        Entries: done.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle })),
      }),
    );
    return {
      received: records.length,
      deleted: del.Successful?.length ?? 0,
      failed: failed.size,
      deleteFailed: del.Failed?.length ?? 0,
    };
  }
  return { received: records.length, deleted: 0, failed: failed.size, deleteFailed: 0 };
}
