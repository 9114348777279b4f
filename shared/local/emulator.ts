import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { delimiter, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { ListQueuesCommand } from '@aws-sdk/client-sqs';
import { createAwsClients, destroyAwsClients } from '../aws/clients.ts';
import {
  EmulatorError,
  EmulatorStartError,
  EndpointUnreachableError,
  PortInUseError,
} from './emulator-errors.ts';
import {
  DEFAULT_EMULATOR,
  EMULATOR_NAMES,
  EMULATORS,
  type EmulatorName,
  isEmulatorName,
} from './emulators.ts';
import { withFileLock } from './lock.ts';
import { isPortFree, LOOPBACK_HOST, parsePort, probeHttp } from './net.ts';
import { isProcessAlive, processCommandLine, processRssBytes, signalGroup, sleep } from './process.ts';
import { type EmulatorState, readEmulatorState, removeEmulatorState, writeEmulatorState } from './state.ts';
import { installEmulator, venvExecutable } from './venv.ts';

/** Options of the emulator manager. Every default is applied in `resolveOptions`. */
export interface EmulatorOptions {
  /**
   * Project root; state lives in `<projectDir>/.leaseq`.
   * @default the leaseq checkout this module belongs to (independent of the working directory)
   */
  readonly projectDir?: string;
  /** Directory for the virtualenv, state file, log and lock. @default env `LEASEQ_STATE_DIR`, else `<projectDir>/.leaseq` */
  readonly stateDir?: string;
  /** Port on 127.0.0.1. @default env `LEASEQ_EMULATOR_PORT`, else 4566 */
  readonly port?: number;
  /** Which emulator to install and run. @default env `LEASEQ_EMULATOR`, else the measured choice */
  readonly emulator?: EmulatorName;
  /** Python used once to create the virtualenv. @default env `LEASEQ_PYTHON`, else `python3` */
  readonly python?: string;
  /** Environment to read `AWS_ENDPOINT_URL` and `LEASEQ_*` from. @default process.env */
  readonly env?: NodeJS.ProcessEnv;
  /** How long a starting emulator may take to answer. @default 60000 */
  readonly startTimeoutMs?: number;
  /** How long creating the virtualenv plus pip install may take. @default 900000 */
  readonly installTimeoutMs?: number;
  /** How long an `AWS_ENDPOINT_URL` endpoint may take to answer. @default 3000 */
  readonly endpointTimeoutMs?: number;
  /** Progress lines for people ("installing ..."). @default discard */
  readonly log?: (line: string) => void;
}

/** What `ensureEmulator` found or started. */
export interface EmulatorHandle {
  /** `embedded`: the emulator leaseq runs; `external`: `AWS_ENDPOINT_URL`, which leaseq never starts. */
  readonly mode: 'embedded' | 'external';
  readonly endpoint: string;
  /** True only when this call started the process (so the caller may stop it again). */
  readonly started: boolean;
  /** True when this call created the virtualenv / installed the emulator. */
  readonly installed: boolean;
  readonly pid?: number;
  readonly port?: number;
  readonly emulator?: string;
  readonly version?: string;
  /** Milliseconds from spawning the process to its first answer (recorded when it was started). */
  readonly startupMs?: number;
  readonly logFile?: string;
}

/** What `emulatorStatus` reports. Never throws for an emulator that is down. */
export interface EmulatorStatus {
  readonly mode: 'embedded' | 'external';
  readonly endpoint: string;
  readonly running: boolean;
  readonly answering: boolean;
  /** Why it is not answering, when it is not. */
  readonly reason?: string;
  readonly pid?: number;
  readonly port?: number;
  readonly emulator?: string;
  readonly version?: string;
  readonly startedAt?: string;
  readonly startupMs?: number;
  /** Resident memory of the emulator process (Linux only). */
  readonly rssBytes?: number;
  readonly logFile?: string;
}

/** What `stopEmulator` did. */
export interface StopResult {
  readonly stopped: boolean;
  readonly pid?: number;
  readonly port?: number;
  /** True when the process ignored SIGTERM and was killed. */
  readonly killed?: boolean;
}

export const DEFAULT_EMULATOR_PORT = 4566;

interface Resolved {
  readonly stateDir: string;
  readonly venvDir: string;
  readonly stateFile: string;
  readonly logFile: string;
  readonly lockFile: string;
  readonly holdersDir: string;
  readonly requestedPort: number | undefined;
  readonly port: number;
  readonly emulator: EmulatorName;
  readonly python: string;
  readonly externalEndpoint: string | undefined;
  readonly startTimeoutMs: number;
  readonly installTimeoutMs: number;
  readonly endpointTimeoutMs: number;
  readonly log: (line: string) => void;
}

/**
 * Where `.leaseq/` (venv, state file, log) lives: this checkout's root when run from the source tree; the
 * project you run leaseq in (nearest package.json at or above the working directory) when leaseq is an
 * installed package, so its state survives a reinstall and every command of the project finds it.
 */
function defaultProjectDir(): string {
  const own = fileURLToPath(new URL('../../', import.meta.url));
  if (!own.split(sep).includes('node_modules')) return own;
  for (let dir = resolve(process.cwd()); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && !dir.split(sep).includes('node_modules')) return dir;
    if (dirname(dir) === dir) return process.cwd();
  }
}

