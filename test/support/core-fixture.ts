import { Logger } from '@aws-lambda-powertools/logger';
import {
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { SQSBatchResponse, SQSRecord } from 'aws-lambda';
import type { LeaseqStackProps } from '../../infra/leaseq-stack.ts';
import { type AwsClients, destroyAwsClients } from '../../shared/aws/clients.ts';
import { DynamoDbJobStore } from '../../shared/core/adapters/dynamodb-job-store.ts';
import { DynamoDbLeaseStore } from '../../shared/core/adapters/dynamodb-lease-store.ts';
import { DynamoDbRateStore } from '../../shared/core/adapters/dynamodb-rate-store.ts';
import { SqsJobQueue } from '../../shared/core/adapters/sqs-job-queue.ts';
import { makeEnvelope } from '../../shared/core/contract/envelope.ts';
import type { JobRegistry } from '../../shared/core/model/registry.ts';
import { InMemoryMetrics } from '../../shared/core/observe/metrics.ts';
import { processBatch } from '../../shared/core/pipeline/batch.ts';
import type { CompletedCache } from '../../shared/core/pipeline/completed-cache.ts';
import { JobProcessor, type JobProcessorOptions } from '../../shared/core/pipeline/processor.ts';
import { EffectTables } from '../../shared/jobs/effect-tables.ts';
import { provisionLocal } from '../../shared/local/provision.ts';
import { pollOnce } from '../../shared/runner/poll.ts';
import { testClients, uniqueName } from './env.ts';

/** One isolated copy of leaseq's queues and tables, provisioned from the stack template. */
export interface CoreEnv {
  readonly clients: AwsClients;
  readonly region: string;
  readonly queueUrl: string;
  readonly queueArn: string;
  readonly dlqUrl: string;
  readonly jobsTable: string;
  readonly leasesTable: string;
  readonly ledgerTable: string;
  close(): void;
}

export async function coreEnv(label = 'core', stackProps: LeaseqStackProps = {}): Promise<CoreEnv> {
  const clients = testClients();
  const prefix = uniqueName(label);
  const provisioned = await provisionLocal({ clients, prefix, stackProps });
  const o = provisioned.outputs;
  const attrs = await clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: o.JobsQueueUrl, AttributeNames: ['QueueArn'] }),
  );
  return {
    clients,
    region: await clients.sqs.config.region(),
    queueUrl: o.JobsQueueUrl,
    queueArn: attrs.Attributes?.QueueArn ?? '',
    dlqUrl: o.DlqUrl,
    jobsTable: o.JobsTableName,
    leasesTable: o.LeasesTableName,
    ledgerTable: provisioned.appTables.ledger ?? '',
    close: () => destroyAwsClients(clients),
  };
}

/** A logger that keeps test output quiet unless LEASEQ_TEST_LOGS is set. */
export function quietLogger(): Logger {
  return new Logger({
    serviceName: 'leaseq-test',
    logLevel: process.env.LEASEQ_TEST_LOGS ? 'DEBUG' : 'SILENT',
  });
}

export interface Worker {
  readonly processor: JobProcessor;
  readonly store: DynamoDbJobStore;
  readonly metrics: InMemoryMetrics;
  /** One event-source turn: receive, process, delete successes. */
  poll(waitSeconds?: number): Promise<number>;
  handle(records: SQSRecord[]): Promise<SQSBatchResponse>;
}

