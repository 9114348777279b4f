import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterEach, describe, expect, test } from 'vitest';
import { formatError, oneLine, runCli } from '../../../cli/errors.ts';
import { stopEmulator } from '../../../shared/local/emulator.ts';
import { close, fakeInstall, freePort, listen, tempDir, writeScript } from './fixtures.ts';

const BIN = new URL('../../../bin/leaseq.mjs', import.meta.url).pathname;

/** A program with one module, as cli/main.ts builds it. */
function program(): Command {
  const root = new Command('leaseq');
  const group = root.command('demo');
  group.command('ok').action(() => {});
  group.command('boom').action(async () => {
    throw new Error('it broke\n  while doing a thing');
  });
  group
    .command('port')
    .option('--port <port>')
    .action(() => {});
  return root;
}

async function run(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const code = await runCli(program(), ['node', 'leaseq', ...argv], {
    stderr: (text) => (stderr += text),
    env,
  });
  return { code, stderr };
}

describe('Function: runCli', () => {
  test('returns 0 for a successful action and prints nothing on stderr', async () => {
    expect(await run(['demo', 'ok'])).toEqual({ code: 0, stderr: '' });
  });

  test('an error thrown by an action is one line, `leaseq: <message>`, exit 1, no stack', async () => {
    expect(await run(['demo', 'boom'])).toEqual({
      code: 1,
      stderr: 'leaseq: it broke while doing a thing\n',
    });
  });

  test('LEASEQ_DEBUG=1 adds the stack', async () => {
    const { code, stderr } = await run(['demo', 'boom'], { LEASEQ_DEBUG: '1' });
    expect(code).toBe(1);
    expect(stderr.startsWith('leaseq: it broke while doing a thing\nError: it broke')).toBe(true);
    expect(stderr).toMatch(/\n\s+at /);
  });

  test.each([
    [['nope'], "leaseq: unknown command 'nope'\n"],
    [['demo', 'ok', '--verbose'], "leaseq: unknown option '--verbose'\n"],
    [['demo', 'port', '--prot', '1'], "leaseq: unknown option '--prot' (Did you mean --port?)\n"],
    [['demo', 'port', '--port'], "leaseq: option '--port <port>' argument missing\n"],
  ])('bad input %j is one line and a non-zero exit', async (argv, line) => {
    expect(await run(argv)).toEqual({ code: 1, stderr: line });
  });
});

describe('Function: formatError / oneLine', () => {
  test('collapses whitespace and newlines', () => {
    expect(oneLine('  a\n   b\tc  ')).toBe('a b c');
  });

  test('formats a non-Error throw', () => {
    expect(formatError('plain', false)).toBe('leaseq: plain\n');
  });

  test('shows the cause chain in debug mode', () => {
    const error = new Error('outer', { cause: new Error('inner') });
    expect(formatError(error, true)).toContain('caused by: Error: inner');
  });
});

