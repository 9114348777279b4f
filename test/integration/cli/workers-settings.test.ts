import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type CoreEnv, coreEnv } from '../../support/core-fixture.ts';
import { leaseq } from './run-cli.ts';
import { killMarked, startWorkers, type WorkersRun } from './workers-process.ts';

let env: CoreEnv;
let prefix: string;
let run: WorkersRun | undefined;

beforeAll(async () => {
  env = await coreEnv('wsettings');
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterEach(async () => {
  if (run) {
    run.child.kill('SIGKILL');
    killMarked(run.mark);
  }
  run = undefined;
});
afterAll(() => env?.close());

/** The settings each worker logged at start ("worker started"), read from the pool's log folder. */
async function startedSettings(
  args: readonly string[],
  vars: NodeJS.ProcessEnv,
): Promise<{ leaseMs: number; maxAttempts: number }[]> {
  run = startWorkers(['--prefix', prefix, '--count', '1', ...args], vars);
  await run.waitFor(/logs in (\S+);/, 120_000);
  const dir = /logs in (\S+);/.exec(run.stderr())?.[1] ?? '';
  const lines = readdirSync(dir).flatMap((file) =>
    readFileSync(join(dir, file), 'utf8').split('\n').filter(Boolean),
  );
  run.child.kill('SIGTERM');
  await run.exited;
  return lines
    .map((line) => JSON.parse(line) as { message?: string; leaseMs: number; maxAttempts: number })
    .filter((entry) => entry.message === 'worker started')
    .map(({ leaseMs, maxAttempts }) => ({ leaseMs, maxAttempts }));
}

describe('Command: leaseq workers, settings precedence (flag > LEASEQ_* variable > default)', () => {
  it('takes LEASEQ_LEASE_MS and LEASEQ_MAX_ATTEMPTS when no flag is given', async () => {
    const settings = await startedSettings([], { LEASEQ_LEASE_MS: '1500', LEASEQ_MAX_ATTEMPTS: '7' });
    expect(settings).toEqual([{ leaseMs: 1500, maxAttempts: 7 }]);
  }, 180_000);

  it('lets a flag given override the variable', async () => {
    const settings = await startedSettings(['--lease-ms', '6000', '--max-attempts', '2'], {
      LEASEQ_LEASE_MS: '1500',
      LEASEQ_MAX_ATTEMPTS: '7',
    });
    expect(settings).toEqual([{ leaseMs: 6000, maxAttempts: 2 }]);
  }, 180_000);

  it('uses the defaults when neither is set', async () => {
    const settings = await startedSettings([], {});
    expect(settings).toEqual([{ leaseMs: 30_000, maxAttempts: 5 }]);
  }, 180_000);

  it.each([
    [['--lease-ms', '200'], {}, '--lease-ms'],
    [['--lease-ms', 'soon'], {}, '--lease-ms'],
    [['--max-attempts', '0'], {}, '--max-attempts'],
    [[], { LEASEQ_LEASE_MS: '200' }, 'LEASEQ_LEASE_MS'],
    [[], { LEASEQ_MAX_ATTEMPTS: '1.5' }, 'LEASEQ_MAX_ATTEMPTS'],
    [[], { LEASEQ_BATCH_CONCURRENCY: 'ten' }, 'LEASEQ_BATCH_CONCURRENCY'],
  ] as const)(
    'refuses %j %j with one line naming %s, exit 1, no worker started',
    async (args, vars, name) => {
      const result = await leaseq(['workers', '--prefix', prefix, ...args], vars, 30_000);
      expect(result.code).toBe(1);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toMatch(/^leaseq: invalid worker configuration: /);
      expect(result.stderr).toContain(name);
      expect(result.stderr).not.toContain('workers running');
    },
  );

  it('says the precedence in --help', async () => {
    const result = await leaseq(['workers', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('LEASEQ_LEASE_MS');
    expect(result.stdout).toContain('LEASEQ_MAX_ATTEMPTS');
    expect(result.stdout).toMatch(/flag\s+>\s+LEASEQ_\* variable\s+>\s+default/);
  });
});
