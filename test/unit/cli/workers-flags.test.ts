import { Command } from 'commander';
import { afterEach, describe, expect, it } from 'vitest';
import { register } from '../../../cli/commands/workers.ts';
import { runCli } from '../../../cli/errors.ts';

const saved = { ...process.env };
afterEach(() => {
  process.env = { ...saved };
  process.exitCode = undefined;
});

/** `leaseq workers <args>` in this process; the settings are checked before any job module or target. */
async function workers(args: readonly string[], vars: NodeJS.ProcessEnv = {}) {
  Object.assign(process.env, vars);
  const program = new Command('leaseq');
  register(program);
  let stderr = '';
  // A job module that does not exist: a setting the command accepted would fail on it instead.
  const argv = ['node', 'leaseq', 'workers', '--job-module', '/nonexistent/jobs.ts', ...args];
  const code = await runCli(program, argv, { stderr: (text) => (stderr += text), env: {} });
  return { code, stderr };
}

// Issue 23 item 1: `--timeout 1..4` started workers that handed every record back unrun.
describe('Command: leaseq workers --timeout against the deadline margin', () => {
  it.each([1, 4])('refuses --timeout %i in one line naming the smallest that works, exit 1', async (t) => {
    const { code, stderr } = await workers(['--timeout', String(t)]);
    expect(code).toBe(1);
    expect(stderr).toBe(
      `leaseq: invalid worker configuration: --timeout is ${t} s; required at least 5 s: every lease ends ` +
        "LEASEQ_DEADLINE_MARGIN_MS (3000 ms) before the invocation's deadline and no job starts under a lease " +
        'below 1000 ms, so every record would be handed back unrun (use --timeout 5 or more, plus the longest ' +
        "job's run time)\n",
    );
  });

  it('derives the minimum from LEASEQ_DEADLINE_MARGIN_MS', async () => {
    const { code, stderr } = await workers(['--timeout', '60'], { LEASEQ_DEADLINE_MARGIN_MS: '59500' });
    expect(code).toBe(1);
    expect(stderr).toMatch(
      /^leaseq: invalid worker configuration: --timeout is 60 s; required at least 62 s: /,
    );
    expect(stderr.split('\n')).toHaveLength(2);
  });

  it('accepts --timeout 5: the command goes on to the job module', async () => {
    const { code, stderr } = await workers(['--timeout', '5']);
    expect(code).toBe(1);
    expect(stderr).not.toContain('--timeout');
  });
});
