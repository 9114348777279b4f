import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../support/free-port.ts';
import { leaseq } from './run-cli.ts';

// When a command cannot reach its target, the one line it prints says what happened and what to do
// about that: not the advice for another failure (credentials, a stopped embedded emulator).

const dir = mkdtempSync(join(tmpdir(), 'leaseq-target-errors-'));
/** A state directory with no emulator in it: the embedded emulator is not running. */
const stateDir = join(dir, 'state');
mkdirSync(stateDir, { mode: 0o700 });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function outputs(name: string, queueUrl: string, dlqUrl: string): string {
  const file = join(dir, name);
  writeFileSync(
    file,
    JSON.stringify({
      S: {
        JobsQueueUrl: queueUrl,
        JobsQueueName: 'jobs',
        DlqUrl: dlqUrl,
        DlqName: 'dlq',
        JobsTableName: 'jobs',
        LeasesTableName: 'leases',
      },
    }),
  );
  return file;
}

/** One line on stderr, and a failure. */
function oneLine(run: { code: number; stderr: string }): string {
  expect(run.code).not.toBe(0);
  const lines = run.stderr.trim().split('\n');
  expect(lines, run.stderr).toHaveLength(1);
  return lines[0] ?? '';
}

describe('Command: the target errors say what happened', () => {
  it('an AWS endpoint that cannot be reached is a network failure, not a credentials one', async () => {
    // A region with no STS host: the name does not resolve, as with no network at all.
    const run = await leaseq(['status', '--aws', '--region', 'xx-nowhere-9'], {
      AWS_ENDPOINT_URL: '',
      AWS_ACCESS_KEY_ID: 'AKIAIOSFODNN7EXAMPLE',
      AWS_SECRET_ACCESS_KEY: 'example',
      LEASEQ_STATE_DIR: stateDir,
    });
    const line = oneLine(run);
    expect(line).toContain('cannot reach AWS STS in xx-nowhere-9');
    expect(line).not.toContain('check the credentials');
  }, 60_000);

  it("outputs naming the documentation's example account are refused, not taken as an emulator's", async () => {
    const file = outputs(
      'example.json',
      'https://sqs.us-east-1.amazonaws.com/123456789012/jobs',
      'https://sqs.us-east-1.amazonaws.com/123456789012/dlq',
    );
    const run = await leaseq(['status', '--outputs', file], {
      AWS_ENDPOINT_URL: '',
      LEASEQ_STATE_DIR: stateDir,
    });
    const line = oneLine(run);
    expect(line).toContain(`--outputs ${file} names queues of account 123456789012`);
    expect(line).not.toContain('no target chosen');
  }, 60_000);

  it('outputs naming an emulator that is not running say so', async () => {
    const port = await freePort();
    const file = outputs(
      'dead.json',
      `http://127.0.0.1:${port}/000000000000/jobs`,
      `http://127.0.0.1:${port}/000000000000/dlq`,
    );
    const run = await leaseq(['status', '--outputs', file], {
      AWS_ENDPOINT_URL: '',
      LEASEQ_STATE_DIR: stateDir,
    });
    const line = oneLine(run);
    expect(line).toContain(`--outputs ${file} names queues on http://127.0.0.1:${port}, where nothing runs`);
    expect(line).not.toContain('no target chosen');
  }, 60_000);

  it('AWS_ENDPOINT_URL on a dead port is not answered with `start it with local up`, which then refuses', async () => {
    const port = await freePort();
    const env = { AWS_ENDPOINT_URL: `http://127.0.0.1:${port}`, LEASEQ_STATE_DIR: stateDir };
    const line = oneLine(await leaseq(['status'], env));
    expect(line).toContain(`cannot reach http://127.0.0.1:${port}`);
    expect(line).toContain('unset AWS_ENDPOINT_URL to use the embedded emulator');
    expect(line).not.toContain('start it with `npx leaseq local up`');
  }, 60_000);

  it('an endpoint with a user and password in it is printed without them', async () => {
    const port = await freePort();
    const env = { AWS_ENDPOINT_URL: `http://ops:s3cr3t-pw@127.0.0.1:${port}`, LEASEQ_STATE_DIR: stateDir };
    const dead = await leaseq(['status'], env);
    expect(oneLine(dead)).toContain(`cannot reach http://***@127.0.0.1:${port}`);
    // A live one: the target line and the per-service lines.
    const endpoint = process.env.AWS_ENDPOINT_URL ?? 'http://127.0.0.1:4566';
    const withUser = endpoint.replace('://', '://ops:s3cr3t-pw@');
    const live = await leaseq(['status', '--prefix', `leaseq-nocreds-${process.pid}`], {
      AWS_ENDPOINT_URL: withUser,
      AWS_ENDPOINT_URL_SQS: withUser,
    });
    expect(live.stderr).toContain('***@');
    expect(`${live.stdout}${live.stderr}`).not.toContain('s3cr3t-pw');
    expect(dead.stderr).not.toContain('s3cr3t-pw');
  }, 60_000);

  it('outputs naming a queue the running emulator does not have say so, not that it cannot be reached', async () => {
    const endpoint = process.env.AWS_ENDPOINT_URL ?? 'http://127.0.0.1:4566';
    const file = outputs(
      'gone.json',
      `${endpoint}/000000000000/leaseq-gone-${process.pid}-jobs`,
      `${endpoint}/000000000000/leaseq-gone-${process.pid}-dlq`,
    );
    const line = oneLine(await leaseq(['status', '--outputs', file]));
    expect(line).toContain(`queue ${endpoint}/000000000000/leaseq-gone-${process.pid}-jobs does not exist`);
    expect(line).not.toContain('cannot reach');
  }, 60_000);
});
