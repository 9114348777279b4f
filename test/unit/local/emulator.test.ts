import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import {
  acquireEmulator,
  emulatorStatus,
  ensureEmulator,
  resolveEndpoint,
  stopEmulator,
} from '../../../shared/local/emulator.ts';
import {
  EmulatorError,
  EmulatorStartError,
  EndpointUnreachableError,
  InvalidPortError,
  PortInUseError,
  PythonMissingError,
} from '../../../shared/local/emulator-errors.ts';
import { isPortFree } from '../../../shared/local/net.ts';
import { isProcessAlive, processCommandLine } from '../../../shared/local/process.ts';
import { readEmulatorState } from '../../../shared/local/state.ts';
import { close, type FakeMode, fakeInstall, freePort, listen, tempDir } from './fixtures.ts';

/** Every directory a test made, and every emulator it may have started there. */
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function fake(mode: FakeMode): string {
  const install = fakeInstall(mode);
  cleanups.push(install.remove);
  cleanups.push(async () => {
    await stopEmulator({ stateDir: install.stateDir, env: {}, graceMs: 500 });
  });
  return install.stateDir;
}

function emptyStateDir(): string {
  const temp = tempDir();
  cleanups.push(temp.remove);
  return temp.dir;
}

/** Processes whose command line mentions `text` (Linux); [] elsewhere. */
function processesMentioning(text: string): number[] {
  if (process.platform !== 'linux') return [];
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => processCommandLine(pid)?.includes(text) && isProcessAlive(pid));
}

describe('Function: ensureEmulator with AWS_ENDPOINT_URL', () => {
  test('starts nothing and returns the endpoint when it answers', async () => {
    // Prepare
    const server = createServer((_req, res) => res.writeHead(404).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const address = server.address();
    const endpoint = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    const stateDir = join(emptyStateDir(), 'never-created');

    // Act
    const handle = await ensureEmulator({ stateDir, env: { AWS_ENDPOINT_URL: endpoint } });

    // Assess
    expect(handle).toEqual({ mode: 'external', endpoint, started: false, installed: false });
    expect(existsSync(stateDir)).toBe(false);
  });

  test('reports a refused endpoint at once, in one line', async () => {
    const port = await freePort();
    const started = Date.now();

    const error = await ensureEmulator({ env: { AWS_ENDPOINT_URL: `http://127.0.0.1:${port}` } }).catch(
      (e) => e,
    );

    expect(error).toBeInstanceOf(EndpointUnreachableError);
    expect((error as Error).message).toBe(
      `AWS_ENDPOINT_URL http://127.0.0.1:${port} is not reachable (connection refused); start it (e.g. docker compose up -d) or unset AWS_ENDPOINT_URL to use the embedded emulator`,
    );
    expect(Date.now() - started).toBeLessThan(1500);
  });

  test('reports an endpoint that accepts connections but never answers within about 3 s, no hang', async () => {
    const blackhole: Server = createServer(() => {
      // Never respond.
    });
    await new Promise<void>((resolve) => blackhole.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      blackhole.closeAllConnections();
      return new Promise<void>((resolve) => blackhole.close(() => resolve()));
    });
    const address = blackhole.address();
    const endpoint = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    const started = Date.now();

    const error = await ensureEmulator({ env: { AWS_ENDPOINT_URL: endpoint } }).catch((e) => e);

    expect(error).toBeInstanceOf(EndpointUnreachableError);
    expect((error as Error).message).toContain('(no answer within 3.0 s)');
    expect(Date.now() - started).toBeLessThan(4500);
  });
});

