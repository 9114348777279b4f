import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, expect, it } from 'vitest';
import { deployLocal } from '../../../shared/local/deploy.ts';

// The bootstrap lock of `local deploy` lives in the emulator's private state directory: a lock file of
// the old predictable name in the shared /tmp (which any local user can create) no longer stalls a
// deploy, and a deploy that has to wait for a live holder says so instead of waiting silently.

const project = mkdtempSync(join(tmpdir(), 'leaseq-bootstrap-lock-'));
const lockDir = join(project, 'state');
mkdirSync(lockDir, { mode: 0o700 });
const sleepers: ChildProcess[] = [];
afterAll(() => {
  for (const sleeper of sleepers) sleeper.kill('SIGKILL');
  rmSync(project, { recursive: true, force: true });
});

// A stand-in `cdk`: `bootstrap` makes the toolkit stack, `deploy` fails (only the bootstrap matters here).
const bin = join(project, 'node_modules', '.bin');
mkdirSync(bin, { recursive: true });
writeFileSync(
  join(bin, 'cdk'),
  `#!/bin/sh\nif [ "$1" = bootstrap ]; then touch "${project}/toolkit-exists"; exit 0; fi\nexit 1\n`,
);
chmodSync(join(bin, 'cdk'), 0o755);

function cloudFormation(): CloudFormationClient {
  const client = new CloudFormationClient({ region: 'us-east-1' });
  client.send = (async (command: { constructor: { name: string } }) => {
    if (command.constructor.name === 'DescribeStacksCommand') {
      if (existsSync(join(project, 'toolkit-exists')))
        return { Stacks: [{ StackStatus: 'CREATE_COMPLETE' }] };
      throw new Error('Stack with id CDKToolkit does not exist');
    }
    return { StackEvents: [] };
  }) as unknown as CloudFormationClient['send'];
  return client;
}

const endpoint = `http://127.0.0.1:9/${project}`;
const lockId = createHash('sha256').update(`${endpoint} us-east-1`).digest('hex').slice(0, 16);

/** A live process that is not a leaseq deploy, to name as a lock's holder. */
function liveStranger(): number {
  const sleeper = spawn('sleep', ['30'], { stdio: 'ignore' });
  sleepers.push(sleeper);
  return sleeper.pid ?? 0;
}

function deploy(log: string[]) {
  return deployLocal({
    endpoint,
    region: 'us-east-1',
    projectDir: project,
    outputsFile: 'outputs.json',
    cloudFormation: cloudFormation(),
    dynamodb: new DynamoDBClient({ region: 'us-east-1' }),
    log: (line) => log.push(line),
    lockDir,
  }).catch((error: Error) => error.message);
}

it('is not stalled by a lock another user made under the old name in /tmp', async () => {
  const planted = join(tmpdir(), `leaseq-bootstrap-${lockId}.lock`);
  writeFileSync(planted, `${liveStranger()} planted`);
  try {
    const log: string[] = [];
    expect(await deploy(log)).toMatch(/cdk deploy failed/);
    expect(log.some((line) => line.startsWith('cdk bootstrap'))).toBe(true);
  } finally {
    rmSync(planted, { force: true });
  }
}, 15_000);

it('says what it waits for when a live process holds the lock', async () => {
  rmSync(join(project, 'toolkit-exists'), { force: true });
  const holder = liveStranger();
  const lock = join(lockDir, `bootstrap-${lockId}.lock`);
  writeFileSync(lock, `${holder} held`);
  const log: string[] = [];
  const result = deploy(log);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  // The holder goes away: its lock is taken over and the deploy goes on.
  process.kill(holder, 'SIGKILL');

  expect(await result).toMatch(/cdk deploy failed/);
  expect(log[0]).toBe(
    `waiting for another deploy (pid ${holder}) to bootstrap this emulator, at most 10 minutes; if no leaseq deploy is running, remove ${lock}`,
  );
}, 15_000);
