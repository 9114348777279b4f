import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CoreEnv, coreEnv } from '../../support/core-fixture.ts';
import { testEndpoint } from '../../support/env.ts';
import type { CliRun } from './run-cli.ts';

// `leaseq status` adds the local workers' figures (ping-pong, starvation, store latency) from the pools
// of the directory it runs in. They belong to one queue: a status of another deployment (a stack
// deployed to the same emulator, read with --outputs) must not print them as its own.
const BIN = fileURLToPath(new URL('../../../bin/leaseq.mjs', import.meta.url));
const JOBS = fileURLToPath(new URL('../../../examples/ledger/jobs.ts', import.meta.url));
const cwd = mkdtempSync(join(tmpdir(), 'leaseq-status-workers-'));
const childEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env, AWS_ENDPOINT_URL: testEndpoint() };
  delete env.LEASEQ_PREFIX;
  return env;
};
let worked: CoreEnv;
let other: CoreEnv;
let stopWorkers = async () => {};

function leaseqIn(args: readonly string[]): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd, env: childEnv(), timeout: 60_000 },
      (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  [worked, other] = await Promise.all([coreEnv('stwork'), coreEnv('stother')]);
  // Local workers on one deployment, in this directory: their pool writes .leaseq/metrics every 2 s.
  const workers = spawn(
    process.execPath,
    [
      BIN,
      'workers',
      '--prefix',
      worked.jobsTable.replace(/-jobs$/, ''),
      '--job-module',
      JOBS,
      '--count',
      '1',
    ],
    { cwd, env: childEnv(), stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => workers.once('exit', () => resolve()));
  stopWorkers = async () => {
    workers.kill('SIGTERM');
    await exited;
  };
  const metrics = join(cwd, '.leaseq', 'metrics');
  for (const started = Date.now(); Date.now() - started < 45_000; ) {
    if (existsSync(metrics) && readdirSync(metrics).some((f) => f.endsWith('.json'))) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the workers wrote no metrics file within 45 s');
}, 180_000);

afterAll(async () => {
  await stopWorkers();
  worked?.close();
  other?.close();
  rmSync(cwd, { recursive: true, force: true });
});

describe('Command: leaseq status, local workers section', () => {
  it('is left out for a deployment the local workers do not work on (--outputs of another stack)', async () => {
    // Prepare: the other deployment's outputs, as `cdk deploy --outputs-file` writes them.
    const outputs = join(cwd, 'other-outputs.json');
    mkdirSync(cwd, { recursive: true });
    writeFileSync(
      outputs,
      JSON.stringify({
        Other: {
          JobsQueueUrl: other.queueUrl,
          JobsQueueName: other.queueUrl.split('/').pop(),
          DlqUrl: other.dlqUrl,
          DlqName: other.dlqUrl.split('/').pop(),
          JobsTableName: other.jobsTable,
          LeasesTableName: other.leasesTable,
        },
      }),
    );

    // Act
    const human = await leaseqIn(['status', '--outputs', outputs]);
    const json = await leaseqIn(['status', '--outputs', outputs, '--json']);

    // Assess
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain(`queue:        ${other.queueUrl.split('/').pop()}`);
    expect(human.stdout).not.toMatch(/local workers|ping-pong|starvation/);
    expect(JSON.parse(json.stdout)).not.toHaveProperty('smells');
  });

  it('is printed for the deployment they work on', async () => {
    const human = await leaseqIn(['status', '--prefix', worked.jobsTable.replace(/-jobs$/, '')]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/local workers \(1 pool\):\n {2}ping-pong/);
  });
});