describe('Function: ensureEmulator (embedded)', () => {
  test('refuses a port another program holds, before installing anything', async () => {
    // Prepare: a listener on the port, and a Python that does not exist (an install attempt would say so).
    const server = await listen(0);
    cleanups.push(() => close(server));
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;

    // Act
    const error = await ensureEmulator({
      stateDir: emptyStateDir(),
      port,
      python: '/nonexistent/python3',
      env: {},
    }).catch((e) => e);

    // Assess
    expect(error).toBeInstanceOf(PortInUseError);
    expect((error as Error).message).toBe(
      `port ${port} is in use by another program; stop it or set LEASEQ_EMULATOR_PORT`,
    );
  });

  test('reports a missing python3 when it has to install', async () => {
    const error = await ensureEmulator({
      stateDir: emptyStateDir(),
      port: await freePort(),
      python: '/nonexistent/python3',
      env: {},
    }).catch((e) => e);

    expect(error).toBeInstanceOf(PythonMissingError);
  });

  test('starts on 127.0.0.1, records it, reuses it, reports it and stops it', async () => {
    // Prepare
    const stateDir = fake('serve');
    const port = await freePort();

    // Act: start
    const first = await ensureEmulator({ stateDir, port, env: {} });

    // Assess
    expect(first).toMatchObject({
      mode: 'embedded',
      endpoint: `http://127.0.0.1:${port}`,
      started: true,
      installed: false,
      port,
      emulator: 'ministack',
      version: '1.5.33',
    });
    const state = readEmulatorState(join(stateDir, 'emulator.json'));
    expect(state).toMatchObject({ pid: first.pid, port, host: '127.0.0.1', emulator: 'ministack' });
    expect(isProcessAlive(first.pid ?? 0)).toBe(true);
    expect(await isPortFree(port)).toBe(false);

    // Act + Assess: reuse, with or without naming the same port
    expect(await ensureEmulator({ stateDir, port, env: {} })).toMatchObject({
      started: false,
      pid: first.pid,
    });
    expect(await ensureEmulator({ stateDir, env: {} })).toMatchObject({
      started: false,
      pid: first.pid,
      port,
    });

    // Act + Assess: another port while it runs is refused, not a second emulator
    await expect(ensureEmulator({ stateDir, port: port + 1, env: {} })).rejects.toThrow(
      `the emulator is already running on port ${port}`,
    );

    // Act + Assess: status and endpoint resolution
    const status = await emulatorStatus({ stateDir, env: {} });
    expect(status).toMatchObject({ mode: 'embedded', running: true, answering: true, pid: first.pid, port });
    if (process.platform === 'linux') expect(status.rssBytes).toBeGreaterThan(0);
    expect(resolveEndpoint({ stateDir, env: {} })).toBe(`http://127.0.0.1:${port}`);
    expect(resolveEndpoint({ stateDir, env: { AWS_ENDPOINT_URL: 'http://localhost:4566' } })).toBe(
      'http://localhost:4566',
    );

    // Act + Assess: stop
    expect(await stopEmulator({ stateDir, env: {} })).toEqual({
      stopped: true,
      pid: first.pid,
      port,
      killed: false,
    });
    expect(isProcessAlive(first.pid ?? 0)).toBe(false);
    expect(existsSync(join(stateDir, 'emulator.json'))).toBe(false);
    expect(await isPortFree(port)).toBe(true);
    expect(await stopEmulator({ stateDir, env: {} })).toEqual({ stopped: false });
    expect(await emulatorStatus({ stateDir, port, env: {} })).toMatchObject({
      running: false,
      answering: false,
    });
  });

  test('forgets a record whose process is gone and starts a fresh one', async () => {
    // Prepare: a record naming a pid that has exited.
    const stateDir = fake('serve');
    const port = await freePort();
    const first = await ensureEmulator({ stateDir, port, env: {} });
    const record = readFileSync(join(stateDir, 'emulator.json'), 'utf8');
    await stopEmulator({ stateDir, env: {} });
    writeFileSync(join(stateDir, 'emulator.json'), record);

    // Act
    const status = await emulatorStatus({ stateDir, env: {} });
    const second = await ensureEmulator({ stateDir, port, env: {} });

    // Assess
    expect(status.running).toBe(false);
    expect(second.started).toBe(true);
    expect(second.pid).not.toBe(first.pid);
  });

  test('an emulator that exits while starting is one line pointing to the log', async () => {
    const stateDir = fake('exit');

    const error = await ensureEmulator({ stateDir, port: await freePort(), env: {} }).catch((e) => e);

    expect(error).toBeInstanceOf(EmulatorStartError);
    expect((error as Error).message).toMatch(/^ministack 1\.5\.33 exited with code 3; see .*emulator\.log$/);
    expect(readFileSync(join(stateDir, 'emulator.log'), 'utf8')).toContain('fake emulator: cannot start');
    expect(existsSync(join(stateDir, 'emulator.json'))).toBe(false);
  });

  test('an emulator that never answers is killed after the start timeout and reported', async () => {
    const stateDir = fake('silent');
    const started = Date.now();

    const error = await ensureEmulator({
      stateDir,
      port: await freePort(),
      env: {},
      startTimeoutMs: 2000,
    }).catch((e) => e);

    expect(error).toBeInstanceOf(EmulatorStartError);
    expect((error as Error).message).toMatch(
      /^ministack 1\.5\.33 did not answer within 2 s; see .*emulator\.log$/,
    );
    expect(Date.now() - started).toBeLessThan(6000);
    await expect.poll(() => processesMentioning(stateDir), { timeout: 3000 }).toEqual([]);
  });

  test('stop escalates to SIGKILL when the emulator ignores SIGTERM', async () => {
    const stateDir = fake('ignore-term');
    const handle = await ensureEmulator({ stateDir, port: await freePort(), env: {} });

    const result = await stopEmulator({ stateDir, env: {}, graceMs: 300 });

    expect(result).toMatchObject({ stopped: true, killed: true });
    expect(isProcessAlive(handle.pid ?? 0)).toBe(false);
  });

  test('rejects bad LEASEQ_EMULATOR and LEASEQ_EMULATOR_PORT values with what was expected', async () => {
    await expect(
      ensureEmulator({ stateDir: emptyStateDir(), env: { LEASEQ_EMULATOR: 'localstack' } }),
    ).rejects.toThrow(
      new EmulatorError(
        'LEASEQ_EMULATOR="localstack" is not a known emulator; expected one of ministack, moto',
      ),
    );
    await expect(
      ensureEmulator({ stateDir: emptyStateDir(), env: { LEASEQ_EMULATOR_PORT: 'http' } }),
    ).rejects.toBeInstanceOf(InvalidPortError);
  });
});

