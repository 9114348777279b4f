/**
 * The emulator manager: finds, starts, shares, reports and stops the AWS endpoint leaseq talks to
 * (the embedded emulator, or `AWS_ENDPOINT_URL`). Every change to the embedded one runs under the lock,
 * so two leaseq processes never start one each, and none stops one that another still holds.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type LocalCredential, readLocalCredential } from '../aws/local-credential.ts';
import {
  type EmulatorOptions,
  type EmulatorServices,
  endpointFor,
  lockTimeout,
  type ResolvedOptions,
  resolveOptions,
} from './emulator-config.ts';
import { EmulatorError, PortInUseError } from './emulator-errors.ts';
import { checkEndpoint } from './emulator-probe.ts';
import { startProcess, stopProcessGroup } from './emulator-process.ts';
import { liveHolders, liveRecordedState, recordedEmulator } from './emulator-record.ts';
import { EMULATORS } from './emulators.ts';
import { functionWorkers, removeWorkerFolders } from './function-workers.ts';
import { withFileLock } from './lock.ts';
import { isPortFree, probeHttp } from './net.ts';
import { processRssBytes, sleep } from './process.ts';
import { type EmulatorState, readEmulatorState, removeEmulatorState, writeEmulatorState } from './state.ts';
import { checkStateDir } from './state-dir.ts';
import { installEmulator } from './venv.ts';

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
  /** What the embedded emulator serves (`EmulatorOptions.services`). */
  readonly services?: EmulatorServices;
  /** True when this call restarted a running emulator to serve more (its state is gone). */
  readonly restarted?: boolean;
  /**
   * The credential the embedded emulator serves (`shared/aws/local-credential.ts`); absent for an
   * external endpoint, and for an emulator an older leaseq started, which takes any.
   */
  readonly credentials?: LocalCredential;
  /** The state directory of the embedded emulator (venv, record, log, credential, locks). */
  readonly stateDir?: string;
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
  readonly services?: EmulatorServices;
}

/** What `stopEmulator` did. */
export interface StopResult {
  readonly stopped: boolean;
  readonly pid?: number;
  readonly port?: number;
  /** True when the process ignored SIGTERM and was killed. */
  readonly killed?: boolean;
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
  checkStateDir(cfg.stateDir);
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
  checkStateDir(cfg.stateDir);
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

/**
 * Marks this process as using the embedded emulator until `release` (or until it exits: holders whose
 * process is gone are ignored), so a deploy that needs more services refuses to restart it under our
 * feet. Long-running commands (`leaseq start`, local workers) hold it; with `AWS_ENDPOINT_URL` it is a
 * no-op. It never stops the emulator.
 */
export async function holdEmulator(options: EmulatorOptions = {}): Promise<() => void> {
  const cfg = resolveOptions(options);
  if (cfg.externalEndpoint) return () => {};
  const holderFile = join(cfg.holdersDir, `${process.pid}-${randomUUID()}`);
  checkStateDir(cfg.stateDir);
  // Under the lock, so a restart that counted the holders cannot miss this one.
  await withFileLock(cfg.lockFile, lockTimeout(cfg), async () => {
    mkdirSync(cfg.holdersDir, { recursive: true, mode: 0o700 });
    writeFileSync(holderFile, String(process.pid));
  });
  return () => rmSync(holderFile, { force: true });
}

/**
 * Finds or starts the emulator; runs under the lock. `autoStop` marks an emulator started here for
 * test sessions; a person's `local up` (autoStop false) pins a running one so no session stops it.
 */
async function ensureLocked(cfg: ResolvedOptions, autoStop: boolean): Promise<EmulatorHandle> {
  const running = await recordedEmulator(cfg);
  if (running) {
    if (cfg.requestedPort !== undefined && cfg.requestedPort !== running.port) {
      throw new EmulatorError(
        `the emulator is already running on port ${running.port} (pid ${running.pid}); run \`leaseq local down\` first to move it to port ${cfg.requestedPort}`,
      );
    }
    if (cfg.services === 'all' && (running.services ?? 'all') !== 'all') {
      // MiniStack cannot turn a service on while it runs: restart it (on its own port), unless a leaseq
      // process holds it (a test session, `leaseq start`, local workers).
      const holders = liveHolders(cfg);
      if (holders > 0) {
        throw new EmulatorError(
          `the emulator on port ${running.port} serves queues and tables only, and ${holders} leaseq process${holders === 1 ? ' is' : 'es are'} using it; when they are done, run \`leaseq local down\`, then \`leaseq local up --all-services\``,
        );
      }
      cfg.log(
        `restarting the emulator on port ${running.port} with every service (functions, stacks, buckets); the queues and tables it held are gone`,
      );
      await stopLocked(cfg, running, 10_000);
      // A person's emulator stays theirs: the caller did not start it, so it must not stop it either.
      const pinned = running.autoStop !== true;
      const state = {
        ...(await startProcess({ ...cfg, port: running.port })),
        autoStop: autoStop && !pinned,
      };
      writeEmulatorState(cfg.stateFile, state);
      return { ...handleFor(cfg, state, !pinned, false), restarted: true };
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
  cfg: ResolvedOptions,
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
    services: state.services ?? 'all',
    stateDir: cfg.stateDir,
    ...credentialOf(cfg),
  };
}

function credentialOf(cfg: ResolvedOptions): { credentials?: LocalCredential } {
  const stored = readLocalCredential(cfg.stateDir);
  return stored
    ? { credentials: { accessKeyId: stored.accessKeyId, secretAccessKey: stored.secretAccessKey } }
    : {};
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
  checkStateDir(cfg.stateDir);
  return withFileLock(cfg.lockFile, lockTimeout(cfg), async () => {
    const state = liveRecordedState(cfg);
    if (!state) {
      removeEmulatorState(cfg.stateFile);
      return { stopped: false };
    }
    return stopLocked(cfg, state, options.graceMs ?? 10_000);
  });
}

/** Waits until nothing listens on `port`, at most `timeoutMs` (then a start reports the port as in use). */
async function portReleased(port: number, timeoutMs: number): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
    if (await isPortFree(port)) return;
    await sleep(50);
  }
}

