/**
 * The emulator manager's settings: options, environment (`LEASEQ_*`, `AWS_ENDPOINT_URL`) and defaults
 * resolved once into the paths and limits every other emulator module reads, so no two of them can
 * disagree on where the state file lives or which port is meant.
 */
import { join, relative } from 'node:path';
import { CREDENTIAL_FILE, defaultProjectDir } from '../aws/local-credential.ts';
import { EmulatorError } from './emulator-errors.ts';
import { DEFAULT_EMULATOR, EMULATOR_NAMES, type EmulatorName, isEmulatorName } from './emulators.ts';
import { LOOPBACK_HOST, parsePort } from './net.ts';

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
  /**
   * What the emulator serves when this call starts it, and at least what a running one must serve.
   * `queues-and-tables` (SQS, DynamoDB, STS) is all `local up`, local workers and provisioning need, and
   * leaves out the Lambda service that can run code; `all` is every service leaseq uses (the emulator's
   * own `SERVICES` in emulators.ts: functions, stacks and buckets too) for `local deploy` and the
   * deploy tests.
   * @default 'queues-and-tables'
   */
  readonly services?: EmulatorServices;
}

export type EmulatorServices = 'queues-and-tables' | 'all';

/** The services `queues-and-tables` turns on (MiniStack's `SERVICES` names); `all` sets no filter. */
export const QUEUES_AND_TABLES = ['sqs', 'dynamodb', 'sts'] as const;

export const DEFAULT_EMULATOR_PORT = 4566;

/** {@link EmulatorOptions} with every default applied (see `resolveOptions`). */
export interface ResolvedOptions {
  readonly stateDir: string;
  readonly venvDir: string;
  readonly stateFile: string;
  readonly logFile: string;
  readonly lockFile: string;
  /** The credential of the running emulator's start (`shared/aws/local-credential.ts`). */
  readonly credentialFile: string;
  readonly holdersDir: string;
  readonly requestedPort: number | undefined;
  readonly port: number;
  readonly emulator: EmulatorName;
  readonly python: string;
  readonly externalEndpoint: string | undefined;
  /** The environment the emulator's allow-listed variables come from (`EmulatorOptions.env`). */
  readonly parentEnv: NodeJS.ProcessEnv;
  readonly startTimeoutMs: number;
  readonly installTimeoutMs: number;
  readonly endpointTimeoutMs: number;
  readonly log: (line: string) => void;
  readonly services: EmulatorServices;
}

export function resolveOptions(options: EmulatorOptions): ResolvedOptions {
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
    credentialFile: join(stateDir, CREDENTIAL_FILE),
    holdersDir: join(stateDir, 'emulator-holders'),
    requestedPort,
    port: requestedPort ?? DEFAULT_EMULATOR_PORT,
    emulator,
    python: options.python ?? (env.LEASEQ_PYTHON?.trim() || 'python3'),
    externalEndpoint: env.AWS_ENDPOINT_URL?.trim() || undefined,
    parentEnv: env,
    startTimeoutMs: options.startTimeoutMs ?? 60_000,
    installTimeoutMs: options.installTimeoutMs ?? 900_000,
    endpointTimeoutMs: options.endpointTimeoutMs ?? 3000,
    log: options.log ?? (() => {}),
    services: options.services ?? 'queues-and-tables',
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

export function endpointFor(port: number): string {
  return `http://${LOOPBACK_HOST}:${port}`;
}

/** Shortens paths in messages to the form people type in the project directory. */
export function display(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') ? rel : path;
}

/** The lock may be held through a whole install plus a start, so waiting for it may take that long. */
export function lockTimeout(cfg: ResolvedOptions): number {
  return cfg.installTimeoutMs + cfg.startTimeoutMs;
}