describe('Function: acquireEmulator (test sessions sharing one emulator)', () => {
  test('the emulator a session started runs until the last session releases it', async () => {
    // Prepare
    const stateDir = fake('serve');
    const port = await freePort();

    // Act: two sessions, the first starts it
    const first = await acquireEmulator({ stateDir, port, env: {} });
    const second = await acquireEmulator({ stateDir, port, env: {} });

    // Assess
    expect(first.started).toBe(true);
    expect(second).toMatchObject({ started: false, pid: first.pid });
    await first.release();
    expect(isProcessAlive(first.pid ?? 0)).toBe(true);
    expect((await emulatorStatus({ stateDir, env: {} })).answering).toBe(true);
    await second.release();
    expect(isProcessAlive(first.pid ?? 0)).toBe(false);
    expect(existsSync(join(stateDir, 'emulator.json'))).toBe(false);
  });

  test('a session never stops an emulator started (or pinned) with `leaseq local up`', async () => {
    const stateDir = fake('serve');
    const port = await freePort();

    // Started by a session, then pinned by a person's `local up`.
    const session = await acquireEmulator({ stateDir, port, env: {} });
    await ensureEmulator({ stateDir, env: {} });
    await session.release();

    expect(isProcessAlive(session.pid ?? 0)).toBe(true);
    expect(readEmulatorState(join(stateDir, 'emulator.json'))?.autoStop).toBe(false);
  });

  test('holders that died without releasing do not keep it running', async () => {
    const stateDir = fake('serve');
    const session = await acquireEmulator({ stateDir, port: await freePort(), env: {} });
    const holders = join(stateDir, 'emulator-holders');
    mkdirSync(holders, { recursive: true });
    writeFileSync(join(holders, `${2 ** 22 + 7}-dead`), '');

    await session.release();
    await session.release();

    expect(isProcessAlive(session.pid ?? 0)).toBe(false);
    expect(readdirSync(holders)).toEqual([]);
  });

  test('with AWS_ENDPOINT_URL it holds nothing and releasing does nothing', async () => {
    const server = createServer((_req, res) => res.writeHead(404).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const address = server.address();
    const endpoint = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

    const lease = await acquireEmulator({ stateDir: emptyStateDir(), env: { AWS_ENDPOINT_URL: endpoint } });

    expect(lease).toMatchObject({ mode: 'external', endpoint, started: false });
    await expect(lease.release()).resolves.toBeUndefined();
  });
});
