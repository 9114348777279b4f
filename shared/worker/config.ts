import { DEFAULTS } from '../core/contract/defaults.ts';
import { characterCount, checkMaxBodyBytes, DEFAULT_MAX_BODY_BYTES } from '../core/contract/envelope.ts';
import { minInvocationTimeoutSeconds } from '../core/decisions/lease-timing.ts';
import { tableEnvVar } from '../core/model/table.ts';
import { type JobProcessorOptions, resolveSettings } from '../core/pipeline/settings.ts';
import { ConfigError } from '../errors.ts';
import { WORKER_ENV } from '../resources.ts';

// Plain checks rather than a schema library: they run once per cold start, where building and running
// the schemas cost several ms (docs/performance.md, "Cold start"). Each check gives the value or its one
// problem; a variable that is unset (undefined) takes its default.

/** A value read from one variable: what it is, or why it is refused. */
type Read<T> = { readonly value: T; readonly problem?: undefined } | { readonly problem: string };

/** A number as the variable spells it (`Number()`): NaN and the infinities are no number. */
function readNumber(raw: string, notNumber: string): Read<number> {
  const value = Number(raw);
  return Number.isFinite(value) ? { value } : { problem: notNumber };
}

/** A whole number (a safe integer), above 0 when `positive`; the first check it fails names it. */
function readInteger(
  raw: string | undefined,
  fallback: number,
  name: string,
  positive: boolean,
): Read<number> {
  if (raw === undefined) return { value: fallback };
  const read = readNumber(raw, `${name} must be a number`);
  if (read.problem !== undefined) return read;
  if (!Number.isSafeInteger(read.value)) {
    // An integer beyond the safe range is also checked for its sign, as the schema this replaced did.
    const negative = positive && Number.isInteger(read.value) && read.value < 0;
    return { problem: `${name} must be an integer${negative ? `; ${name} must be > 0` : ''}` };
  }
  if (positive && !(read.value > 0)) return { problem: `${name} must be > 0` };
  return read;
}

const FLAG_VALUES: readonly (string | undefined)[] = ['1', 'true', '0', 'false', '', undefined];

/** The settings a deployment tunes (everything but the resource names). */
type SettingKey =
  | 'maxAttempts'
  | 'leaseMs'
  | 'concurrency'
  | 'backoffBaseSeconds'
  | 'backoffCapSeconds'
  | 'deadlineMarginMs'
  | 'testHooks'
  | 'workerId'
  | 'maxBodyBytes';

/** A worker's tunable settings (everything but the resource names). */
export interface WorkerSettings {
  maxAttempts: number;
  leaseMs: number;
  concurrency: number;
  backoffBaseSeconds: number;
  backoffCapSeconds: number;
  deadlineMarginMs: number;
  testHooks: boolean;
  maxBodyBytes: number;
  workerId?: string | undefined;
}

/** The resources a worker uses, by name. */
interface WorkerNames {
  queueUrl: string;
  dlqUrl: string;
  jobsTable: string;
  leasesTable: string;
  /** The claim-check bucket (`largePayloads`): a job whose payload was put there is read from it. */
  payloadBucket?: string | undefined;
  /** Start of the keys a pointer may name (the producers' `largePayloads.keyPrefix`). */
  payloadPrefix?: string | undefined;
  /** The largest claim-checked payload read. */
  payloadMaxBytes?: number | undefined;
}

/** Settings of a worker, from the environment the stack (or a local worker process) sets. */
export type WorkerConfig = WorkerNames & WorkerSettings;

/** Each setting read from `env`, in the order problems are named, each named in errors by `label`. */
function readSettingValues(
  env: NodeJS.ProcessEnv,
  label: (key: SettingKey) => string,
): { readonly [K in keyof WorkerSettings]-?: Read<WorkerSettings[K]> } {
  const maxBodyBytes = (): Read<number> => {
    const raw = env[WORKER_ENV.maxBodyBytes];
    const read =
      raw === undefined
        ? { value: DEFAULT_MAX_BODY_BYTES }
        : readNumber(raw, `${label('maxBodyBytes')} must be a number`);
    if (read.problem !== undefined) return read;
    try {
      checkMaxBodyBytes(read.value, label('maxBodyBytes'));
      return read;
    } catch (error) {
      return { problem: (error as Error).message };
    }
  };
  const testHooks = env[WORKER_ENV.testHooks];
  const workerId = env[WORKER_ENV.workerId];
  return {
    maxAttempts: readInteger(env[WORKER_ENV.maxAttempts], DEFAULTS.maxAttempts, label('maxAttempts'), true),
    leaseMs: readInteger(env[WORKER_ENV.leaseMs], DEFAULTS.leaseMs, label('leaseMs'), false),
    concurrency: readInteger(
      env[WORKER_ENV.concurrency],
      DEFAULTS.batchConcurrency,
      label('concurrency'),
      true,
    ),
    backoffBaseSeconds: readInteger(env[WORKER_ENV.backoffBaseSeconds], 2, label('backoffBaseSeconds'), true),
    backoffCapSeconds: readInteger(env[WORKER_ENV.backoffCapSeconds], 900, label('backoffCapSeconds'), true),
    deadlineMarginMs: readInteger(
      env[WORKER_ENV.deadlineMarginMs],
      DEFAULTS.deadlineMarginMs,
      label('deadlineMarginMs'),
      true,
    ),
    testHooks: FLAG_VALUES.includes(testHooks)
      ? { value: testHooks === '1' || testHooks === 'true' }
      : { problem: `${label('testHooks')} must be 1, true, 0 or false` },
    maxBodyBytes: maxBodyBytes(),
    workerId:
      workerId === undefined
        ? { value: undefined }
        : workerId.length < 1
          ? { problem: `${label('workerId')} is empty` }
          : characterCount(workerId) > 128
            ? { problem: `${label('workerId')} is longer than 128 characters` }
            : { value: workerId },
  };
}

