import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { CloudWatchClient, DescribeAlarmsCommand, GetDashboardCommand } from '@aws-sdk/client-cloudwatch';
import {
  CloudWatchLogsClient,
  DescribeLogGroupsCommand,
  FilterLogEventsCommand,
} from '@aws-sdk/client-cloudwatch-logs';
import { DescribeTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { destroyAwsClients } from '../../../shared/aws/clients.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { readStackOutputs } from '../../../shared/local/deployed-stacks.ts';
import { eventually } from '../../support/core-fixture.ts';
import { runTag, testClients, testCredentials, testEndpoint } from '../../support/env.ts';
import { leaseq } from '../cli/run-cli.ts';

// The user's deploy loop on the embedded emulator: `leaseq local deploy` (cdk bootstrap + cdk deploy of
// the real stack), the deployed Lambda fired by its SQS event source mapping, an update deploy, and
// `leaseq local destroy`. The same test runs against LocalStack through AWS_ENDPOINT_URL (README).

// Short: CloudFormation derives the function's name from the stack's (64 characters at most). The run tag
// in it lets the test teardown remove the queues and tables if the destroy never ran.
const stage = `e2e-${runTag()}${randomBytes(2).toString('hex')}`;
const stackName = `leaseq-${stage}`;
const work = mkdtempSync(join(tmpdir(), 'leaseq-e2e-'));
const outputsFile = join(work, 'outputs.json');
const cdkOut = join(work, 'cdk.out');
const clients = testClients();
const credentials = testCredentials();
const cfn = new CloudFormationClient({ endpoint: testEndpoint(), region: 'us-east-1', credentials });
const logs = new CloudWatchLogsClient({ endpoint: testEndpoint(), region: 'us-east-1', credentials });
const cw = new CloudWatchClient({ endpoint: testEndpoint(), region: 'us-east-1', credentials });
let outputs: Record<string, string>;

/** `leaseq local deploy` of this test's stage with extra context; fails the test with its output. */
async function deploy(context: Record<string, string>) {
  const args = ['local', 'deploy', '--stage', stage, '--outputs-file', outputsFile, '--output', cdkOut];
  for (const [key, value] of Object.entries(context)) args.push('-c', `${key}=${value}`);
  const run = await leaseq(args, {}, 300_000);
  if (run.code !== 0) throw new Error(`deploy failed (${run.code}):\n${run.stderr.slice(-3000)}`);
  return run;
}

/** Sends jobs from a file through `leaseq send --outputs`. */
async function send(name: string, jobs: readonly object[]) {
  const file = join(work, `${name}.json`);
  writeFileSync(file, JSON.stringify(jobs));
  const run = await leaseq(['send', '--outputs', outputsFile, '--file', file, '--json']);
  if (run.code !== 0) throw new Error(`send failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as { sent: number; duplicates?: number };
}

async function statusOf(keys: readonly string[]): Promise<Record<string, string | undefined>> {
  const out = await clients.doc.send(
    new BatchGetCommand({
      RequestItems: {
        [outputs.JobsTableName ?? '']: { Keys: keys.map((dedupKey) => ({ dedupKey })), ConsistentRead: true },
      },
    }),
  );
  const found = Object.fromEntries(
    (out.Responses?.[outputs.JobsTableName ?? ''] ?? []).map((i) => [
      i.dedupKey as string,
      i.status as string,
    ]),
  );
  return Object.fromEntries(keys.map((k) => [k, found[k]]));
}

async function balance(account: string): Promise<number | undefined> {
  const out = await clients.doc.send(
    new GetCommand({ TableName: outputs.LedgerTableName, Key: { account }, ConsistentRead: true }),
  );
  return out.Item?.balance as number | undefined;
}

const run = stage.replace(/[^a-z0-9]/g, '');
const key = (n: string) => `${run}-${n}`;
const acct = (n: string) => `${run}-acct-${n}`;

beforeAll(async () => {
  await deploy({
    testHooks: 'true',
    leaseMs: '3000',
    maxAttempts: '3',
    batchSize: '1',
    workerTimeoutSeconds: '20',
  });
  outputs = readStackOutputs(outputsFile, stackName);
}, 300_000);

afterAll(async () => {
  cfn.destroy();
  logs.destroy();
  cw.destroy();
  destroyAwsClients(clients);
});

describe('The stack deployed to the emulator (cdk deploy, event source mapping, update, destroy)', () => {
  it("closes the emulator's CloudFormation gaps: TTL is on for the job and lease tables", async () => {
    for (const table of [outputs.JobsTableName, outputs.LeasesTableName]) {
      const ttl = await clients.ddb.send(new DescribeTimeToLiveCommand({ TableName: table }));
      expect(ttl.TimeToLiveDescription).toMatchObject({
        TimeToLiveStatus: 'ENABLED',
        AttributeName: 'expiresAt',
      });
    }
  });

  it('deploys the dashboard and the four alarms (the rate alarms as count alarms: no metric math here)', async () => {
    const prefix = outputs.JobsQueueName?.replace(/-jobs$/, '') ?? '';
    // GetDashboard, not ListDashboards: the emulator's list answer has a size the SDK cannot parse.
    const dashboard = await cw.send(new GetDashboardCommand({ DashboardName: `${prefix}-leaseq` }));
    expect(dashboard.DashboardBody).toContain('Ping-pong: receives per attempt');
    const alarms = await cw.send(new DescribeAlarmsCommand({ AlarmNamePrefix: `${prefix}-leaseq` }));
    expect(alarms.MetricAlarms?.map((a) => a.AlarmName?.replace(`${prefix}-leaseq-`, '')).sort()).toEqual([
      'dlq-not-empty',
      'lease-loss-rate',
      'oldest-message-age',
      'worker-error-rate',
    ]);
  });

  it('runs jobs in the deployed function: duplicates once, the poison in the DLQ with its reasons, a crash resumed from its checkpoint', async () => {
    const jobs = [
      { type: 'ledger.credit', dedupKey: key('c1'), payload: { account: acct('a'), amount: 100 } },
      { type: 'ledger.credit', dedupKey: key('c1'), payload: { account: acct('a'), amount: 100 } }, // duplicate
      { type: 'ledger.credit', dedupKey: key('c2'), payload: { account: acct('b'), amount: 50 } },
      {
        type: 'ledger.transfer',
        dedupKey: key('t1'),
        payload: { from: acct('a'), to: acct('b'), amount: 30 },
      },
      {
        type: 'ledger.transfer',
        dedupKey: key('t1'),
        payload: { from: acct('a'), to: acct('b'), amount: 30 },
      }, // duplicate
      // Kills its worker process between the debit and the credit (after a heartbeat moved the visibility).
      {
        type: 'ledger.transfer',
        dedupKey: key('crash'),
        payload: {
          from: acct('b'),
          to: acct('c'),
          amount: 20,
          simulate: { sleepMs: 1500, crashAfterStep: 'debit' },
        },
      },
      {
        type: 'ledger.credit',
        dedupKey: key('poison'),
        payload: { account: acct('c'), amount: 1, simulate: { permanent: true } },
      },
    ];
    await send('first', jobs);
    const keys = [key('c1'), key('c2'), key('t1'), key('crash'), key('poison')];
    await eventually(
      async () => {
        const states = await statusOf(keys);
        return Object.values(states).every((s) => s === JobStatus.Completed || s === JobStatus.Dead);
      },
      120_000,
      1000,
    );
    expect(await statusOf(keys)).toEqual({
      [key('c1')]: JobStatus.Completed,
      [key('c2')]: JobStatus.Completed,
      [key('t1')]: JobStatus.Completed,
      [key('crash')]: JobStatus.Completed,
      [key('poison')]: JobStatus.Dead,
    });
    // Each effect once: a = 100 - 30, b = 50 + 30 - 20, c = 20.
    expect([await balance(acct('a')), await balance(acct('b')), await balance(acct('c'))]).toEqual([
      70, 60, 20,
    ]);
    // The crashed transfer was finished by a later invocation, from its checkpoint (attempt 2).
    const crashed = await clients.doc.send(
      new GetCommand({
        TableName: outputs.JobsTableName,
        Key: { dedupKey: key('crash') },
        ConsistentRead: true,
      }),
    );
    expect(crashed.Item).toMatchObject({ attempts: 2, checkpoint: { done: ['debit'] } });
    const dlq = await leaseq(['dlq', 'list', '--letters', '--outputs', outputsFile, '--json']);
    const letters = JSON.parse(dlq.stdout) as { dedupKey?: string; reason: string; errorClass?: string }[];
    expect(letters.filter((l) => l.dedupKey === key('poison'))).toEqual([
      expect.objectContaining({ reason: 'permanent-error', errorClass: 'PermanentJobError' }),
    ]);
  }, 180_000);

  it('runs the function on Node 22 (its start line in CloudWatch Logs)', async () => {
    const groups = await logs.send(new DescribeLogGroupsCommand({}));
    const group = groups.logGroups?.map((g) => g.logGroupName ?? '').find((name) => name.includes(stackName));
    expect(group).toBeDefined();
    const events = await logs.send(
      new FilterLogEventsCommand({ logGroupName: group, filterPattern: '"worker started"' }),
    );
    const started = (events.events ?? []).map((e) => JSON.parse(e.message ?? '{}') as { node?: string });
    expect(started.length).toBeGreaterThan(0);
    expect(started.every((line) => line.node?.startsWith('v22.'))).toBe(true);
  });

  it('writes its metrics as EMF lines in namespace leaseq (flushed per invocation)', async () => {
    const groups = await logs.send(new DescribeLogGroupsCommand({}));
    const group = groups.logGroups?.map((g) => g.logGroupName ?? '').find((name) => name.includes(stackName));
    const events = await logs.send(
      new FilterLogEventsCommand({ logGroupName: group, filterPattern: '"CloudWatchMetrics"' }),
    );
    const blobs = (events.events ?? []).map(
      (e) =>
        JSON.parse(e.message ?? '{}') as {
          _aws?: { CloudWatchMetrics?: { Namespace: string }[] };
          JobSucceeded?: number;
        },
    );
    expect(blobs.length).toBeGreaterThan(0);
    expect(blobs.every((b) => b._aws?.CloudWatchMetrics?.[0]?.Namespace === 'leaseq')).toBe(true);
    expect(blobs.some((b) => (b.JobSucceeded ?? 0) > 0)).toBe(true);
  });

  it('an update deploy with a changed setting is what the next invocation runs', async () => {
    // maxAttempts 3 -> 1: a job that fails once is now dead-lettered instead of retried.
    await deploy({
      testHooks: 'true',
      leaseMs: '3000',
      maxAttempts: '1',
      batchSize: '1',
      workerTimeoutSeconds: '20',
    });
    await send('after-update', [
      {
        type: 'ledger.credit',
        dedupKey: key('flaky'),
        payload: { account: acct('d'), amount: 5, simulate: { failTimes: 1 } },
      },
    ]);
    await eventually(
      async () => (await statusOf([key('flaky')]))[key('flaky')] === JobStatus.Dead,
      60_000,
      1000,
    );
    expect(await balance(acct('d'))).toBeUndefined();
  }, 180_000);

  it('destroy leaves no stack', async () => {
    const run = await leaseq(
      ['local', 'destroy', '--yes', '--stage', stage, '--output', cdkOut],
      {},
      300_000,
    );
    expect(run.code, run.stderr).toBe(0);
    const gone = await cfn
      .send(new DescribeStacksCommand({ StackName: stackName }))
      .then((out) => out.Stacks?.[0]?.StackStatus ?? 'none')
      .catch((error: Error) => (/does not exist/i.test(error.message) ? 'none' : error.message));
    expect(['none', 'DELETE_COMPLETE']).toContain(gone);
  }, 300_000);
});