/** Runs the real CLI binary with a clean environment (no AWS_ENDPOINT_URL from the integration setup). */
function leaseq(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const base = { ...process.env };
  delete base.AWS_ENDPOINT_URL;
  delete base.LEASEQ_EMULATOR_PORT;
  delete base.LEASEQ_DEBUG;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...base, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('CLI: leaseq local (bad input)', () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  function stateDir(): string {
    const temp = tempDir();
    cleanups.push(temp.remove);
    return temp.dir;
  }

  test('--port out of range: one line, exit 1', async () => {
    const result = await leaseq(['local', 'up', '--port', '70000'], { LEASEQ_STATE_DIR: stateDir() });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      "leaseq: option '--port <port>' argument '70000' is invalid. expected an integer from 1 to 65535\n",
    );
  });

  test('unreachable AWS_ENDPOINT_URL: said within a few seconds, one line, exit 1', async () => {
    const port = await freePort();
    const started = Date.now();

    const result = await leaseq(['local', 'up'], { AWS_ENDPOINT_URL: `http://127.0.0.1:${port}` });

    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `leaseq: AWS_ENDPOINT_URL http://127.0.0.1:${port} is not reachable (connection refused); start it (e.g. docker compose up -d) or unset AWS_ENDPOINT_URL to use the embedded emulator\n`,
    );
    // Not after the SDK's retries (tens of seconds); the CLI's own start takes 8-10 s on a loaded 2-core machine.
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  test('port taken by another program: one line, exit 1', async () => {
    const server = await listen(0);
    cleanups.push(() => close(server));
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;

    const result = await leaseq(['local', 'up'], {
      LEASEQ_STATE_DIR: stateDir(),
      LEASEQ_EMULATOR_PORT: String(port),
    });

    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `leaseq: port ${port} is in use by another program; stop it or set LEASEQ_EMULATOR_PORT\n`,
    );
  });

  test('no python3: one line, exit 1, at once', async () => {
    const started = Date.now();
    const result = await leaseq(['local', 'up', '--port', String(await freePort())], {
      LEASEQ_STATE_DIR: stateDir(),
      LEASEQ_PYTHON: '/nonexistent/python3',
    });

    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^leaseq: \/nonexistent\/python3 not found; install Python 3\.10\+ .*LEASEQ_PYTHON\n$/,
    );
    // Not after the SDK's retries (tens of seconds); the CLI's own start takes 8-10 s on a loaded 2-core machine.
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  test('failed pip install: one line pointing to the log, exit 1', async () => {
    // Prepare: a python3 whose venv's pip fails.
    const dir = stateDir();
    const python = writeScript(
      join(dir, 'python3'),
      `if [ "$1" = "--version" ]; then echo "Python 3.11.7"; exit 0; fi
mkdir -p "$3/bin"; printf '#!/bin/sh\\necho "ERROR: No matching distribution" >&2; exit 1\\n' > "$3/bin/python"; chmod +x "$3/bin/python"`,
    );

    const result = await leaseq(['local', 'up', '--port', String(await freePort())], {
      LEASEQ_STATE_DIR: join(dir, 'state'),
      LEASEQ_PYTHON: python,
    });

    expect(result.code).toBe(1);
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines.at(-1)).toBe(
      `leaseq: pip install ministack==1.5.33 exited with 1; see ${join(dir, 'state', 'emulator.log')}`,
    );
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('CLI: leaseq local up | status | down', () => {
  const install = fakeInstall('serve');
  afterEach(async () => {
    await stopEmulator({ stateDir: install.stateDir, env: {} });
    install.remove();
  });

  test('runs the whole lifecycle with --json and the documented exit codes', async () => {
    const env = { LEASEQ_STATE_DIR: install.stateDir };
    const port = await freePort();

    const up = await leaseq(['local', 'up', '--port', String(port), '--json'], env);
    expect(up.code).toBe(0);
    expect(JSON.parse(up.stdout)).toMatchObject({
      mode: 'embedded',
      started: true,
      port,
      services: 'queues-and-tables',
    });

    const again = await leaseq(['local', 'up'], env);
    expect(again.stdout).toMatch(
      new RegExp(
        `^ministack 1\\.5\\.33 already running at http://127\\.0\\.0\\.1:${port} \\(pid \\d+\\)\\nserves: queues and tables only \\(SQS, DynamoDB, STS\\); \`leaseq local up --all-services\` adds functions and stacks\\n$`,
      ),
    );

    const status = await leaseq(['local', 'status', '--json'], env);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ running: true, answering: true, port });

    const down = await leaseq(['local', 'down'], env);
    expect(down.code).toBe(0);
    expect(down.stdout).toMatch(new RegExp(`^emulator stopped \\(pid \\d+, port ${port}\\)\\n$`));

    const after = await leaseq(['local', 'status'], env);
    expect(after.code).toBe(3);
    expect(after.stdout).toContain('is not running');
  });
});