/**
 * How a setting is named in an error. Its variable by default; `leaseq workers` names the flag that
 * set it instead.
 */
export type WorkerSettingLabels = { readonly [K in SettingKey]?: string };

/**
 * The processor's own range checks (resolveSettings, which a Lambda and a local worker both run when
 * they build the handler), applied here so a value it refuses stops the worker at start with the
 * variable (or flag) named, and `leaseq workers` accepts exactly what a Lambda accepts. Called, not
 * copied: a range changed there changes here.
 */
function processorProblems(
  values: { readonly leaseMs?: number; readonly maxAttempts?: number },
  label: (key: 'leaseMs' | 'maxAttempts') => string,
): string[] {
  const problems: string[] = [];
  for (const key of ['leaseMs', 'maxAttempts'] as const) {
    if (values[key] === undefined) continue;
    try {
      // Only the numbers are read; the collaborators are not touched while settings resolve.
      resolveSettings({ ...UNUSED_COLLABORATORS, [key]: values[key] });
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      // The processor names the setting by its option (`leaseMs must be ...`): named here as the operator
      // wrote it (the variable, or the flag).
      problems.push(
        error.message.startsWith(`${key} `)
          ? `${label(key)}${error.message.slice(key.length)}`
          : `${label(key)}: ${error.message}`,
      );
    }
  }
  return problems;
}

const UNUSED_COLLABORATORS = {
  store: undefined,
  queue: undefined,
  registry: undefined,
  worker: '',
  logger: undefined,
} as unknown as JobProcessorOptions;

function parseSettings(
  env: NodeJS.ProcessEnv,
  labels: WorkerSettingLabels,
): { readonly settings?: WorkerSettings; readonly problems: string[] } {
  const label = (key: SettingKey) => labels[key] ?? WORKER_ENV[key];
  const reads = readSettingValues(env, label);
  const problems: string[] = [];
  const settings: Record<string, unknown> = {};
  for (const [key, read] of Object.entries(reads)) {
    if (read.problem !== undefined) problems.push(read.problem);
    else settings[key] = read.value;
  }
  if (problems.length === 0) {
    const parsed = settings as unknown as WorkerSettings;
    return { settings: parsed, problems: processorProblems(parsed, label) };
  }
  // The processor's checks too, on the numbers that did parse, so one message names every problem
  // (only when both parsed: one refused already names the setting to fix first).
  const { leaseMs, maxAttempts } = reads;
  const checkable =
    leaseMs.problem === undefined && maxAttempts.problem === undefined
      ? { leaseMs: leaseMs.value, maxAttempts: maxAttempts.value }
      : {};
  return { problems: [...problems, ...processorProblems(checkable, label)] };
}

function configError(problems: readonly string[]): ConfigError {
  return new ConfigError(`invalid worker configuration: ${problems.join('; ')}`);
}

/**
 * Reads and validates the worker's tunable settings (not the resource names): what `leaseq workers`
 * checks, with its flags' values put in place of the variables, before it starts any worker.
 * @throws ConfigError naming every bad setting, by `labels` where given.
 */
export function workerSettingsFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  labels: WorkerSettingLabels = {},
): WorkerSettings {
  const { settings, problems } = parseSettings(env, labels);
  if (!settings || problems.length > 0) throw configError(problems);
  return settings;
}

/**
 * Checks an invocation timeout against the deadline margin of `settings` (`leaseq workers --timeout`;
 * the CDK construct checks its worker timeout the same way): under the minimum no job ever starts.
 * @throws ConfigError naming the smallest timeout that works and why.
 */
