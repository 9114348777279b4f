import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { destroyAwsClients } from '../../../shared/aws/clients.ts';
import { documentedInstalls, runDocumented } from '../../support/documented-installs.ts';
import { runTag, testClients, testCredentials, testEndpoint, uniqueName } from '../../support/env.ts';

// What a new user does: install the packed tarball into their own project (outside this repository),
// define a job, synthesize a stack with the construct, provision it locally, send with the producer
// API and run the job with local workers. Nothing here imports the repository's sources.
const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const project = mkdtempSync(join(tmpdir(), 'leaseq-adopter-'));
const packDir = mkdtempSync(join(tmpdir(), 'leaseq-pack-'));
const prefix = uniqueName('adopt');
const clients = testClients();
let tarball = '';
let packed: { entryCount: number; size: number; unpackedSize: number; files: { path: string }[] };
/** What the producer-only install (leaseq alone) holds and does, read before the peers are added. */
let lean: { present: string[]; producer: string; version: string; typescriptModule: string };
/** Installed only as optional peers: a producer or a Lambda handler needs none of them. */
const BUILD_TOOLS = ['esbuild', 'tsx', '@aws-sdk/client-cloudformation', 'aws-cdk-lib', 'constructs'];

/** The user app deployed with `leaseq local deploy`: a stack name of its own (not `leaseq-<stage>`). */
const userStack = `shop-${runTag()}${randomBytes(2).toString('hex')}`;
/** The AWS CLI (awscli from PyPI, a second SQS and DynamoDB client), installed while the package packs. */
const awsCliDir = join(project, '.awscli');
const AWS_CLI_VERSION = '1.46.3';
let awsCli: Promise<{ seconds: number }> = Promise.resolve({ seconds: 0 });
/** Set while the user app is deployed, so a failed test still destroys it. */
let userAppDeployed = false;

const env = () => ({
  ...process.env,
  AWS_ENDPOINT_URL: testEndpoint(),
  // The emulator runs from this checkout's state directory, not the project's: its keys come through
  // the environment, as `eval "$(leaseq local env)"` in the checkout would export them.
  AWS_ACCESS_KEY_ID: testCredentials().accessKeyId,
  AWS_SECRET_ACCESS_KEY: testCredentials().secretAccessKey,
  AWS_REGION: 'us-east-1',
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  // The adopter's synths and deploy validate their templates as they would for a user (the test run
  // turns CloudFormation's validation off elsewhere: vitest.config.ts).
  CDK_VALIDATION: undefined,
});

/**
 * `python3 -m venv --without-pip` plus pip of that Python installing into it, without byte-compiling:
 * about 11 s against 20-50 s for a venv with its own pip (measured on the reference machine). A Python
 * whose pip cannot do that (no pip, or older than 22.3) gets the venv with its own pip instead.
 */
async function installAwsCli(): Promise<{ seconds: number }> {
  const started = Date.now();
  const python = process.env.LEASEQ_PYTHON?.trim() || 'python3';
  const venvPython = join(awsCliDir, 'bin', 'python');
  const spec = [
    'install',
    '--quiet',
    '--no-compile',
    '--disable-pip-version-check',
    `awscli==${AWS_CLI_VERSION}`,
  ];
  const big = { maxBuffer: 16 * 1024 * 1024 };
  try {
    await run(python, ['-m', 'venv', '--without-pip', awsCliDir]);
    await run(python, ['-m', 'pip', '--python', venvPython, ...spec], big);
  } catch {
    rmSync(awsCliDir, { recursive: true, force: true });
    await run(python, ['-m', 'venv', awsCliDir]);
    await run(venvPython, ['-m', 'pip', ...spec], big);
  }
  return { seconds: (Date.now() - started) / 1000 };
}