/** Stops the recorded emulator and removes its record; runs under the lock. */
async function stopLocked(cfg: ResolvedOptions, state: EmulatorState, graceMs: number): Promise<StopResult> {
  // Its function processes die with its process group, but the folders they ran in stay behind.
  const workers = functionWorkers(state.port);
  const { killed } = await stopProcessGroup(state.pid, graceMs);
  // The recorded process is the guard; the server it started may hold the port a moment longer. A stop
  // returns once the port is free, so `down` then `up` on the same port does not meet PortInUseError.
  await portReleased(state.port, 5000);
  removeWorkerFolders(workers);
  removeEmulatorState(cfg.stateFile);
  // The credential dies with its emulator; the next start makes another.
  rmSync(cfg.credentialFile, { force: true });
  return { stopped: true, pid: state.pid, port: state.port, killed };
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
    services: state.services ?? 'all',
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

/** What another tool needs to call the running embedded emulator. */
export interface LocalEmulatorAccess {
  readonly endpoint: string;
  readonly credentials: LocalCredential;
}

/**
 * The endpoint and credential of the embedded emulator that runs now (whatever `AWS_ENDPOINT_URL`
 * says: this is about the one leaseq runs). Starts nothing.
 * @throws EmulatorError when none runs, or when it runs without a credential (an older leaseq started it)
 */
export function localEmulatorAccess(options: EmulatorOptions = {}): LocalEmulatorAccess {
  const cfg = resolveOptions({ ...options, env: { ...(options.env ?? process.env), AWS_ENDPOINT_URL: '' } });
  checkStateDir(cfg.stateDir);
  const state = liveRecordedState(cfg);
  if (!state) throw new EmulatorError('no emulator is running: start it with `leaseq local up`');
  const { credentials } = credentialOf(cfg);
  if (!credentials) {
    throw new EmulatorError(
      `the emulator on port ${state.port} was started without a credential (by an older leaseq); restart it: \`leaseq local down\`, then \`leaseq local up\``,
    );
  }
  return { endpoint: endpointFor(state.port), credentials };
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