function resolveOptions(options: EmulatorOptions): Resolved {
  const env = options.env ?? process.env;
  const projectDir = options.projectDir ?? defaultProjectDir();
  const stateDir = options.stateDir ?? (env.LEASEQ_STATE_DIR?.trim() || join(projectDir, '.leaseq'));
  const emulator = options.emulator ?? emulatorFromEnv(env.LEASEQ_EMULATOR);
  const requestedPort = options.port ?? parsePort(env.LEASEQ_EMULATOR_PORT, 'LEASEQ_EMULATOR_PORT');
  return {
    stateDir,
    // The measured default lives in `.leaseq/venv`; any other emulator gets its own, so switching
    // back and forth never mixes their pinned dependencies.
    venvDir: join(stateDir, emulator === DEFAULT_EMULATOR ? 'venv' : `venv-${emulator}`),
    stateFile: join(stateDir, 'emulator.json'),
    logFile: join(stateDir, 'emulator.log'),
    lockFile: join(stateDir, 'emulator.lock'),
    holdersDir: join(stateDir, 'emulator-holders'),
    requestedPort,
    port: requestedPort ?? DEFAULT_EMULATOR_PORT,
    emulator,
    python: options.python ?? (env.LEASEQ_PYTHON?.trim() || 'python3'),
    externalEndpoint: env.AWS_ENDPOINT_URL?.trim() || undefined,
    startTimeoutMs: options.startTimeoutMs ?? 60_000,
    installTimeoutMs: options.installTimeoutMs ?? 900_000,
    endpointTimeoutMs: options.endpointTimeoutMs ?? 3000,
    log: options.log ?? (() => {}),
  };
}

function emulatorFromEnv(value: string | undefined): EmulatorName {
  const name = value?.trim();
  if (!name) return DEFAULT_EMULATOR;
  if (isEmulatorName(name)) return name;
  throw new EmulatorError(
    `LEASEQ_EMULATOR=${JSON.stringify(name)} is not a known emulator; expected one of ${EMULATOR_NAMES.join(', ')}`,
  );
}

function endpointFor(port: number): string {
  return `http://${LOOPBACK_HOST}:${port}`;
}

/** Shortens paths in messages to the form people type in the project directory. */
function display(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') ? rel : path;
}

/**
 * Makes sure an AWS endpoint is there and answers, and returns it. For people and scripts
 * (`leaseq local up`): an emulator it starts or finds keeps running until `stopEmulator`.
 *
 * With `AWS_ENDPOINT_URL` set it starts nothing: it checks that endpoint answers within
 * `endpointTimeoutMs` and returns it. Otherwise it reuses the emulator recorded in
 * `.leaseq/emulator.json` when that process is alive and answering, or installs (first use) and starts
 * the pinned emulator on 127.0.0.1, waits until it answers and records it.
 *
 * @throws EndpointUnreachableError, PortInUseError, PythonMissingError, EmulatorInstallError,
 *   EmulatorStartError, EmulatorBusyError, InvalidPortError (all `EmulatorError`)
 */
export async function ensureEmulator(options: EmulatorOptions = {}): Promise<EmulatorHandle> {
  const cfg = resolveOptions(options);
  if (cfg.externalEndpoint) {
    await checkEndpoint(cfg.externalEndpoint, cfg.endpointTimeoutMs);
    return { mode: 'external', endpoint: cfg.externalEndpoint, started: false, installed: false };
  }
  mkdirSync(cfg.stateDir, { recursive: true });
  return withFileLock(cfg.lockFile, lockTimeout(cfg), () => ensureLocked(cfg, false));
}

