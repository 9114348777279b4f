import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateQueueCommand, DeleteQueueCommand, GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { eventually } from '../../support/core-fixture.ts';
import { runTag, testClients, testEndpoint } from '../../support/env.ts';

// A pipeline on a queue made outside the construct (as a team's existing queue is): `leaseq local deploy`
// of a user's app whose LeaseqPipeline is given the queue and DLQ by ARN, one job sent through the stack
// outputs and run by the deployed Lambda from that queue; the destroy leaves the queue standing.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join(ROOT, 'bin/leaseq.mjs');
const tag = `${runTag()}${randomBytes(2).toString('hex')}`;
const queueName = `own-${tag}`;
const stackName = `OwnQueue-${tag}`;
const work = mkdtempSync(join(tmpdir(), 'leaseq-ownq-'));
const clients = testClients();
const urls: string[] = [];

function run(args: string[], timeout = 300_000): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: work, env: { ...process.env, AWS_ENDPOINT_URL: testEndpoint() }, timeout, maxBuffer: 1 << 24 },
      (error, stdout, stderr) =>
        resolve({
          code: error ? (typeof error.code === 'number' ? error.code : 1) : 0,
          out: stdout + stderr,
        }),
    );
  });
}

function writeApp(dlqArn: string, queueArn: string): void {
  symlinkSync(join(ROOT, 'node_modules'), join(work, 'node_modules'));
  writeFileSync(join(work, 'cdk.json'), JSON.stringify({ app: 'npx tsx app.ts' }));
  writeFileSync(
    join(work, 'app.ts'),
    `import { App, Duration, Stack } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import jobs from '${ROOT}examples/ledger/jobs.ts';
import { LeaseqPipeline } from '${ROOT}infra/index.ts';
const app = new App();
const stack = new Stack(app, '${stackName}');
new LeaseqPipeline(stack, 'Jobs', {
  entry: '${ROOT}functions/worker.ts',
  projectRoot: '${ROOT}',
  depsLockFilePath: '${ROOT}package-lock.json',
  jobs,
  resourcePrefix: 'ownq-${tag}',
  workerTimeout: Duration.seconds(20),
  existingQueue: {
    queue: sqs.Queue.fromQueueArn(stack, 'Q', '${queueArn}'),
    deadLetterQueue: sqs.Queue.fromQueueArn(stack, 'D', '${dlqArn}'),
    visibilityTimeout: Duration.seconds(120),
    maxReceiveCount: 15,
  },
}).addStackOutputs();
app.synth();
`,
  );
}

async function makeQueue(name: string, attributes: Record<string, string>): Promise<string> {
  const { QueueUrl } = await clients.sqs.send(
    new CreateQueueCommand({ QueueName: name, Attributes: attributes }),
  );
  urls.push(QueueUrl ?? '');
  const out = await clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['QueueArn'] }),
  );
  return out.Attributes?.QueueArn ?? '';
}

afterAll(async () => {
  for (const QueueUrl of urls)
    await clients.sqs.send(new DeleteQueueCommand({ QueueUrl })).catch(() => undefined);
});

describe('LeaseqPipeline deployed on an existing queue (emulator)', () => {
  it('runs a job from the queue made outside the construct, and the destroy leaves that queue', async () => {
    const dlqArn = await makeQueue(`${queueName}-dlq`, { MessageRetentionPeriod: '1209600' });
    const queueArn = await makeQueue(queueName, {
      VisibilityTimeout: '120',
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 15 }),
    });
    writeApp(dlqArn, queueArn);
    const deployed = await run(['local', 'deploy', '--stack', stackName, '--outputs-file', 'out.json']);
    expect(deployed.code, deployed.out.slice(-3000)).toBe(0);
    const outputs = (
      JSON.parse(readFileSync(join(work, 'out.json'), 'utf8')) as Record<string, Record<string, string>>
    )[stackName] as Record<string, string>;
    expect(outputs.JobsQueueName).toBe(queueName);

    writeFileSync(
      join(work, 'jobs.json'),
      JSON.stringify([
        { type: 'ledger.credit', dedupKey: `${tag}-1`, payload: { account: `${tag}-a`, amount: 7 } },
      ]),
    );
    const sent = await run(['send', '--outputs', 'out.json', '--file', 'jobs.json'], 60_000);
    expect(sent.code, sent.out).toBe(0);
    await eventually(
      async () => {
        const item = await clients.doc.send(
          new GetCommand({
            TableName: outputs.JobsTableName,
            Key: { dedupKey: `${tag}-1` },
            ConsistentRead: true,
          }),
        );
        return item.Item?.status === JobStatus.Completed;
      },
      90_000,
      1000,
    );
    const account = await clients.doc.send(
      new GetCommand({
        TableName: outputs.LedgerTableName,
        Key: { account: `${tag}-a` },
        ConsistentRead: true,
      }),
    );
    expect(account.Item?.balance).toBe(7);

    const destroyed = await run(['local', 'destroy', '--yes', '--stack', stackName]);
    expect(destroyed.code, destroyed.out.slice(-2000)).toBe(0);
    const still = await clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: urls[1], AttributeNames: ['QueueArn'] }),
    );
    expect(still.Attributes?.QueueArn).toBe(queueArn);
  }, 400_000);
});
