// `npm test`: every check the project has, in the shortest wall time this 2-core machine allows.
//
//   1. vitest: the unit, model and integration projects (they share the emulator the global setup starts).
//      Meanwhile the chaos harness's Toxiproxy is built with Go when it is not yet (first run only).
//   2. Then, side by side, the three runs that drive worker processes against the store: the chaos
//      harness's short standard run, its short FIFO run (on an emulator of its own, so each run's emulator
//      pauses freeze only its own store and its checker's fault windows stay true), and the benchmark's CI
//      variant. Each mostly waits (visibility timeouts, backoffs, leases running out): one after another
//      they took about 5.5 minutes, side by side about 2.5.
//
// Each part's output goes to .leaseq/test-logs/<part>.log and is printed whole when the part ends, so the
// logs do not interleave; a line every 20 s says what is still running. The exit status is the first
// failing part's (vitest's when it fails). LEASEQ_TEST_SERIAL=1 runs the parts one after another;
// `--no-vitest` runs only the second step.
import { type ChildProcess, spawn } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { toxiproxyInstall, toxiproxyPath } from '../chaos/toxiproxy.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const STATE = join(ROOT, '.leaseq');
const LOGS = join(STATE, 'test-logs');
const BIN = join(ROOT, 'bin', 'leaseq.mjs');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');
const VITEST = join(ROOT, 'node_modules', '.bin', 'vitest');
const started = Date.now();

function say(line: string): void {
  process.stderr.write(`[test +${Math.round((Date.now() - started) / 1000)}s] ${line}\n`);
}

interface Part {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  /**
   * A cleanup (stopping the second emulator): in a process group of its own and never signalled, so the
   * Ctrl-C that interrupted the run does not stop it half way.
   */
  readonly cleanup?: boolean;
}

interface Finished {
  readonly name: string;
  readonly code: number;
  readonly seconds: number;
}

/** Runs a command with its output in the terminal; resolves with its exit code. */
function runInherited(part: Part): Promise<Finished> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const child = spawn(part.command, part.args, {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, ...part.env },
    });
    track(child);
    child.once('error', (error) => {
      say(`${part.name}: ${error.message}`);
      resolve({ name: part.name, code: 1, seconds: (Date.now() - t0) / 1000 });
    });
    child.once('exit', (code, signal) =>
      resolve({ name: part.name, code: code ?? (signal ? 1 : 0), seconds: (Date.now() - t0) / 1000 }),
    );
  });
}

/** Runs a command with its output in a log file, printed whole when it ends. */
function runLogged(part: Part): Promise<Finished> {
  const t0 = Date.now();
  const log = join(LOGS, `${part.name}.log`);
  const fd = openSync(log, 'w');
  return new Promise((resolve) => {
    const child = spawn(part.command, part.args, {
      cwd: ROOT,
      stdio: ['ignore', fd, fd],
      env: { ...process.env, ...part.env },
      ...(part.cleanup ? { detached: true } : {}),
    });
    if (!part.cleanup) track(child);
    const done = (code: number) => {
      const seconds = (Date.now() - t0) / 1000;
      process.stdout.write(`\n===== ${part.name} (${seconds.toFixed(0)} s, exit ${code}) =====\n`);
      process.stdout.write(readFileSync(log, 'utf8'));
      resolve({ name: part.name, code, seconds });
    };
    child.once('error', (error) => {
      say(`${part.name}: ${error.message}`);
      done(1);
    });
    child.once('exit', (code, signal) => done(code ?? (signal ? 1 : 0)));
  });
}

const children = new Set<ChildProcess>();
function track(child: ChildProcess): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
}
// Interrupted (Ctrl-C, or a CI job cancelled): the running parts are stopped, no later part starts, and
// the second emulator is still stopped. The handler stays for a second signal, so the run is never cut
// short before that cleanup (it would leave the detached emulator running).
let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (!interrupted) say(`${signal}: stopping the running parts; no other part starts`);
    interrupted = true;
    for (const child of children) child.kill(signal);
    process.exitCode = 130;
  });
}

/** Builds Toxiproxy in the background when the chaos harness has none yet; never fails the run. */
function prepareToxiproxy(): Promise<void> {
  if (process.env.CHAOS_TOXIPROXY === '0' || existsSync(toxiproxyPath(STATE))) return Promise.resolve();
  say('building toxiproxy for the chaos runs in the background (first run only)');
  const install = toxiproxyInstall(STATE);
  const fd = openSync(join(LOGS, 'toxiproxy-build.log'), 'w');
  return new Promise((resolve) => {
    const child = spawn(install.command, install.args, {
      cwd: ROOT,
      stdio: ['ignore', fd, fd],
      env: install.env,
    });
    track(child);
    // A failed build is the chaos harness's to report: it tries again and falls back to SDK faults.
    child.once('error', () => resolve());
    child.once('exit', () => resolve());
  });
}