/** An emulator held by one test session; see `acquireEmulator`. */
export interface EmulatorLease extends EmulatorHandle {
  /**
   * Lets go of the emulator. The last holder to let go stops it, unless a person or script started
   * it (or pinned it with `leaseq local up`). Safe to call more than once.
   */
  release(): Promise<void>;
}

/**
 * Like `ensureEmulator`, for test sessions that share one emulator (several `vitest` runs in one
 * checkout): each holds a lease, and the emulator a session started is stopped when the last lease is
 * released, never under another session's feet. Holders that died without releasing are ignored.
 */
export async function acquireEmulator(options: EmulatorOptions = {}): Promise<EmulatorLease> {
  const cfg = resolveOptions(options);
  if (cfg.externalEndpoint) {
    await checkEndpoint(cfg.externalEndpoint, cfg.endpointTimeoutMs);
    const handle: EmulatorHandle = {
      mode: 'external',
      endpoint: cfg.externalEndpoint,
      started: false,
      installed: false,
    };
    return { ...handle, release: async () => {} };
  }
  mkdirSync(cfg.stateDir, { recursive: true });
  const holderFile = join(cfg.holdersDir, `${process.pid}-${randomUUID()}`);
  const handle = await withFileLock(cfg.lockFile, lockTimeout(cfg), async () => {
    const result = await ensureLocked(cfg, true);
    mkdirSync(cfg.holdersDir, { recursive: true });
    writeFileSync(holderFile, String(process.pid));
    return result;
  });
  let released = false;
  return {
    ...handle,
    release: async () => {
      if (released) return;
      released = true;
      await withFileLock(cfg.lockFile, lockTimeout(cfg), async () => {
        rmSync(holderFile, { force: true });
        if (liveHolders(cfg) > 0) return;
        const state = liveRecordedState(cfg);
        if (state?.autoStop) await stopLocked(cfg, state, 10_000);
      });
    },
  };
}

/** Counts holder files whose process is alive, removing the others. */
function liveHolders(cfg: Resolved): number {
  let entries: string[];
  try {
    entries = readdirSync(cfg.holdersDir);
  } catch {
    return 0;
  }
  let live = 0;
  for (const entry of entries) {
    const pid = Number(entry.split('-')[0]);
    if (Number.isInteger(pid) && pid > 0 && isProcessAlive(pid)) live += 1;
    else rmSync(join(cfg.holdersDir, entry), { force: true });
  }
  return live;
}

function lockTimeout(cfg: Resolved): number {
  return cfg.installTimeoutMs + cfg.startTimeoutMs;
}

/**
 * Finds or starts the emulator; runs under the lock. `autoStop` marks an emulator started here for
 * test sessions; a person's `local up` (autoStop false) pins a running one so no session stops it.
 */
async function ensureLocked(cfg: Resolved, autoStop: boolean): Promise<EmulatorHandle> {
  const running = await recordedEmulator(cfg);
  if (running) {
    if (cfg.requestedPort !== undefined && cfg.requestedPort !== running.port) {
      throw new EmulatorError(
        `the emulator is already running on port ${running.port} (pid ${running.pid}); run \`leaseq local down\` first to move it to port ${cfg.requestedPort}`,
      );
    }
    if (!autoStop && running.autoStop) writeEmulatorState(cfg.stateFile, { ...running, autoStop: false });
    return handleFor(cfg, running, false, false);
  }
  if (!(await isPortFree(cfg.port))) throw new PortInUseError(cfg.port);

  const spec = EMULATORS[cfg.emulator];
  const installed = await installEmulator(
    spec,
    { venvDir: cfg.venvDir, logFile: cfg.logFile },
    { python: cfg.python, timeoutMs: cfg.installTimeoutMs, log: cfg.log },
  );
  // An install can take minutes; the port may have been taken meanwhile.
  if (installed && !(await isPortFree(cfg.port))) throw new PortInUseError(cfg.port);

  cfg.log(`starting ${spec.name} ${spec.version} on ${endpointFor(cfg.port)}`);
  const state = { ...(await startProcess(cfg)), autoStop };
  writeEmulatorState(cfg.stateFile, state);
  return handleFor(cfg, state, true, installed);
}

function handleFor(
  cfg: Resolved,
  state: EmulatorState,
  started: boolean,
  installed: boolean,
): EmulatorHandle {
  return {
    mode: 'embedded',
    endpoint: endpointFor(state.port),
    started,
    installed,
    pid: state.pid,
    port: state.port,
    emulator: state.emulator,
    version: state.version,
    startupMs: state.startupMs,
    logFile: cfg.logFile,
  };
}