beforeAll(async () => {
  // Started before the pack and awaited by the deploy test: it runs while npm packs and installs.
  awsCli = installAwsCli();
  awsCli.catch(() => {});
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', packDir], {
    cwd: ROOT,
    maxBuffer: 64 * 1024 * 1024,
  });
  packed = JSON.parse(stdout.slice(stdout.indexOf('[')))[0];
  tarball = join(packDir, readdirSync(packDir).find((f) => f.endsWith('.tgz')) ?? 'missing.tgz');
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'adopter', type: 'module', private: true }),
  );
  // Exactly the lines docs/jobs.md's Install section gives, with the versions a user gets today (no pins),
  // `leaseq` read as the tarball: the first line is what a service that only sends jobs installs.
  const [first, ...rest] = documentedInstalls(
    readFileSync(join(ROOT, 'docs', 'jobs.md'), 'utf8'),
    '## Install',
  );
  if (first === undefined) throw new Error('docs/jobs.md gives no install line');
  await runDocumented(first, project, tarball);
  lean = await leanInstall();
  // Then the optional peers (aws-cdk-lib, constructs, esbuild, tsx) and what `leaseq local deploy` needs in
  // the user's project (the CDK CLI and the CloudFormation client), as the page says.
  for (const line of rest) await runDocumented(line, project, tarball);
  writeFileSync(
    join(project, 'jobs.mjs'),
    `import { z } from 'zod';
import { defineJob, defineJobs, defineTable } from 'leaseq';

export const receipts = defineTable('receipts', { partitionKey: 'orderId' });

export const recordReceipt = defineJob({
  type: 'shop.receipt',
  payload: z.object({ orderId: z.string(), total: z.number().int().nonnegative() }),
  tables: { receipts },
  async run(ctx, p) {
    const seen = await ctx.tables.receipts.get({ orderId: p.orderId });
    return {
      effects: [
        ctx.tables.receipts.versionedPut({
          key: { orderId: p.orderId },
          seenVersion: seen?.version,
          item: { total: (seen?.total ?? 0) + p.total },
        }),
      ],
    };
  },
});

export default defineJobs([recordReceipt]);
`,
  );
  writeFileSync(
    join(project, 'worker.mjs'),
    `import { createWorkerHandler } from 'leaseq';
import jobs from './jobs.mjs';

export const handler = createWorkerHandler({ jobs });
`,
  );
  writeFileSync(
    join(project, 'stack.mjs'),
    `import { App, Stack } from 'aws-cdk-lib';
import { LeaseqPipeline } from 'leaseq/cdk';
import jobs from './jobs.mjs';

const app = new App({ outdir: 'cdk.out', context: { 'aws:cdk:bundling-stacks': ['*'] } });
const stack = new Stack(app, 'Shop');
new LeaseqPipeline(stack, 'Jobs', { entry: 'worker.mjs', jobs, resourcePrefix: ${JSON.stringify(prefix)} });
app.synth();
`,
  );
  writeFileSync(
    join(project, 'send.mjs'),
    `import { JobProducer } from 'leaseq/producer';
import jobs from './jobs.mjs';

const producer = new JobProducer({ queueUrl: process.argv[2], jobs });
const job = (dedupKey, orderId, total) => ({ type: 'shop.receipt', dedupKey, payload: { orderId, total } });
const sent = await producer.send(job('order-1', 'o-1', 42), job('order-1', 'o-1', 42), job('order-2', 'o-2', 7));
let refused = '';
try {
  await producer.send(job('order-3', 'o-3', -1));
} catch (error) {
  refused = error.name + ': ' + error.message;
}
process.stdout.write(JSON.stringify({ sent, refused }));
`,
  );
}, 240_000);

