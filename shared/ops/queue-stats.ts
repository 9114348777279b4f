import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';

/** Approximate message counts of one queue (SQS's own numbers; they lag by up to a minute on AWS). */
export interface QueueDepth {
  /** Ready to be received. */
  readonly visible: number;
  /** Received and not yet deleted or released (being worked on, or waiting out a backoff). */
  readonly inFlight: number;
  /** Sent with a delay that has not passed yet. */
  readonly delayed: number;
}

/** Reads a queue's visible / in-flight / delayed counts with one GetQueueAttributes call (`abortSignal` ends it). */
export async function queueStats(
  sqs: SQSClient,
  queueUrl: string,
  abortSignal?: AbortSignal,
): Promise<QueueDepth> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: [
        'ApproximateNumberOfMessages',
        'ApproximateNumberOfMessagesNotVisible',
        'ApproximateNumberOfMessagesDelayed',
      ],
    }),
    abortSignal ? { abortSignal } : {},
  );
  const attributes = out.Attributes ?? {};
  const count = (name: string) => Number(attributes[name as keyof typeof attributes] ?? 0) || 0;
  return {
    visible: count('ApproximateNumberOfMessages'),
    inFlight: count('ApproximateNumberOfMessagesNotVisible'),
    delayed: count('ApproximateNumberOfMessagesDelayed'),
  };
}

/** Every message a queue holds in any state. */
export function totalDepth(depth: QueueDepth): number {
  return depth.visible + depth.inFlight + depth.delayed;
}