export function checkInvocationTimeout(
  timeoutSeconds: number,
  settings: Pick<WorkerSettings, 'deadlineMarginMs'>,
  label = 'timeout',
): void {
  const min = minInvocationTimeoutSeconds(settings.deadlineMarginMs);
  if (timeoutSeconds >= min) return;
  throw configError([
    `${label} is ${timeoutSeconds} s; required at least ${min} s: every lease ends ` +
      `${WORKER_ENV.deadlineMarginMs} (${settings.deadlineMarginMs} ms) before the invocation's deadline and ` +
      `no job starts under a lease below ${DEFAULTS.minLeaseMs} ms, so every record would be handed back ` +
      `unrun (use ${label} ${min} or more, plus the longest job's run time)`,
  ]);
}

/**
 * Reads and validates the worker's environment; the error names every missing or bad variable.
 * Every variable, its default and meaning: README "Worker settings".
 */
export function workerConfigFromEnv(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const problems: string[] = [];
  const name = (variable: string, emptyProblem = `${variable} is required`): string => {
    const value = env[variable];
    if (value === undefined || value.length < 1) {
      problems.push(value === undefined ? `${variable} is required` : emptyProblem);
      return '';
    }
    return value;
  };
  const queueUrl = name(WORKER_ENV.jobsQueueUrl);
  const dlqUrl = name(WORKER_ENV.dlqUrl);
  const jobsTable = name(WORKER_ENV.jobsTable);
  const leasesTable = name(WORKER_ENV.leasesTable, `${WORKER_ENV.leasesTable} is empty`);
  // Set but empty is unset for these three.
  const payloadBucket = env[WORKER_ENV.payloadBucket] || undefined;
  if (payloadBucket !== undefined && characterCount(payloadBucket) < 3) {
    problems.push(`${WORKER_ENV.payloadBucket} is not a bucket name`);
  }
  const payloadPrefix = env[WORKER_ENV.payloadPrefix] || undefined;
  const rawMaxBytes = env[WORKER_ENV.payloadMaxBytes] || undefined;
  let payloadMaxBytes: number | undefined;
  if (rawMaxBytes !== undefined) {
    const value = Number(rawMaxBytes);
    if (!Number.isFinite(value)) problems.push(`Invalid input: expected number, received ${value}`);
    else if (!Number.isSafeInteger(value)) {
      problems.push(`${WORKER_ENV.payloadMaxBytes} is not a whole number`);
      if (Number.isInteger(value) && value < 0) problems.push(`${WORKER_ENV.payloadMaxBytes} is not above 0`);
    } else if (!(value > 0)) problems.push(`${WORKER_ENV.payloadMaxBytes} is not above 0`);
    else payloadMaxBytes = value;
  }
  const { settings, problems: settingProblems } = parseSettings(env, {});
  const all = [...problems, ...settingProblems];
  if (!settings || all.length > 0) throw configError(all);
  return {
    queueUrl,
    dlqUrl,
    jobsTable,
    leasesTable,
    payloadBucket,
    payloadPrefix,
    payloadMaxBytes,
    ...settings,
  };
}

/** What {@link workerEnv} turns into environment variables. */
export type WorkerEnvInput = Partial<WorkerConfig> &
  Pick<WorkerConfig, 'queueUrl' | 'dlqUrl' | 'jobsTable' | 'leasesTable'> & {
    /** Physical names of the application tables, by logical table name. @default {} */
    readonly tables?: Readonly<Record<string, string>>;
  };

/** The environment a local worker process needs (the same variables the stack sets on the Lambda). */
export function workerEnv(config: WorkerEnvInput): Record<string, string> {
  const env: Record<string, string> = {
    [WORKER_ENV.jobsQueueUrl]: config.queueUrl,
    [WORKER_ENV.dlqUrl]: config.dlqUrl,
    [WORKER_ENV.jobsTable]: config.jobsTable,
  };
  const set = (name: string, value: string | number | undefined) => {
    if (value !== undefined && value !== '') env[name] = String(value);
  };
  env[WORKER_ENV.leasesTable] = config.leasesTable;
  set(WORKER_ENV.maxAttempts, config.maxAttempts);
  set(WORKER_ENV.leaseMs, config.leaseMs);
  set(WORKER_ENV.concurrency, config.concurrency);
  set(WORKER_ENV.backoffBaseSeconds, config.backoffBaseSeconds);
  set(WORKER_ENV.backoffCapSeconds, config.backoffCapSeconds);
  set(WORKER_ENV.deadlineMarginMs, config.deadlineMarginMs);
  set(WORKER_ENV.workerId, config.workerId);
  set(WORKER_ENV.maxBodyBytes, config.maxBodyBytes);
  set(WORKER_ENV.payloadBucket, config.payloadBucket);
  set(WORKER_ENV.payloadPrefix, config.payloadPrefix);
  set(WORKER_ENV.payloadMaxBytes, config.payloadMaxBytes);
  // Always explicit, so a LEASEQ_TEST_HOOKS exported in the shell never switches hooks on unasked.
  env[WORKER_ENV.testHooks] = config.testHooks ? '1' : '0';
  for (const [name, physical] of Object.entries(config.tables ?? {})) env[tableEnvVar(name)] = physical;
  return env;
}