/** In the project holding leaseq alone: which build tools came with it, and what still works. */
async function leanInstall(): Promise<typeof lean> {
  const present = BUILD_TOOLS.filter((name) => existsSync(join(project, 'node_modules', name)));
  const producer = (
    await run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const m = await import('leaseq/producer'); console.log(typeof m.JobProducer)",
      ],
      { cwd: project, env: env() },
    )
  ).stdout.trim();
  const bin = join(project, 'node_modules', 'leaseq', 'bin', 'leaseq.mjs');
  const version = (
    await run(process.execPath, [bin, '--version'], { cwd: project, env: env() })
  ).stdout.trim();
  // An enum: Node's own type stripping refuses it, so only tsx could load this module.
  writeFileSync(join(project, 'lean-jobs.ts'), 'enum Kind {\n  A,\n}\nexport default [Kind.A];\n');
  writeFileSync(join(project, 'lean.ndjson'), `${JSON.stringify({ type: 'x', payload: {} })}\n`);
  const refused = await run(
    process.execPath,
    [bin, 'send', '--file', 'lean.ndjson', '--job-module', 'lean-jobs.ts'],
    { cwd: project, env: env() },
  ).catch((e: { code: number; stderr: string }) => e);
  const typescriptModule =
    'code' in refused ? `${refused.code}: ${refused.stderr.trim()}` : `loaded: ${refused.stdout}`;
  return { present, producer, version, typescriptModule };
}