/**
 * The recorded emulator when its process is alive, after waiting for it to answer. A record whose
 * process is gone (or is now some other program) is removed.
 */
async function recordedEmulator(cfg: Resolved): Promise<EmulatorState | undefined> {
  const state = liveRecordedState(cfg);
  if (!state) return undefined;
  // Records are written only once the process answered (under the lock), so a live one that stays
  // silent for a few seconds is hung, not starting.
  const deadline = Date.now() + Math.min(cfg.startTimeoutMs, 5000);
  const answered = await waitUntilAnswering(endpointFor(state.port), deadline, () =>
    isProcessAlive(state.pid) ? undefined : 'exited',
  );
  if (answered === 'ready') return state;
  if (answered === 'exited') {
    removeEmulatorState(cfg.stateFile);
    return undefined;
  }
  throw new EmulatorStartError(
    `the emulator (pid ${state.pid}, port ${state.port}) is running but does not answer; run \`leaseq local down\` and try again`,
    display(cfg.logFile),
  );
}

/** Reads the state file and drops it when its process is gone or is not the emulator any more. */
function liveRecordedState(cfg: Resolved): EmulatorState | undefined {
  const state = readEmulatorState(cfg.stateFile);
  if (!state) return undefined;
  if (!isProcessAlive(state.pid) || !looksLikeEmulator(state)) {
    removeEmulatorState(cfg.stateFile);
    return undefined;
  }
  return state;
}

/** Guards against PID reuse: the recorded PID must still run the emulator's executable. */
function looksLikeEmulator(state: EmulatorState): boolean {
  const commandLine = processCommandLine(state.pid);
  if (commandLine === undefined) return true; // no /proc: trust the PID
  const spec = isEmulatorName(state.emulator) ? EMULATORS[state.emulator] : undefined;
  return spec ? commandLine.includes(spec.executable) : false;
}

/** Above this size the log is moved to `emulator.log.1` when the emulator starts. */
const LOG_ROTATE_BYTES = 10 * 1024 * 1024;

function rotateLog(logFile: string): void {
  try {
    if (statSync(logFile).size > LOG_ROTATE_BYTES) renameSync(logFile, `${logFile}.1`);
  } catch {
    // No log yet.
  }
}

async function startProcess(cfg: Resolved): Promise<EmulatorState> {
  const spec = EMULATORS[cfg.emulator];
  rotateLog(cfg.logFile);
  const logFd = openSync(cfg.logFile, 'a');
  writeSync(
    logFd,
    `[leaseq ${new Date().toISOString()}] starting ${spec.name} ${spec.version} on ${endpointFor(cfg.port)}\n`,
  );
  const startedAt = new Date();
  const t0 = performance.now();
  let exit: string | undefined;
  const child = spawn(venvExecutable(cfg.venvDir, spec.executable), spec.args(LOOPBACK_HOST, cfg.port), {
    cwd: cfg.stateDir,
    // Its own process group, so `down` can stop it with everything it spawned, and so it outlives
    // the `leaseq local up` that started it.
    detached: true,
    stdio: ['ignore', logFd, logFd],
    env: {
      ...process.env,
      ...spec.env(LOOPBACK_HOST, cfg.port),
      // The emulator runs deployed Node functions with the `node` on its PATH: make that the Node this
      // process runs on (Node 22 under npm scripts), not whatever the system PATH finds first.
      PATH: [dirname(process.execPath), process.env.PATH ?? ''].filter(Boolean).join(delimiter),
      PYTHONUNBUFFERED: '1',
    },
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
  };
}

/**
 * Polls the endpoint with the cheapest calls leaseq needs from both services until both answer,
 * `isGone()` reports the process gone, or the deadline passes.
 */
async function waitUntilAnswering(
  endpoint: string,
  deadline: number,
  isGone: () => string | undefined,
): Promise<'ready' | 'exited' | 'timeout'> {
  const clients = createAwsClients({
    endpoint,
    region: 'us-east-1',
    maxAttempts: 1,
    connectTimeoutMs: 1000,
    requestTimeoutMs: 5000,
  });
  try {
    for (;;) {
      if (isGone() !== undefined) return 'exited';
      try {
        await clients.ddb.send(new ListTablesCommand({ Limit: 1 }));
        await clients.sqs.send(new ListQueuesCommand({ MaxResults: 1 }));
        return 'ready';
      } catch {
        // Not up yet.
      }
      if (Date.now() >= deadline) return 'timeout';
      await sleep(100);
    }
  } finally {
    destroyAwsClients(clients);
  }
}

/**
 * Checks that an explicit endpoint answers HTTP within `timeoutMs`.
 * @throws EndpointUnreachableError
 */
export async function checkEndpoint(endpoint: string, timeoutMs = 3000): Promise<void> {
  const probe = await probeHttp(endpoint, timeoutMs);
  if (!probe.ok) throw new EndpointUnreachableError(endpoint, probe.reason);
}

/**
 * Stops the emulator recorded in `.leaseq/emulator.json` (SIGTERM to its process group, SIGKILL after
 * `graceMs`), waits until it is gone and removes the record. Stopping one that is not running is not
 * an error. It never touches `AWS_ENDPOINT_URL`.
 */
export async function stopEmulator(
  options: EmulatorOptions & { graceMs?: number } = {},
): Promise<StopResult> {
  const cfg = resolveOptions({ ...options, env: { ...(options.env ?? process.env), AWS_ENDPOINT_URL: '' } });
  mkdirSync(cfg.stateDir, { recursive: true });
  return withFileLock(cfg.lockFile, lockTimeout(cfg), async () => {
    const state = liveRecordedState(cfg);
    if (!state) {
      removeEmulatorState(cfg.stateFile);
      return { stopped: false };
    }
    return stopLocked(cfg, state, options.graceMs ?? 10_000);
  });
}

/** Stops the recorded emulator and removes its record; runs under the lock. */
async function stopLocked(cfg: Resolved, state: EmulatorState, graceMs: number): Promise<StopResult> {
  signalGroup(state.pid, 'SIGTERM');
  let killed = false;
  if (!(await waitForExit(state.pid, graceMs))) {
    signalGroup(state.pid, 'SIGKILL');
    killed = true;
    if (!(await waitForExit(state.pid, 5000))) {
      throw new EmulatorError(`could not stop the emulator (pid ${state.pid}); stop it by hand`);
    }
  }
  removeEmulatorState(cfg.stateFile);
  return { stopped: true, pid: state.pid, port: state.port, killed };
}

async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isProcessAlive(pid)) {
    if (Date.now() >= deadline) return false;
    await sleep(50);
  }
  return true;
}

