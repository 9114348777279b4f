import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import type { RedriveReport } from '../../../shared/ops/dlq-redrive.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  sendJob,
} from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import { leaseq } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;
let store: DynamoDbJobStore;
let dlqName: string;
let queueName: string;

beforeAll(async () => {
  env = await coreEnv('clitarget');
  prefix = env.jobsTable.replace(/-jobs$/, '');
  store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
  dlqName = env.dlqUrl.split('/').pop() ?? '';
  queueName = env.queueUrl.split('/').pop() ?? '';
});
afterAll(() => env?.close());

/** The target line every command prints: the test endpoint (AWS_ENDPOINT_URL), its account, its region. */
const TARGET_LINE =
  /^leaseq: target: (local endpoint|endpoint) http:\/\/\S+, account \d{12}, region [a-z0-9-]+ \(AWS_ENDPOINT_URL\)$/;

async function deadLetter(): Promise<string> {
  const poison = uniqueName('poison');
  await sendJob(env, {
    dedupKey: poison,
    type: 'ledger.credit',
    payload: { account: uniqueName('acct'), amount: 1, simulate: { permanent: true } },
  });
  const worker = makeWorker(env, ledgerJobs, { worker: 'w-target', maxAttempts: 1 });
  const done = await eventually(
    async () => {
      await worker.poll();
      return (await queueCounts(env, env.dlqUrl)).visible === 1 && (await queueCounts(env)).visible === 0;
    },
    30_000,
    100,
  );
  expect(done).toBe(true);
  return poison;
}

describe('Command: leaseq dlq redrive, where it acts and whether it may', () => {
  it('refuses without --yes and without a terminal, changing nothing; with --yes names the target and acts', async () => {
    // Prepare: one dead job, its letter in the DLQ.
    const poison = await deadLetter();
    const before = await store.get(poison);
    expect(before).toMatchObject({ status: JobStatus.Dead });

    // Act: no --yes, stdin not a terminal (the harness), CI set as in CI.
    const refused = await leaseq(['dlq', 'redrive', '--prefix', prefix], { CI: 'true' });

    // Assess: exit 1, the target line then the one-line refusal; the letter and the item untouched.
    expect(refused.code).toBe(1);
    const lines = refused.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(TARGET_LINE);
    expect(lines[1]).toBe(
      `leaseq: refusing to redrive ${dlqName} without confirmation: not a terminal, pass --yes`,
    );
    expect(refused.stdout).toBe('');
    expect(await queueCounts(env, env.dlqUrl)).toMatchObject({ visible: 1, inFlight: 0 });
    expect(await queueCounts(env)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    expect(await store.get(poison)).toEqual(before);

    // A dry run changes nothing and needs no --yes.
    const dry = await leaseq(['dlq', 'redrive', '--dry-run', '--prefix', prefix, '--json']);
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, redriven: 1 });

    // Act: with --yes.
    const done = await leaseq(['dlq', 'redrive', '--yes', '--prefix', prefix, '--json']);

    // Assess: it said where (account, region, endpoint; the queues and table) and redrove the job.
    expect(done.code).toBe(0);
    const said = done.stderr.trimEnd().split('\n');
    expect(said[0]).toMatch(TARGET_LINE);
    expect(said[1]).toBe(
      `leaseq: redrive: dead letters of ${dlqName} back to ${queueName}, their jobs reset to run again in table ${env.jobsTable}`,
    );
    expect(JSON.parse(done.stdout) as RedriveReport).toMatchObject({ dryRun: false, redriven: 1, failed: 0 });
    expect(await store.get(poison)).toMatchObject({ status: JobStatus.RetryWait, attempts: 0 });
    expect((await queueCounts(env, env.dlqUrl)).visible).toBe(0);
    expect((await queueCounts(env)).visible).toBe(1);
  });
});

describe('CLI with no target chosen', () => {
  // Where "AWS" requests would go: a shared config file whose endpoint_url the SDK honours by itself,
  // pointing at this recorder. leaseq must send it nothing.
  const requests: string[] = [];
  const recorder = createServer((req: IncomingMessage, res) => {
    requests.push(`${req.method} ${req.headers['x-amz-target'] ?? req.url}`);
    res.writeHead(500, { 'content-type': 'application/x-amz-json-1.0' });
    res.end('{"__type":"InternalFailure","message":"recorder"}');
  });
  let dir = '';
  let noTarget: NodeJS.ProcessEnv = {};

  beforeAll(async () => {
    await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
    const address = recorder.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    dir = mkdtempSync(join(tmpdir(), 'leaseq-notarget-'));
    writeFileSync(
      join(dir, 'config'),
      `[default]\nregion = us-east-1\nendpoint_url = http://127.0.0.1:${port}\n`,
    );
    writeFileSync(
      join(dir, 'credentials'),
      '[default]\naws_access_key_id = AKIAFAKEFAKEFAKEFAKE\naws_secret_access_key = fake\n',
    );
    noTarget = {
      AWS_ENDPOINT_URL: undefined,
      AWS_ENDPOINT_URL_SQS: undefined,
      AWS_ENDPOINT_URL_DYNAMODB: undefined,
      AWS_ACCESS_KEY_ID: undefined,
      AWS_SECRET_ACCESS_KEY: undefined,
      AWS_SESSION_TOKEN: undefined,
      AWS_PROFILE: undefined,
      AWS_REGION: 'us-east-1',
      AWS_CONFIG_FILE: join(dir, 'config'),
      AWS_SHARED_CREDENTIALS_FILE: join(dir, 'credentials'),
      // No emulator record: no embedded emulator is running as far as leaseq can tell.
      LEASEQ_STATE_DIR: join(dir, 'state'),
    };
  });
  afterAll(async () => {
    await new Promise((resolve) => recorder.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses in one line and sends no request, for a redrive, a purge and a read', async () => {
    for (const args of [
      ['status'],
      ['dlq', 'purge', '--yes'],
      ['dlq', 'redrive', '--yes', '--prefix', 'leaseq-dev'],
    ]) {
      const run = await leaseq(args, noTarget);
      // Nothing reached the place the SDK would have called "AWS".
      expect(requests, `${args.join(' ')}: ${run.stderr}`).toEqual([]);
      expect(run.code, args.join(' ')).toBe(1);
      expect(run.stderr).toMatch(
        /^leaseq: no target chosen: no --endpoint, no AWS_ENDPOINT_URL and no running emulator, .* pass --aws --region <region> to act on real AWS\n$/,
      );
      expect(run.stdout).toBe('');
    }
  });
});
