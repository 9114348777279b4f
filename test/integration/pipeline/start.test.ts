import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { DemoResult } from '../../../examples/ledger/demo/run-demo.ts';
import { testEndpoint, uniqueName } from '../../support/env.ts';

const run = promisify(execFile);

describe('Command: leaseq start', () => {
  it('runs a small demo end to end with a crash, a slow and a poison job, and verifies the ledger', async () => {
    const prefix = uniqueName('start');
    const { stdout } = await run(
      process.execPath,
      [
        'bin/leaseq.mjs',
        'start',
        '--prefix',
        prefix,
        '--jobs',
        '60',
        '--workers',
        '2',
        '--crashes',
        '1',
        '--slow',
        '1',
        '--poison',
        '2',
        '--lease-ms',
        '1500',
        '--timeout',
        '120',
        '--json',
      ],
      { env: { ...process.env, AWS_ENDPOINT_URL: testEndpoint(), CI: 'true' }, timeout: 150_000 },
    );
    const result = JSON.parse(stdout) as DemoResult;
    expect(result.verified).toBe(true);
    expect(result.completed).toBe(58);
    expect(result.deadLettered).toBe(2);
    expect(result.moneyActual).toBe(result.moneyExpected);
    expect(result.accounts.every((a) => a.ok)).toBe(true);
    // The crash really killed a worker, and a replacement finished its job.
    expect(result.workerRestarts).toBeGreaterThanOrEqual(1);
    expect(result.perWorker.some((w) => w.exit === 'SIGKILL')).toBe(true);
    // One entry per dead job (a worker killed while dead-lettering may leave two letters of one job).
    expect(result.deadLetters.map((d) => d.reason).sort()).toEqual([
      'invalid-not-json',
      'permanent-error',
      'permanent-error',
    ]);
    // The summary browsed the DLQ without hiding it: an operator sees the letters right away.
    const listed = await run(
      process.execPath,
      ['bin/leaseq.mjs', 'dlq', 'list', '--letters', '--prefix', prefix, '--json'],
      {
        env: { ...process.env, AWS_ENDPOINT_URL: testEndpoint() },
      },
    );
    const letters = JSON.parse(listed.stdout) as { reason: string }[];
    expect(letters.length).toBeGreaterThanOrEqual(3);
  });

  it('refuses a bad flag with one line and a non-zero exit', async () => {
    const error = await run(process.execPath, ['bin/leaseq.mjs', 'start', '--jobs', '-3'], {
      env: { ...process.env, AWS_ENDPOINT_URL: testEndpoint() },
    }).catch((e: { code: number; stderr: string }) => e);
    expect(error).toMatchObject({ code: 1 });
    const stderr = (error as { stderr: string }).stderr.trim();
    expect(stderr.split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/^leaseq: .*--jobs.*expected an integer from 1 to 100000/);
  });

  it('stops with the reason when its workers die before they poll, instead of restarting them for ever', async () => {
    // A setting every worker refuses at start: before, the run restarted them with no reason and never ended.
    const started = Date.now();
    const error = await run(
      process.execPath,
      ['bin/leaseq.mjs', 'start', '--prefix', uniqueName('startdie'), '--jobs', '10', '--workers', '2'],
      {
        env: { ...process.env, AWS_ENDPOINT_URL: testEndpoint(), LEASEQ_MAX_BODY_BYTES: 'abc' },
        timeout: 90_000,
      },
    ).catch((e: { code: number; stderr: string; killed: boolean }) => e);
    expect(error).toMatchObject({ code: 1, killed: false });
    const stderr = (error as { stderr: string }).stderr;
    expect(stderr).toMatch(/workers keep dying before they poll \(last: w\d, code 1\); see \S+\.log/);
    expect(Date.now() - started).toBeLessThan(60_000);
  }, 120_000);
});
