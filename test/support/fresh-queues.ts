import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { isLocalEndpoint } from '../../shared/aws/clients.ts';
import { type CoreEnv, queueCounts, sleep } from './core-fixture.ts';
import { testEndpointOf, uniqueName } from './env.ts';

// Between the cases of one file, tests need empty queues. PurgeQueue cannot give them on AWS: SQS allows
// one purge per queue every 60 seconds (a second one fails with PurgeQueueInProgress), and messages sent
// in the minute after a purge may be deleted too. So a case gets a new pair of queues (freshQueues), or,
// where a command finds its queues by name, the queue is emptied by receiving and deleting (drainQueue).

/** The queue attributes a copy keeps; RedrivePolicy is rebuilt to point at the copy's own DLQ. */
const COPIED = [
  'DelaySeconds',
  'MaximumMessageSize',
  'MessageRetentionPeriod',
  'ReceiveMessageWaitTimeSeconds',
  'VisibilityTimeout',
  'FifoQueue',
  'ContentBasedDeduplication',
  'DeduplicationScope',
  'FifoThroughputLimit',
] as const;

/**
 * `env` with a new, empty jobs queue and DLQ made with the same attributes (and the same
 * maxReceiveCount towards the new DLQ); its tables are the same. Call it in `beforeEach` in place of a
 * purge. On AWS a queue may not be usable in the first second after CreateQueue; against an endpoint on
 * this machine the pair is used at once.
 */
export async function freshQueues(env: CoreEnv): Promise<CoreEnv> {
  const { sqs } = env.clients;
  const createdAt = Date.now();
  const [jobs, dlq] = await Promise.all([attributesOf(sqs, env.queueUrl), attributesOf(sqs, env.dlqUrl)]);
  const fifo = jobs.FifoQueue === 'true';
  const name = uniqueName('q');
  const dlqUrl = await createQueue(sqs, `${name}-dlq${fifo ? '.fifo' : ''}`, copied(dlq));
  const dlqArn = (await attributesOf(sqs, dlqUrl)).QueueArn ?? '';
  const redrive = jobs.RedrivePolicy
    ? (JSON.parse(jobs.RedrivePolicy) as { maxReceiveCount: number })
    : undefined;
  const queueUrl = await createQueue(sqs, `${name}-jobs${fifo ? '.fifo' : ''}`, {
    ...copied(jobs),
    ...(redrive
      ? {
          RedrivePolicy: JSON.stringify({
            deadLetterTargetArn: dlqArn,
            maxReceiveCount: redrive.maxReceiveCount,
          }),
        }
      : {}),
  });
  const queueArn = (await attributesOf(sqs, queueUrl)).QueueArn ?? '';
  if (!isLocalEndpoint(testEndpointOf('sqs'))) await sleep(Math.max(0, createdAt + 1000 - Date.now()));
  return { ...env, queueUrl, queueArn, dlqUrl };
}

/**
 * Empties a queue without PurgeQueue: receives and deletes until nothing is visible, in flight or
 * delayed (messages in flight are waited for until they show again, within `budgetMs`). Throws when the
 * queue is not empty by then, naming what is left.
 */
export async function drainQueue(env: CoreEnv, url: string, budgetMs = 60_000): Promise<void> {
  const end = Date.now() + budgetMs;
  for (;;) {
    const out = await env.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        VisibilityTimeout: 30,
      }),
    );
    const got = out.Messages ?? [];
    if (got.length > 0) {
      await env.clients.sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: got.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle ?? '' })),
        }),
      );
      continue;
    }
    const left = await queueCounts(env, url);
    if (left.visible + left.inFlight + left.delayed === 0) return;
    if (Date.now() > end) {
      throw new Error(
        `drainQueue: ${url} still holds ${left.visible} visible, ${left.inFlight} in flight and ${left.delayed} delayed messages after ${budgetMs} ms`,
      );
    }
  }
}

async function attributesOf(sqs: SQSClient, url: string): Promise<Record<string, string>> {
  const out = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
  return out.Attributes ?? {};
}

function copied(attributes: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of COPIED) {
    const value = attributes[name];
    // A standard queue refuses FifoQueue=false on some emulators: leave it out.
    if (value !== undefined && !(name === 'FifoQueue' && value !== 'true')) out[name] = value;
  }
  return out;
}

async function createQueue(
  sqs: SQSClient,
  name: string,
  attributes: Record<string, string>,
): Promise<string> {
  const out = await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
  if (!out.QueueUrl) throw new Error(`CreateQueue ${name} returned no QueueUrl`);
  return out.QueueUrl;
}

/** Deletes messages a test received (and so holds in flight), so the queue is empty again without a purge. */
export async function deleteMessages(
  env: CoreEnv,
  url: string,
  messages: readonly { ReceiptHandle?: string | undefined }[],
): Promise<void> {
  for (let i = 0; i < messages.length; i += 10) {
    const page = messages.slice(i, i + 10);
    await env.clients.sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: page.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle ?? '' })),
      }),
    );
  }
}
