import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DeleteItemCommand, DynamoDBClient, GetItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { GetFunctionConfigurationCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { PurgeQueueCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EMULATORS } from '../../../shared/local/emulators.ts';
import { LOOPBACK_HOST } from '../../../shared/local/net.ts';
import { venvExecutable } from '../../../shared/local/venv.ts';
import { eventually } from '../../support/core-fixture.ts';
import { runTag } from '../../support/env.ts';
import { freePort } from '../../support/free-port.ts';
import { leaseq } from '../cli/run-cli.ts';

// IAM really checked: the stack deployed to an emulator of its own with IAM enforcement on (AUTH=true)
// over TLS (its own certificate, trusted through NODE_EXTRA_CA_CERTS). The worker role must do exactly
// what the code needs (the deployed function completes jobs and dead-letters the poison under it) and
// be denied the rest.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'leaseq-iam-'));
const certFile = join(work, 'ministack-tls', 'server.crt');
const outputsFile = join(work, 'outputs.json');
const logFile = join(work, 'emulator.log');
const stage = `iam-${runTag()}${randomBytes(2).toString('hex')}`;
const stackName = `leaseq-${stage}`;
const root = { accessKeyId: 'test', secretAccessKey: 'test' };
let emulator: ChildProcess | undefined;
let endpoint = '';
let outputs: Record<string, string>;
/** Env of CLI runs against this emulator. */
let cliEnv: NodeJS.ProcessEnv;

/** SDK options for this emulator: its endpoint, its certificate trusted, the given credentials. */
function sdk(credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string }) {
  return {
    endpoint,
    region: 'us-east-1',
    credentials,
    requestHandler: new NodeHttpHandler({ httpsAgent: new Agent({ ca: readFileSync(certFile) }) }),
  };
}

beforeAll(async () => {
  const port = await freePort();
  endpoint = `https://${LOOPBACK_HOST}:${port}`;
  const spec = EMULATORS.ministack;
  const bin = venvExecutable(join(ROOT, '.leaseq', 'venv'), spec.executable);
  if (!existsSync(bin)) throw new Error(`no emulator at ${bin}: the test setup installs it`);
  emulator = spawn(bin, spec.args(LOOPBACK_HOST, port), {
    env: {
      ...process.env,
      ...spec.env(LOOPBACK_HOST, port),
      AUTH: 'true',
      USE_SSL: '1',
      // Its certificate is generated under TMPDIR on start; the functions it runs trust it through
      // NODE_EXTRA_CA_CERTS (read by each worker process when it starts, after the file exists).
      TMPDIR: work,
      NODE_EXTRA_CA_CERTS: certFile,
      PATH: [dirname(process.execPath), process.env.PATH ?? ''].join(delimiter),
      // What the functions it runs talk to: this emulator itself.
      AWS_ENDPOINT_URL: endpoint,
    },
    stdio: ['ignore', openSync(logFile, 'a'), openSync(logFile, 'a')],
    detached: true,
  });
  await eventually(async () => existsSync(certFile), 30_000, 200);
  cliEnv = { AWS_ENDPOINT_URL: endpoint, NODE_EXTRA_CA_CERTS: certFile, CI: 'true' };
  await eventually(async () => (await leaseq(['local', 'status'], cliEnv)).code === 0, 30_000, 300);
  const run = await leaseq(
    [
      'local',
      'deploy',
      '--stage',
      stage,
      '--outputs-file',
      outputsFile,
      '--output',
      join(work, 'cdk.out'),
      '-c',
      'testHooks=true',
      '-c',
      'leaseMs=3000',
    ],
    cliEnv,
    300_000,
  );
  if (run.code !== 0) throw new Error(`deploy failed:\n${run.stderr.slice(-3000)}`);
  outputs =
    (JSON.parse(readFileSync(outputsFile, 'utf8')) as Record<string, Record<string, string>>)[stackName] ??
    {};
}, 360_000);