/**
 * Reports where AWS calls go and whether that answers. Quick (one probe of a few seconds at most);
 * starts and installs nothing.
 */
export async function emulatorStatus(options: EmulatorOptions = {}): Promise<EmulatorStatus> {
  const cfg = resolveOptions(options);
  if (cfg.externalEndpoint) {
    const probe = await probeHttp(cfg.externalEndpoint, cfg.endpointTimeoutMs);
    return {
      mode: 'external',
      endpoint: cfg.externalEndpoint,
      running: probe.ok,
      answering: probe.ok,
      ...(probe.ok ? {} : { reason: probe.reason }),
    };
  }
  const state = liveRecordedState(cfg);
  if (!state) {
    return {
      mode: 'embedded',
      endpoint: endpointFor(cfg.port),
      running: false,
      answering: false,
      reason: 'not started',
      port: cfg.port,
      emulator: cfg.emulator,
      version: EMULATORS[cfg.emulator].version,
    };
  }
  const probe = await probeHttp(endpointFor(state.port), cfg.endpointTimeoutMs);
  const rssBytes = processRssBytes(state.pid);
  return {
    mode: 'embedded',
    endpoint: endpointFor(state.port),
    running: true,
    answering: probe.ok,
    ...(probe.ok ? {} : { reason: probe.reason }),
    pid: state.pid,
    port: state.port,
    emulator: state.emulator,
    version: state.version,
    startedAt: state.startedAt,
    startupMs: state.startupMs,
    ...(rssBytes === undefined ? {} : { rssBytes }),
    logFile: cfg.logFile,
  };
}

/**
 * The endpoint AWS clients should use, without starting anything: `AWS_ENDPOINT_URL` when set, else
 * the embedded emulator's (the recorded port, or the configured one). Composition roots pass it to
 * `awsConfigFromEnv(env, resolveEndpoint())`.
 */
export function resolveEndpoint(options: EmulatorOptions = {}): string {
  const cfg = resolveOptions(options);
  if (cfg.externalEndpoint) return cfg.externalEndpoint;
  return endpointFor(readEmulatorState(cfg.stateFile)?.port ?? cfg.port);
}

/** The last `lines` lines of the emulator log, for error reports. */
export function emulatorLogTail(options: EmulatorOptions = {}, lines = 20): string {
  const cfg = resolveOptions(options);
  try {
    return readFileSync(cfg.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}
