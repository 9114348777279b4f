import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateQueueCommand, DeleteQueueCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AwsClients, destroyAwsClients } from '../../../shared/aws/clients.ts';
import { emulatorStatus } from '../../../shared/local/emulator.ts';
import { testClients, testEndpoint, testEndpointOf, uniqueName } from '../../support/env.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CHILD = fileURLToPath(new URL('./produce-child.ts', import.meta.url));

interface ChildResult {
  readonly ok: boolean;
  readonly sent?: { messageId: string; dedupKey: string }[];
  readonly name?: string;
  readonly message?: string;
  readonly retryable?: boolean;
}

/**
 * Runs the producer program with the environment a user's own process may have: PATH and an empty
 * HOME (no ~/.aws), nothing AWS_* at all.
 */
function produce(mode: 'url' | 'local', target: string): Promise<ChildResult> {
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: mkdtempSync(join(tmpdir(), 'leaseq-producer-home-')),
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  };
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', CHILD, mode, target],
      { cwd: ROOT, env, timeout: 60_000 },
      (error, stdout, stderr) => {
        const line = stdout.trim().split('\n').pop() ?? '';
        try {
          resolve(JSON.parse(line) as ChildResult);
        } catch {
          reject(
            new Error(`producer child printed no result (${error?.message ?? ''}): ${stderr.slice(-2000)}`),
          );
        }
      },
    );
  });
}

let clients: AwsClients;
const queues: string[] = [];

async function makeQueue(name: string): Promise<string> {
  const out = await clients.sqs.send(new CreateQueueCommand({ QueueName: name }));
  if (!out.QueueUrl) throw new Error(`no URL for queue ${name}`);
  queues.push(out.QueueUrl);
  return out.QueueUrl;
}

async function received(queueUrl: string): Promise<string[]> {
  const out = await clients.sqs.send(
    new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
  );
  return (out.Messages ?? []).map((m) => m.MessageId ?? '');
}

beforeAll(() => {
  clients = testClients();
});
afterAll(async () => {
  await Promise.all(
    queues.map((QueueUrl) => clients.sqs.send(new DeleteQueueCommand({ QueueUrl })).catch(() => undefined)),
  );
  destroyAwsClients(clients);
});

describe('JobProducer finds the emulator the CLI finds (no AWS_ENDPOINT_URL, no credentials)', () => {
  it("sends to a loopback queue URL with the URL's host as endpoint and test credentials", async () => {
    // Arrange
    const queueUrl = await makeQueue(uniqueName('produrl'));
    expect(new URL(queueUrl).hostname).toMatch(/^(127\.0\.0\.1|localhost)$/);

    // Act
    const result = await produce('url', queueUrl);

    // Assert
    expect(result.message).toBeUndefined();
    expect(result).toMatchObject({ ok: true });
    expect(await received(queueUrl)).toEqual([result.sent?.[0]?.messageId]);
  });

  // The embedded emulator is found through this checkout's .leaseq/emulator.json; an endpoint of
  // another kind (LocalStack through AWS_ENDPOINT_URL) has no such record for the child to find.
  const embedded = async () => {
    const status = await emulatorStatus({ env: { ...process.env, AWS_ENDPOINT_URL: '' } });
    // The child has no AWS_* variables: SQS elsewhere (AWS_ENDPOINT_URL_SQS, test:localstack) is not its.
    return status.running && status.endpoint === testEndpoint() && testEndpointOf('sqs') === testEndpoint();
  };

  it("localJobProducer(): the running embedded emulator, its test credentials, and the prefix's jobs queue", async (ctx) => {
    if (!(await embedded())) ctx.skip();
    // Arrange: the jobs queue of a deployment with its own prefix.
    const prefix = uniqueName('prodlocal');
    const queueUrl = await makeQueue(`${prefix}-jobs`);

    // Act
    const result = await produce('local', prefix);

    // Assert
    expect(result.message).toBeUndefined();
    expect(result).toMatchObject({ ok: true });
    expect(await received(queueUrl)).toEqual([result.sent?.[0]?.messageId]);
  });
});
