/**
 * `leaseq ui` start-up failures against the emulator (a target that resolves): one line on stderr, a
 * non-zero exit, no stack.
 */
import { createServer } from 'node:net';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { register } from '../../../cli/commands/ui.ts';
import { runCli } from '../../../cli/errors.ts';
import { type CoreEnv, coreEnv } from '../../support/core-fixture.ts';
import { testEndpoint } from '../../support/env.ts';

let env: CoreEnv;
let prefix: string;
const busy = createServer();
let busyPort = 0;

beforeAll(async () => {
  env = await coreEnv('cliuiflags');
  prefix = env.jobsTable.replace(/-jobs$/, '');
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  const address = busy.address();
  busyPort = typeof address === 'object' && address ? address.port : 0;
});
afterAll(async () => {
  await new Promise((resolve) => busy.close(resolve));
  env?.close();
});

async function ui(args: readonly string[]) {
  const program = new Command('leaseq');
  register(program);
  let stderr = '';
  const argv = ['node', 'leaseq', 'ui', '--endpoint', testEndpoint(), '--prefix', prefix, ...args];
  const code = await runCli(program, argv, { stderr: (text) => (stderr += text), env: {} });
  return { code, stderr };
}

describe('leaseq ui flags', () => {
  it('says in one line that the port is in use, exit 1, no stack', async () => {
    const { code, stderr } = await ui(['--port', String(busyPort)]);
    expect(code).toBe(1);
    const lines = stderr
      .split('\n')
      .filter((l) => l.startsWith('leaseq: ') && !l.startsWith('leaseq: target:'));
    expect(lines).toEqual([`leaseq: port ${busyPort} on 127.0.0.1 is in use: pass --port <other> (0: any)`]);
    expect(stderr).not.toMatch(/\n\s+at /);
  });

  it('says so when the port is taken on [::1] only (a browser would reach that server first)', async () => {
    const busy6 = createServer();
    await new Promise<void>((resolve) => busy6.listen(0, '::1', resolve));
    const port = (busy6.address() as { port: number }).port;
    try {
      const { code, stderr } = await ui(['--port', String(port)]);
      expect(code).toBe(1);
      expect(stderr).toContain(`leaseq: port ${port} on [::1] is in use: pass --port <other> (0: any)`);
    } finally {
      await new Promise((resolve) => busy6.close(resolve));
    }
  });
});
