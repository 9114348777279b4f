import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { localContext } from './local-context.ts';
import { pollOnce } from './poll.ts';

export interface WorkerLoopOptions {
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  readonly queueArn: string;
  readonly region: string;
  /** The same handler the Lambda runs. */
  readonly handler: (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;
  /** Name used for the local context. */
  readonly functionName: string;
  /** Invocation timeout, as the function's timeout in Lambda. @default 60000 */
  readonly timeoutMs?: number;
  /** Records per batch. @default 10 */
  readonly batchSize?: number;
  /** Long-poll wait. @default 2 */
  readonly waitSeconds?: number;
  /**
   * Visibility of a received batch until the handler's heartbeat takes over. Keep it near the lease, so
   * a worker that dies before its first heartbeat releases the message soon. @default the queue's
   */
  readonly receiveVisibilitySeconds?: number;
  /** Stops polling when aborted; the batch in flight still finishes (drain). */
  readonly signal: AbortSignal;
  /** Called after every batch. */
  readonly onBatch?: (received: number, failed: number) => void;
  /** Called when a poll fails (the loop backs off and keeps going). */
  readonly onError?: (error: unknown) => void;
}

/**
 * Runs the SQS event source mapping locally: long-poll, invoke the handler with a Lambda-shaped event
 * and a context whose deadline is real, delete what succeeded, leave `batchItemFailures` in the queue
 * with the visibility the handler set. Returns once `signal` aborts and the batch in flight is done.
 */
export async function runWorkerLoop(options: WorkerLoopOptions): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  let pause = 0;
  while (!options.signal.aborted) {
    try {
      const result = await pollOnce({
        sqs: options.sqs,
        queueUrl: options.queueUrl,
        queueArn: options.queueArn,
        region: options.region,
        maxMessages: options.batchSize ?? 10,
        waitSeconds: options.waitSeconds ?? 2,
        abortSignal: options.signal,
        ...(options.receiveVisibilitySeconds === undefined
          ? {}
          : { visibilitySeconds: options.receiveVisibilitySeconds }),
        handle: (records) =>
          options.handler({ Records: records }, localContext(options.functionName, timeoutMs)),
      });
      pause = 0;
      options.onBatch?.(result.received, result.failed);
    } catch (error) {
      if (options.signal.aborted) break;
      options.onError?.(error);
      pause = Math.min(5000, Math.max(200, pause * 2));
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}
