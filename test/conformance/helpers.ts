import {
  type AttributeDefinition,
  CreateTableCommand,
  DeleteTableCommand,
  type DynamoDBClient,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  type Message,
  type QueueAttributeName,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { uniqueName } from '../support/env.ts';

declare module '@vitest/runner' {
  interface TaskMeta {
    /**
     * What the endpoint did where AWS allows more than one answer (e.g. a stale receipt handle);
     * `test/conformance/measure.ts` copies it into docs/emulators.md.
     */
    observed?: string;
  }
}

/** Resources a test created, deleted after it whatever its outcome. */
export class Cleanup {
  private readonly tasks: Array<() => Promise<unknown>> = [];

  add(task: () => Promise<unknown>): void {
    this.tasks.push(task);
  }

  async run(): Promise<void> {
    const tasks = this.tasks.splice(0).reverse();
    await Promise.allSettled(tasks.map((task) => task()));
  }
}

export interface CreatedQueue {
  readonly url: string;
  readonly name: string;
  readonly arn: string;
}

/** Creates a uniquely named queue (FIFO when `fifo`), registered for deletion. */
export async function createQueue(
  sqs: SQSClient,
  cleanup: Cleanup,
  options: { prefix: string; fifo?: boolean; attributes?: Partial<Record<QueueAttributeName, string>> },
): Promise<CreatedQueue> {
  const name = `${uniqueName(options.prefix)}${options.fifo ? '.fifo' : ''}`;
  const attributes: Partial<Record<QueueAttributeName, string>> = {
    ...(options.fifo ? { FifoQueue: 'true' } : {}),
    ...options.attributes,
  };
  const created = await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
  const url = created.QueueUrl;
  if (!url) throw new Error(`CreateQueue ${name} returned no QueueUrl`);
  cleanup.add(() => sqs.send(new DeleteQueueCommand({ QueueUrl: url })));
  const arn = (await queueAttributes(sqs, url, ['QueueArn'])).QueueArn;
  if (!arn) throw new Error(`GetQueueAttributes ${name} returned no QueueArn`);
  return { url, name, arn };
}

export async function queueAttributes(
  sqs: SQSClient,
  url: string,
  names: QueueAttributeName[],
): Promise<Partial<Record<string, string>>> {
  const result = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: names }));
  return result.Attributes ?? {};
}

/** The three counts leaseq's `status` shows, as numbers. */
export async function queueCounts(
  sqs: SQSClient,
  url: string,
): Promise<{ visible: number; notVisible: number; delayed: number }> {
  const attributes = await queueAttributes(sqs, url, [
    'ApproximateNumberOfMessages',
    'ApproximateNumberOfMessagesNotVisible',
    'ApproximateNumberOfMessagesDelayed',
  ]);
  return {
    visible: Number(attributes.ApproximateNumberOfMessages),
    notVisible: Number(attributes.ApproximateNumberOfMessagesNotVisible),
    delayed: Number(attributes.ApproximateNumberOfMessagesDelayed),
  };
}

/** One ReceiveMessage call asking for everything leaseq reads. */
export async function receive(
  sqs: SQSClient,
  url: string,
  options: { waitSeconds?: number; max?: number; visibilityTimeout?: number } = {},
): Promise<Message[]> {
  const result = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: url,
      MaxNumberOfMessages: options.max ?? 10,
      WaitTimeSeconds: options.waitSeconds ?? 0,
      MessageAttributeNames: ['All'],
      MessageSystemAttributeNames: ['All'],
      ...(options.visibilityTimeout === undefined ? {} : { VisibilityTimeout: options.visibilityTimeout }),
    }),
  );
  return result.Messages ?? [];
}

/**
 * Receives until `count` messages arrived or `timeoutMs` passed (long polls of 1 s). Does not delete.
 */
export async function receiveAtLeast(
  sqs: SQSClient,
  url: string,
  count: number,
  timeoutMs = 10_000,
): Promise<Message[]> {
  const deadline = Date.now() + timeoutMs;
  const messages: Message[] = [];
  while (messages.length < count && Date.now() < deadline) {
    messages.push(...(await receive(sqs, url, { waitSeconds: 1 })));
  }
  return messages;
}

/** Creates a uniquely named on-demand table keyed by string `pk`, registered for deletion. */
export async function createTable(ddb: DynamoDBClient, cleanup: Cleanup, prefix: string): Promise<string> {
  const name = uniqueName(prefix);
  const attributes: AttributeDefinition[] = [{ AttributeName: 'pk', AttributeType: 'S' }];
  await ddb.send(
    new CreateTableCommand({
      TableName: name,
      AttributeDefinitions: attributes,
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  cleanup.add(() => ddb.send(new DeleteTableCommand({ TableName: name })));
  await waitUntilTableExists({ client: ddb, maxWaitTime: 60, minDelay: 1 }, { TableName: name });
  return name;
}

/** The rejection of `promise`; fails the test if it resolves. */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail, but it succeeded');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function errorName(error: unknown): string {
  return error instanceof Error ? error.name : String(error);
}