afterAll(() => {
  if (emulator?.pid) {
    try {
      process.kill(-emulator.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  // The folder holds the emulator's TLS private key and its log: nothing of it may outlive the test.
  rmSync(work, { recursive: true, force: true });
});

describe('IAM enforced (AUTH=true, TLS): the worker role', () => {
  it('lets the deployed function do its work: jobs complete, the poison reaches the DLQ', async () => {
    const file = join(work, 'jobs.json');
    const key = (n: string) => `${stage}-${n}`;
    writeFileSync(
      file,
      JSON.stringify([
        { type: 'ledger.credit', dedupKey: key('c1'), payload: { account: key('a'), amount: 10 } },
        {
          type: 'ledger.transfer',
          dedupKey: key('t1'),
          payload: { from: key('a'), to: key('b'), amount: 4 },
        },
        {
          type: 'ledger.credit',
          dedupKey: key('p1'),
          payload: { account: key('a'), amount: 1, simulate: { permanent: true } },
        },
      ]),
    );
    const sent = await leaseq(['send', '--outputs', outputsFile, '--file', file], cliEnv);
    expect(sent.code, sent.stderr).toBe(0);
    const ddb = new DynamoDBClient(sdk(root));
    const status = async (dedupKey: string) =>
      (
        await ddb.send(
          new GetItemCommand({
            TableName: outputs.JobsTableName,
            Key: { dedupKey: { S: dedupKey } },
            ConsistentRead: true,
          }),
        )
      ).Item?.status?.S;
    const done = await eventually(
      async () =>
        (await status(key('c1'))) === 'COMPLETED' &&
        (await status(key('t1'))) === 'COMPLETED' &&
        (await status(key('p1'))) === 'DEAD',
      90_000,
      1000,
    );
    expect(done, `jobs unfinished; emulator log: ${readFileSync(logFile, 'utf8').slice(-3000)}`).toBe(true);
    const dlq = await leaseq(['dlq', 'list', '--letters', '--outputs', outputsFile, '--json'], cliEnv);
    const letters = JSON.parse(dlq.stdout) as { dedupKey?: string; reason: string }[];
    expect(letters.find((l) => l.dedupKey === key('p1'))?.reason).toBe('permanent-error');
    ddb.destroy();
  }, 180_000);

  it('denies it everything the code does not need', async () => {
    const lambda = new LambdaClient(sdk(root));
    const fn = await lambda.send(
      new GetFunctionConfigurationCommand({ FunctionName: outputs.WorkerFunctionName }),
    );
    lambda.destroy();
    const sts = new STSClient(sdk(root));
    const assumed = await sts.send(new AssumeRoleCommand({ RoleArn: fn.Role, RoleSessionName: 'iam-probe' }));
    sts.destroy();
    const c = assumed.Credentials;
    if (!c?.AccessKeyId || !c.SecretAccessKey) throw new Error('no session credentials for the worker role');
    const asWorker = {
      accessKeyId: c.AccessKeyId,
      secretAccessKey: c.SecretAccessKey,
      sessionToken: c.SessionToken ?? '',
    };
    const ddb = new DynamoDBClient(sdk(asWorker));
    const sqs = new SQSClient({ ...sdk(asWorker), useQueueUrlAsEndpoint: false });
    const outcome = async (call: () => Promise<unknown>) =>
      call().then(
        () => 'allowed',
        (error: Error) => (/AccessDenied/.test(error.name) ? 'denied' : `failed: ${error.name}`),
      );
    const key = { dedupKey: { S: 'iam-probe' } };
    expect({
      getJobItem: await outcome(() =>
        ddb.send(new GetItemCommand({ TableName: outputs.JobsTableName, Key: key })),
      ),
      sendToDlq: await outcome(() =>
        sqs.send(new SendMessageCommand({ QueueUrl: outputs.DlqUrl, MessageBody: 'iam probe' })),
      ),
      scanJobs: await outcome(() => ddb.send(new ScanCommand({ TableName: outputs.JobsTableName }))),
      deleteJobItem: await outcome(() =>
        ddb.send(new DeleteItemCommand({ TableName: outputs.JobsTableName, Key: key })),
      ),
      scanLedger: await outcome(() => ddb.send(new ScanCommand({ TableName: outputs.LedgerTableName }))),
      scanLeases: await outcome(() => ddb.send(new ScanCommand({ TableName: outputs.LeasesTableName }))),
      purgeJobs: await outcome(() => sqs.send(new PurgeQueueCommand({ QueueUrl: outputs.JobsQueueUrl }))),
      sendToJobs: await outcome(() =>
        sqs.send(new SendMessageCommand({ QueueUrl: outputs.JobsQueueUrl, MessageBody: 'x' })),
      ),
    }).toEqual({
      getJobItem: 'allowed',
      sendToDlq: 'allowed',
      scanJobs: 'denied',
      deleteJobItem: 'denied',
      scanLedger: 'denied',
      scanLeases: 'denied',
      purgeJobs: 'denied',
      // Only a worker whose jobs declare a limit may send to its own queue (a limit's bounce re-sends a
      // message received often, limit-bounce.ts); the ledger's jobs declare none.
      sendToJobs: 'denied',
    });
    ddb.destroy();
    sqs.destroy();
  });
});
