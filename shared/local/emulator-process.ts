/**
 * The emulator process itself: spawning it detached in its own process group with its output in the
 * log, waiting for its first answer, and ending the group again (SIGTERM, then SIGKILL).
 */
import { spawn } from 'node:child_process';
import { closeSync, renameSync, statSync, writeSync } from 'node:fs';
import { defaultProjectDir, newLocalCredential, writeLocalCredential } from '../aws/local-credential.ts';
import { display, endpointFor, QUEUES_AND_TABLES, type ResolvedOptions } from './emulator-config.ts';
import { emulatorEnv } from './emulator-env.ts';
import { EmulatorError, EmulatorStartError } from './emulator-errors.ts';
import { writeGuardLauncher } from './emulator-guard.ts';
import { waitUntilAnswering } from './emulator-probe.ts';
import { EMULATORS, type EmulatorSpec } from './emulators.ts';
import { chooseFunctionNode } from './function-node.ts';
import { LOOPBACK_HOST } from './net.ts';
import { openPrivateLog } from './private-files.ts';
import { isProcessAlive, signalGroup, sleep } from './process.ts';
import type { EmulatorState } from './state.ts';
import { venvExecutable } from './venv.ts';

/** Above this size the log is moved to `emulator.log.1` when the emulator starts. */
const LOG_ROTATE_BYTES = 10 * 1024 * 1024;

function rotateLog(logFile: string): void {
  try {
    if (statSync(logFile).size > LOG_ROTATE_BYTES) renameSync(logFile, `${logFile}.1`);
  } catch {
    // No log yet.
  }
}

/**
 * The command that runs the emulator. MiniStack runs behind leaseq's loopback guard (its launcher,
 * run by the virtualenv's Python); moto, kept only to repeat the measurement, runs as it is.
 */
export function emulatorCommand(
  spec: EmulatorSpec,
  cfg: Pick<ResolvedOptions, 'venvDir' | 'stateDir' | 'port'>,
): { readonly command: string; readonly args: string[] } {
  if (spec.name === 'ministack') {
    return { command: venvExecutable(cfg.venvDir, 'python'), args: [writeGuardLauncher(cfg.stateDir)] };
  }
  return { command: venvExecutable(cfg.venvDir, spec.executable), args: spec.args(LOOPBACK_HOST, cfg.port) };
}

/** Starts the installed emulator and waits until it answers; kills it again when it does not. */
export async function startProcess(cfg: ResolvedOptions): Promise<EmulatorState> {
  const spec = EMULATORS[cfg.emulator];
  rotateLog(cfg.logFile);
  const logFd = openPrivateLog(cfg.logFile);
  writeSync(
    logFd,
    `[leaseq ${new Date().toISOString()}] starting ${spec.name} ${spec.version} on ${endpointFor(cfg.port)}\n`,
  );
  const startedAt = new Date();
  const t0 = performance.now();
  let exit: string | undefined;
  const { command, args } = emulatorCommand(spec, cfg);
  // A new credential for every start, before the process can answer anyone: the guard serves only
  // requests signed with it, and only the operator can read the file it is kept in.
  const credential = newLocalCredential();
  writeLocalCredential(cfg.stateDir, credential, cfg.port);
  // The Node the project's functions are built for, first on the emulator's PATH (function-node.ts).
  const node = chooseFunctionNode([process.cwd(), defaultProjectDir()]);
  const child = spawn(command, args, {
    cwd: cfg.stateDir,
    // Its own process group, so `down` can stop it with everything it spawned, and so it outlives
    // the `leaseq local up` that started it.
    detached: true,
    stdio: ['ignore', logFd, logFd],
    // An allow-list, never process.env: the functions it runs see its environment (emulator-env.ts).
    env: emulatorEnv(
      cfg.parentEnv,
      { ...spec.env(LOOPBACK_HOST, cfg.port), ...servicesFilter(spec, cfg) },
      credential,
      node.path,
    ),
  });
  closeSync(logFd);
  child.once('error', (error) => {
    exit = `could not be run (${error.message})`;
  });
  child.once('exit', (code, signal) => {
    exit = signal ? `was killed by ${signal}` : `exited with code ${code}`;
  });
  child.unref();

  const pid = child.pid;
  const answered = await waitUntilAnswering(
    endpointFor(cfg.port),
    Date.now() + cfg.startTimeoutMs,
    () => exit,
    credential,
  );
  if (answered !== 'ready' || pid === undefined) {
    if (pid !== undefined) signalGroup(pid, 'SIGKILL');
    const what =
      answered === 'timeout'
        ? `did not answer within ${Math.round(cfg.startTimeoutMs / 1000)} s`
        : (exit ?? 'did not start');
    throw new EmulatorStartError(`${spec.name} ${spec.version} ${what}`, display(cfg.logFile));
  }
  return {
    pid,
    port: cfg.port,
    host: LOOPBACK_HOST,
    emulator: spec.name,
    version: spec.version,
    startedAt: startedAt.toISOString(),
    startupMs: Math.round(performance.now() - t0),
    services: spec.name === 'ministack' ? cfg.services : 'all',
    node,
  };
}

/** MiniStack answers only the services in `SERVICES` (any other gets 400 "Unsupported service"). */
function servicesFilter(spec: EmulatorSpec, cfg: ResolvedOptions): Record<string, string> {
  if (spec.name !== 'ministack' || cfg.services === 'all') return {};
  return { SERVICES: QUEUES_AND_TABLES.join(',') };
}

/**
 * SIGTERM to the process group led by `pid`, SIGKILL after `graceMs`; resolves once the process is gone.
 * @throws EmulatorError when it outlives SIGKILL by 5 s
 */
export async function stopProcessGroup(pid: number, graceMs: number): Promise<{ readonly killed: boolean }> {
  signalGroup(pid, 'SIGTERM');
  if (await waitForExit(pid, graceMs)) return { killed: false };
  signalGroup(pid, 'SIGKILL');
  if (!(await waitForExit(pid, 5000))) {
    throw new EmulatorError(`could not stop the emulator (pid ${pid}); stop it by hand`);
  }
  return { killed: true };
}

async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isProcessAlive(pid)) {
    if (Date.now() >= deadline) return false;
    await sleep(50);
  }
  return true;
}