/** Pids of the processes the emulator runs the function in (`<tmp>/ministack-lambda-<name>-<x>/_worker.js`). */
function functionProcesses(functionName: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const commandLine = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (commandLine.includes(`ministack-lambda-${functionName}-`)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

afterAll(async () => {
  if (userAppDeployed) {
    const bin = join(project, 'node_modules', 'leaseq', 'bin', 'leaseq.mjs');
    await run(process.execPath, [bin, 'local', 'destroy', '--yes'], { cwd: project, env: env() }).catch(
      () => {},
    );
  }
  destroyAwsClients(clients);
  rmSync(project, { recursive: true, force: true });
  rmSync(packDir, { recursive: true, force: true });
});

describe('The packed package, installed into a project of its own', () => {
  it('ships the built library, CLI and docs, and nothing of the repository around them', () => {
    const paths = packed.files.map((f) => f.path);
    expect(paths).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'package.json', 'bin/leaseq.mjs']));
    expect(paths).toEqual(expect.arrayContaining(['dist/shared/index.js', 'dist/shared/index.d.ts']));
    expect(paths).toEqual(expect.arrayContaining(['docs/protocol.md', 'docs/envelope.md', 'docs/jobs.md']));
    expect(
      paths.filter((p) => /^(test|bench|\.ci|scripts)\/|\.test\.|\.ts$/.test(p) && !p.endsWith('.d.ts')),
    ).toEqual([]);
    const manifest = JSON.parse(
      readFileSync(join(project, 'node_modules', 'leaseq', 'package.json'), 'utf8'),
    );
    expect(readFileSync(join(project, 'node_modules', 'leaseq', 'LICENSE'), 'utf8')).toMatch(
      /Apache License\s+Version 2\.0/,
    );
    expect(manifest.license).toBe('Apache-2.0');
    process.stderr.write(
      `packed: ${packed.entryCount} files, ${(packed.size / 1024).toFixed(0)} KiB (${(packed.unpackedSize / 1024).toFixed(0)} KiB unpacked)\n`,
    );
  });

  it("installs with exactly the README's lines too, at the versions a user gets today", async () => {
    // docs/jobs.md's lines built the project every other test here uses; the README gives a shorter set.
    const readme = mkdtempSync(join(tmpdir(), 'leaseq-readme-'));
    try {
      writeFileSync(
        join(readme, 'package.json'),
        JSON.stringify({ name: 'readme', type: 'module', private: true }),
      );
      const lines = documentedInstalls(
        readFileSync(join(ROOT, 'README.md'), 'utf8'),
        '## Put your own jobs on leaseq',
      );
      for (const line of lines) await runDocumented(line, readme, tarball, ['--prefer-offline']);
      const installed = ['leaseq', 'zod', 'aws-cdk-lib', 'constructs', 'esbuild', 'tsx'].filter((name) =>
        existsSync(join(readme, 'node_modules', name, 'package.json')),
      );
      expect(installed).toEqual(['leaseq', 'zod', 'aws-cdk-lib', 'constructs', 'esbuild', 'tsx']);
    } finally {
      rmSync(readme, { recursive: true, force: true });
    }
  }, 240_000);

  it('installs for a producer without the build tools, and says which to add when a command needs one', () => {
    expect(lean.present).toEqual([]);
    expect(lean.producer).toBe('function');
    // The CLI itself runs compiled, without tsx.
    expect(lean.version).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
    // A TypeScript module Node cannot load itself: one line that names the package to add.
    expect(lean.typescriptModule).toMatch(
      /^1: [^\n]*tsx is not installed; it is needed for loading a TypeScript job module [^\n]*npm install --save-dev tsx$/,
    );
  });

  it('loads a TypeScript job module in a CommonJS project (no "type": "module", as cdk init makes)', async () => {
    // Prepare: a sub-project without "type"; its .ts files are CommonJS to tsx.
    const cjs = join(project, 'cjs');
    mkdirSync(cjs, { recursive: true });
    writeFileSync(join(cjs, 'package.json'), JSON.stringify({ name: 'cjs-adopter', private: true }));
    writeFileSync(
      join(cjs, 'jobs.ts'),
      `import { z } from 'zod';
import { defineJob, defineJobs } from 'leaseq';

export const ping = defineJob({
  type: 'cjs.ping',
  payload: z.object({ n: z.number() }),
  async run(_ctx, p: { n: number }) {
    return { result: { pong: p.n } };
  },
});

export default defineJobs([ping]);
`,
    );
    writeFileSync(
      join(cjs, 'bad.ndjson'),
      `${JSON.stringify({ type: 'cjs.ping', payload: { n: 'one' } })}\n`,
    );

    // Act: send --file checks the file against the module before it connects anywhere.
    const bin = join(project, 'node_modules', 'leaseq', 'bin', 'leaseq.mjs');
    const error = await run(
      process.execPath,
      [bin, 'send', '--file', 'bad.ndjson', '--job-module', 'jobs.ts'],
      {
        cwd: cjs,
        env: env(),
      },
    ).catch((e: { code: number; stderr: string }) => e);

    // Assess: the module loaded (its schema refused the payload), rather than failing to load.
    expect(error).toMatchObject({ code: 1 });
    expect((error as { stderr: string }).stderr).toMatch(
      /line 1: payload of cjs\.ping: n: .*nothing was sent/,
    );
  });

  it('prints its version', async () => {
    const { stdout } = await run('npx', ['leaseq', '--version'], { cwd: project, env: env() });
    expect(stdout.trim()).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
  });

  it('synthesizes a stack with LeaseqPipeline whose bundled worker runs on plain Node', async () => {
    // Act
    await run(process.execPath, ['stack.mjs'], { cwd: project, env: env(), timeout: 120_000 });

    // Assess: the construct made the queues, leaseq's tables and the job's own table.
    const template = JSON.parse(readFileSync(join(project, 'cdk.out', 'Shop.template.json'), 'utf8'));
    const resources = Object.values(template.Resources) as {
      Type: string;
      Properties: Record<string, unknown>;
    }[];
    const tables = resources
      .filter((r) => r.Type === 'AWS::DynamoDB::Table')
      .map((r) => r.Properties.TableName);
    expect(tables.sort()).toEqual([`${prefix}-jobs`, `${prefix}-leases`, `${prefix}-receipts`]);
    const fn = resources.find((r) => r.Type === 'AWS::Lambda::Function');
    const variables =
      (fn?.Properties.Environment as { Variables: Record<string, unknown> } | undefined)?.Variables ?? {};
    expect(Object.keys(variables)).toEqual(
      expect.arrayContaining(['LEASEQ_TABLE_RECEIPTS', 'LEASEQ_JOBS_TABLE']),
    );
    expect(variables).not.toHaveProperty('LEASEQ_TEST_HOOKS');

    // The bundle is plain ESM: an empty batch on plain Node, with placeholder names, makes no AWS call.
    const asset = readdirSync(join(project, 'cdk.out')).find((f) => f.startsWith('asset.'));
    const bundle = pathToFileURL(join(project, 'cdk.out', asset ?? 'missing', 'index.mjs')).href;
    const placeholders = Object.fromEntries(
      Object.entries(variables).map(([k, v]) => [k, typeof v === 'string' ? v : 'placeholder']),
    );
    const script = `const { handler } = await import(${JSON.stringify(bundle)});
      process.stdout.write(JSON.stringify(await handler({ Records: [] }, { getRemainingTimeInMillis: () => 60000 })));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
      env: {
        PATH: process.env.PATH,
        ...placeholders,
        POWERTOOLS_LOG_LEVEL: 'SILENT',
        AWS_REGION: 'us-east-1',
      },
    });
    expect(JSON.parse(stdout)).toEqual({ batchItemFailures: [] });
  });

  it('synthesizes the reference LeaseqStack from the installed package (no lock file of its own)', async () => {
    writeFileSync(
      join(project, 'reference.mjs'),
      `import { App } from 'aws-cdk-lib';
import { LeaseqStack } from 'leaseq/cdk';

const app = new App({ outdir: 'ref.out' });
new LeaseqStack(app, 'Reference');
app.synth();
`,
    );
    await run(process.execPath, ['reference.mjs'], { cwd: project, env: env(), timeout: 120_000 });
    const template = JSON.parse(readFileSync(join(project, 'ref.out', 'Reference.template.json'), 'utf8'));
    expect(Object.keys(template.Outputs)).toEqual(
      expect.arrayContaining(['JobsQueueUrl', 'LedgerTableName']),
    );
  });

  it('runs the job on the embedded emulator through local workers: each effect once', async () => {
    // Prepare: the stack's queues and tables, then three sends (one a duplicate) and one refused send.
    const provision = await run(
      'npx',
      ['leaseq', 'local', 'provision', '--job-module', 'jobs.mjs', '--prefix', prefix],
      {
        cwd: project,
        env: env(),
      },
    );
    expect(provision.stdout).toMatch(new RegExp(`created\\s+table ${prefix}-receipts`));
    const queueUrl = `${testEndpoint()}/000000000000/${prefix}-jobs`;
    const status = JSON.parse(
      (await run('npx', ['leaseq', 'status', '--prefix', prefix, '--json'], { cwd: project, env: env() }))
        .stdout,
    );
    const sendOut = await run(process.execPath, ['send.mjs', status.queue.url ?? queueUrl], {
      cwd: project,
      env: env(),
    });
    const sent = JSON.parse(sendOut.stdout) as {
      sent: { dedupKey: string; traceparent: string }[];
      refused: string;
    };
    expect(sent.sent.map((s) => s.dedupKey)).toEqual(['order-1', 'order-1', 'order-2']);
    expect(sent.sent.every((s) => /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/.test(s.traceparent))).toBe(true);
    expect(sent.refused).toMatch(
      /^InvalidJobError: job 1 \(order-3\): shop\.receipt payload\.total: .*nothing was sent$/,
    );

    // Act
    // The installed bin itself (what npx runs), so the test sees the command's own exit code.
    const bin = join(project, 'node_modules', 'leaseq', 'bin', 'leaseq.mjs');
    const workers = spawn(
      process.execPath,
      [bin, 'workers', '--job-module', 'jobs.mjs', '--prefix', prefix, '--count', '1', '--json'],
      {
        cwd: project,
        env: env(),
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    workers.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => workers.on('exit', (code) => resolve(code)));
    const table = `${prefix}-receipts`;
    let items: Record<string, unknown>[] = [];
    for (const started = Date.now(); Date.now() - started < 45_000; ) {
      items =
        (await clients.doc.send(new ScanCommand({ TableName: table, ConsistentRead: true }))).Items ?? [];
      if (items.length >= 2) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    await new Promise((r) => setTimeout(r, 1500)); // the duplicate copy is handled as well
    workers.kill('SIGTERM');
    expect(await exited).toBe(0);

    // Assess: order-1 credited once although sent twice; the worker saw the duplicate.
    items = (await clients.doc.send(new ScanCommand({ TableName: table, ConsistentRead: true }))).Items ?? [];
    expect(items.sort((a, b) => String(a.orderId).localeCompare(String(b.orderId)))).toEqual([
      { orderId: 'o-1', total: 42, version: 1 },
      { orderId: 'o-2', total: 7, version: 1 },
    ]);
    const [row] = JSON.parse(stdout) as { succeeded: number; duplicates: number }[];
    expect(row).toMatchObject({ succeeded: 2, duplicates: 1 });
  });
  it('deploys a user CDK app with the construct under its own stack name (leaseq local deploy), runs a job sent with the AWS CLI, dead-letters a bad one, and local destroy leaves no function process or folder', async () => {
    // Prepare: the user's CDK app in their project (cdk.json), the construct in a stack named by them.
    writeFileSync(join(project, 'cdk.json'), JSON.stringify({ app: 'node app.mjs' }));
    writeFileSync(
      join(project, 'app.mjs'),
      `import { App, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { LeaseqPipeline } from 'leaseq/cdk';
import jobs from './jobs.mjs';

const app = new App();
const stack = new Stack(app, 'Shop', { stackName: ${JSON.stringify(userStack)} });
const pipeline = new LeaseqPipeline(stack, 'Jobs', { entry: 'worker.mjs', jobs, removalPolicy: RemovalPolicy.DESTROY });
pipeline.addStackOutputs();
`,
    );
    const bin = join(project, 'node_modules', 'leaseq', 'bin', 'leaseq.mjs');
    const started = Date.now();
    userAppDeployed = true;

    // Act: deploy every stack of the app (one here) to the emulator.
    const deployed = await run(process.execPath, [bin, 'local', 'deploy', '--json'], {
      cwd: project,
      env: env(),
      timeout: 300_000,
      maxBuffer: 16 * 1024 * 1024,
    }).catch((e: { code: number; stderr: string }) => {
      throw new Error(`local deploy failed (${e.code}): ${e.stderr.slice(-3000)}`);
    });
    const deploySeconds = (Date.now() - started) / 1000;
    const result = JSON.parse(deployed.stdout) as {
      stacks: { stackName: string; outputs: Record<string, string>; gapsClosed: string[] }[];
    };
    expect(result.stacks.map((s) => s.stackName)).toEqual([userStack]);
    const [stack] = result.stacks;
    const outputs = stack?.outputs ?? {};
    expect(stack?.gapsClosed.join('\n')).toMatch(new RegExp(`set TTL on ${userStack}-jobs \\(expiresAt\\)`));

    // Act: the AWS CLI sends one job and one with a payload its schema refuses.
    const { seconds: awsCliSeconds } = await awsCli;
    const aws = async (...args: string[]) =>
      JSON.parse(
        (
          await run(
            join(awsCliDir, 'bin', 'aws'),
            [...args, '--endpoint-url', testEndpoint(), '--output', 'json'],
            {
              env: {
                PATH: process.env.PATH,
                HOME: project,
                // The emulator's credential, as `leaseq local env` prints it for the AWS CLI.
                AWS_ACCESS_KEY_ID: testCredentials().accessKeyId,
                AWS_SECRET_ACCESS_KEY: testCredentials().secretAccessKey,
                AWS_DEFAULT_REGION: 'us-east-1',
              },
            },
          )
        ).stdout || '{}',
      );
    const body = (dedupKey: string, total: number) =>
      JSON.stringify({
        v: 1,
        id: `cli-${dedupKey}`,
        dedupKey,
        type: 'shop.receipt',
        createdAt: new Date().toISOString(),
        payload: { orderId: `o-${dedupKey}`, total },
      });
    await aws(
      'sqs',
      'send-message',
      '--queue-url',
      outputs.JobsQueueUrl ?? '',
      '--message-body',
      body('cli-1', 42),
    );
    await aws(
      'sqs',
      'send-message',
      '--queue-url',
      outputs.JobsQueueUrl ?? '',
      '--message-body',
      body('cli-bad', -1),
    );

    // Assess: the deployed function ran the job (the row, read with the AWS CLI) ...
    let row: Record<string, unknown> | undefined;
    for (const t0 = Date.now(); !row && Date.now() - t0 < 60_000; ) {
      row = (
        await aws(
          'dynamodb',
          'get-item',
          '--table-name',
          outputs.ReceiptsTableName ?? '',
          '--key',
          JSON.stringify({ orderId: { S: 'o-cli-1' } }),
          '--consistent-read',
        )
      ).Item;
      if (!row) await new Promise((r) => setTimeout(r, 500));
    }
    expect(row).toEqual({ orderId: { S: 'o-cli-1' }, total: { N: '42' }, version: { N: '1' } });
    // ... and dead-lettered the bad payload at once, with its reason in the letter's attributes.
    let letter: { Body: string; MessageAttributes: Record<string, { StringValue?: string }> } | undefined;
    for (const t0 = Date.now(); !letter && Date.now() - t0 < 60_000; ) {
      letter = (
        await aws(
          'sqs',
          'receive-message',
          '--queue-url',
          outputs.DlqUrl ?? '',
          '--message-attribute-names',
          'All',
          '--wait-time-seconds',
          '2',
        )
      ).Messages?.[0];
    }
    expect(JSON.parse(letter?.Body ?? '{}')).toMatchObject({ dedupKey: 'cli-bad' });
    const attribute = (name: string) => letter?.MessageAttributes[name]?.StringValue;
    expect(attribute('leaseq.reason')).toBe('invalid-bad-payload');
    expect(attribute('leaseq.errorClass')).toBe('InvalidEnvelopeError');
    expect(attribute('leaseq.dedupKey')).toBe('cli-bad');
    expect(attribute('leaseq.type')).toBe('shop.receipt');
    expect(attribute('leaseq.attempts')).toBe('0');

    // Act: destroy what the deploy made.
    const functionName = outputs.WorkerFunctionName ?? '';
    expect(functionProcesses(functionName).length).toBeGreaterThan(0);
    const destroyStarted = Date.now();
    await run(process.execPath, [bin, 'local', 'destroy', '--yes'], {
      cwd: project,
      env: env(),
      timeout: 300_000,
      maxBuffer: 16 * 1024 * 1024,
    }).catch((e: { code: number; stderr: string }) => {
      throw new Error(`local destroy failed (${e.code}): ${e.stderr.slice(-3000)}`);
    });
    const destroySeconds = (Date.now() - destroyStarted) / 1000;
    userAppDeployed = false;

    // Assess: the stack, the function's processes and the emulator's folders for it are gone.
    await expect(
      aws('cloudformation', 'describe-stacks', '--stack-name', userStack).then(
        (r) => r.Stacks?.[0]?.StackStatus,
      ),
    ).rejects.toThrow(/does not exist/);
    expect(functionProcesses(functionName)).toEqual([]);
    expect(readdirSync(tmpdir()).filter((f) => f.startsWith(`ministack-lambda-${functionName}-`))).toEqual(
      [],
    );
    process.stderr.write(
      `user app: local deploy ${deploySeconds.toFixed(1)} s, local destroy ${destroySeconds.toFixed(1)} s, awscli ${AWS_CLI_VERSION} install ${awsCliSeconds.toFixed(1)} s (during the pack)\n`,
    );
  });
});