export function makeWorker(
  env: CoreEnv,
  registry: JobRegistry,
  overrides: Partial<JobProcessorOptions> & { worker?: string; cache?: CompletedCache } = {},
): Worker {
  const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
  const metrics = new InMemoryMetrics();
  const processor = new JobProcessor({
    store,
    queue: new SqsJobQueue({
      client: env.clients.sqs,
      queueUrl: env.queueUrl,
      deadLetterQueueUrl: env.dlqUrl,
    }),
    registry,
    // The ledger example's table, and its payload test hooks on (tests inject failures through them).
    tables: new EffectTables(env.clients.doc, { ledger: env.ledgerTable }),
    leases: leaseStore(env),
    // Its own store, as each worker has: its view of the permits is its own.
    rates: new DynamoDbRateStore({ client: env.clients.doc, tableName: env.leasesTable }),
    testHooks: true,
    worker: overrides.worker ?? uniqueName('w'),
    logger: quietLogger(),
    metrics,
    leaseMs: 3000,
    backoff: { baseSeconds: 1, capSeconds: 1 },
    ...overrides,
  });
  const handle = async (records: SQSRecord[]) => (await processBatch(records, processor)).response;
  return {
    processor,
    store,
    metrics,
    handle,
    poll: async (waitSeconds = 1) =>
      (
        await pollOnce({
          sqs: env.clients.sqs,
          queueUrl: env.queueUrl,
          queueArn: env.queueArn,
          region: env.region,
          handle,
          waitSeconds,
        })
      ).received,
  };
}

export function leaseStore(env: CoreEnv): DynamoDbLeaseStore {
  return new DynamoDbLeaseStore({ client: env.clients.doc, tableName: env.leasesTable });
}

/** Sends one job envelope; returns the SQS message id. */
export async function sendJob(
  env: CoreEnv,
  input: { dedupKey: string; type: string; payload: unknown; id?: string; trace?: string },
): Promise<string> {
  const body = JSON.stringify(makeEnvelope({ id: input.id ?? uniqueName('job'), ...input }));
  const out = await env.clients.sqs.send(
    new SendMessageCommand({ QueueUrl: env.queueUrl, MessageBody: body }),
  );
  return out.MessageId ?? '';
}

export async function sendRaw(env: CoreEnv, body: string): Promise<string> {
  const out = await env.clients.sqs.send(
    new SendMessageCommand({ QueueUrl: env.queueUrl, MessageBody: body }),
  );
  return out.MessageId ?? '';
}

export async function queueCounts(
  env: CoreEnv,
  url = env.queueUrl,
): Promise<{ visible: number; inFlight: number; delayed: number }> {
  const out = await env.clients.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: [
        'ApproximateNumberOfMessages',
        'ApproximateNumberOfMessagesNotVisible',
        'ApproximateNumberOfMessagesDelayed',
      ],
    }),
  );
  const a = out.Attributes ?? {};
  return {
    visible: Number(a.ApproximateNumberOfMessages ?? 0),
    inFlight: Number(a.ApproximateNumberOfMessagesNotVisible ?? 0),
    delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0),
  };
}

/** Receives whatever is visible now (short poll loop), leaving it in flight for `visibility` seconds. */
export async function receiveAll(
  env: CoreEnv,
  url: string,
  visibility = 30,
  waitSeconds = 1,
): Promise<Message[]> {
  const all: Message[] = [];
  for (let i = 0; i < 5; i++) {
    const out = await env.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: waitSeconds,
        VisibilityTimeout: visibility,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    const got = out.Messages ?? [];
    all.push(...got);
    if (got.length === 0) break;
  }
  return all;
}

export async function getBalance(
  env: CoreEnv,
  account: string,
): Promise<{ balance: number; version: number } | undefined> {
  const out = await env.clients.doc.send(
    new GetCommand({ TableName: env.ledgerTable, Key: { account }, ConsistentRead: true }),
  );
  return out.Item as { balance: number; version: number } | undefined;
}

export async function putBalance(
  env: CoreEnv,
  account: string,
  balance: number,
  version: number,
): Promise<void> {
  await env.clients.doc.send(
    new PutCommand({ TableName: env.ledgerTable, Item: { account, balance, version } }),
  );
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it returns true or `timeoutMs` passes; returns whether it became true. */
export async function eventually(
  check: () => Promise<boolean>,
  timeoutMs = 15_000,
  everyMs = 200,
): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return true;
    await sleep(everyMs);
  }
  return check();
}