/** Whether `path` is a symbolic link (its target may be gone). */
function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/** A free loopback port below the ephemeral range (the second emulator's). */
async function freePort(): Promise<number> {
  for (let tries = 0; tries < 50; tries++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error('no free port for the second emulator');
}

async function main(): Promise<number> {
  mkdirSync(LOGS, { recursive: true });
  const serial = process.env.LEASEQ_TEST_SERIAL === '1';
  const toxiproxy = prepareToxiproxy();

  const vitest = process.argv.includes('--no-vitest')
    ? { name: 'vitest', code: 0, seconds: 0 }
    : await runInherited({ name: 'vitest', command: VITEST, args: ['run'] });
  say(`vitest exited ${vitest.code} after ${vitest.seconds.toFixed(0)} s`);
  await toxiproxy;
  if (interrupted) return 130;

  // Against a store of the user's (AWS_ENDPOINT_URL, e.g. LocalStack) both chaos runs share it;
  // otherwise the FIFO run gets an emulator of its own (its own state directory, the same installed
  // emulator), stopped at the end.
  let fifoStore: NodeJS.ProcessEnv | undefined;
  let secondStore: NodeJS.ProcessEnv | undefined;
  if (!process.env.AWS_ENDPOINT_URL && !serial) {
    const stateDir = join(STATE, 'fifo-store');
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    // Every installed emulator (`venv`, `venv-<name>` for LEASEQ_EMULATOR): installed once, run twice.
    // A link left dangling (the checkout was moved or copied) is made again.
    for (const venv of readdirSync(STATE).filter((name) => /^venv(-|$)/.test(name))) {
      const link = join(stateDir, venv);
      if (existsSync(link)) continue;
      if (isLink(link)) rmSync(link);
      symlinkSync(join(STATE, venv), link);
    }
    secondStore = { LEASEQ_STATE_DIR: stateDir, LEASEQ_EMULATOR_PORT: String(await freePort()) };
    const up = await runLogged({
      name: 'emulator-fifo',
      command: process.execPath,
      args: [BIN, 'local', 'up'],
      env: secondStore,
    });
    // Stopped at the end even when `up` failed or was interrupted: it may have started the emulator.
    if (up.code === 0) fifoStore = secondStore;
  }
  const noValidation = { CDK_VALIDATION: 'false' };
  const tail: Part[] = [
    { name: 'chaos', command: TSX, args: ['chaos/run.ts', '--ci', '--cleanup'], env: noValidation },
    {
      name: 'chaos-fifo',
      command: TSX,
      args: ['chaos/run.ts', '--ci', '--fifo', '--cleanup'],
      env: { ...noValidation, ...fifoStore },
    },
    { name: 'bench-ci', command: TSX, args: ['bench/compare/main.ts', '--ci'], env: noValidation },
  ];
  let results: Finished[] = [];
  try {
    if (interrupted) {
      // Nothing more starts; the second emulator is stopped below.
    } else if (serial) {
      for (const part of tail) if (!interrupted) results.push(await runLogged(part));
    } else {
      say(`running ${tail.map((p) => p.name).join(', ')} side by side (logs in ${LOGS})`);
      const running = new Set(tail.map((p) => p.name));
      const ticker = setInterval(() => say(`still running: ${[...running].join(', ')}`), 20_000);
      results = await Promise.all(
        tail.map((part) =>
          runLogged(part).then((r) => {
            running.delete(part.name);
            return r;
          }),
        ),
      );
      clearInterval(ticker);
    }
  } finally {
    if (secondStore) {
      await runLogged({
        name: 'emulator-fifo-down',
        command: process.execPath,
        args: [BIN, 'local', 'down'],
        env: secondStore,
        cleanup: true,
      });
    }
  }
  const all = [vitest, ...results];
  for (const r of all) say(`${r.name.padEnd(10)} exit ${r.code} in ${r.seconds.toFixed(0)} s`);
  say(`all parts done in ${Math.round((Date.now() - started) / 1000)} s`);
  if (interrupted) return 130;
  return all.find((r) => r.code !== 0)?.code ?? 0;
}

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
main().then(
  (code) => {
    process.exitCode ||= code;
  },
  (error: unknown) => {
    say(`failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  },
);
