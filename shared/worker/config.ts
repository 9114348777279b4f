import * as z from 'zod';
import { DEFAULTS } from '../core/contract/defaults.ts';
import { checkMaxBodyBytes, DEFAULT_MAX_BODY_BYTES } from '../core/contract/envelope.ts';
import { minInvocationTimeoutSeconds } from '../core/decisions/lease-timing.ts';
import { tableEnvVar } from '../core/model/table.ts';
import { type JobProcessorOptions, resolveSettings } from '../core/pipeline/settings.ts';
import { ConfigError } from '../errors.ts';
import { WORKER_ENV } from '../resources.ts';

const positiveInt = (name: string, fallback: number) =>
  z.coerce
    .number({ error: `${name} must be a number` })
    .int(`${name} must be an integer`)
    .positive(`${name} must be > 0`)
    .default(fallback);

/** An integer whose range the processor checks (its message names the minimum). */
const integer = (name: string, fallback: number) =>
  z.coerce
    .number({ error: `${name} must be a number` })
    .int(`${name} must be an integer`)
    .default(fallback);

const flag = (name: string) =>
  z
    .enum(['1', 'true', '0', 'false', ''], { error: `${name} must be 1, true, 0 or false` })
    .optional()
    .transform((v) => v === '1' || v === 'true');

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

/** The settings' schema, each setting named in errors by `label` (its variable unless told). */
const settingsSchema = (label: (key: SettingKey) => string) =>
  z.object({
    maxAttempts: positiveInt(label('maxAttempts'), DEFAULTS.maxAttempts),
    leaseMs: integer(label('leaseMs'), DEFAULTS.leaseMs),
    concurrency: positiveInt(label('concurrency'), DEFAULTS.batchConcurrency),
    backoffBaseSeconds: positiveInt(label('backoffBaseSeconds'), 2),
    backoffCapSeconds: positiveInt(label('backoffCapSeconds'), 900),
    deadlineMarginMs: positiveInt(label('deadlineMarginMs'), DEFAULTS.deadlineMarginMs),
    testHooks: flag(label('testHooks')),
    maxBodyBytes: z.coerce
      .number({ error: `${label('maxBodyBytes')} must be a number` })
      .default(DEFAULT_MAX_BODY_BYTES)
      .superRefine((value, ctx) => {
        try {
          checkMaxBodyBytes(value, label('maxBodyBytes'));
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: (error as Error).message });
        }
      }),
    workerId: z
      .string()
      .min(1, `${label('workerId')} is empty`)
      .max(128, `${label('workerId')} is longer than 128 characters`)
      .optional(),
  });

const namesSchema = z.object({
  queueUrl: z.string({ error: `${WORKER_ENV.jobsQueueUrl} is required` }).min(1),
  dlqUrl: z.string({ error: `${WORKER_ENV.dlqUrl} is required` }).min(1),
  jobsTable: z.string({ error: `${WORKER_ENV.jobsTable} is required` }).min(1),
  leasesTable: z
    .string({ error: `${WORKER_ENV.leasesTable} is required` })
    .min(1, `${WORKER_ENV.leasesTable} is empty`),
  /** The claim-check bucket (`largePayloads`): a job whose payload was put there is read from it. */
  payloadBucket: z.string().min(3, `${WORKER_ENV.payloadBucket} is not a bucket name`).optional(),
  /** Start of the keys a pointer may name (the producers' `largePayloads.keyPrefix`). */
  payloadPrefix: z.string().min(1, `${WORKER_ENV.payloadPrefix} is empty`).optional(),
  /** The largest claim-checked payload read. */
  payloadMaxBytes: z.coerce
    .number()
    .int(`${WORKER_ENV.payloadMaxBytes} is not a whole number`)
    .positive(`${WORKER_ENV.payloadMaxBytes} is not above 0`)
    .optional(),
});

/** A worker's tunable settings (everything but the resource names). */
export type WorkerSettings = z.infer<ReturnType<typeof settingsSchema>>;

/** Settings of a worker, from the environment the stack (or a local worker process) sets. */
export type WorkerConfig = z.infer<typeof namesSchema> & WorkerSettings;

/**
 * How a setting is named in an error. Its variable by default; `leaseq workers` names the flag that
 * set it instead.
 */
export type WorkerSettingLabels = { readonly [K in SettingKey]?: string };

function readSettings(env: NodeJS.ProcessEnv) {
  return {
    maxAttempts: env[WORKER_ENV.maxAttempts],
    leaseMs: env[WORKER_ENV.leaseMs],
    concurrency: env[WORKER_ENV.concurrency],
    backoffBaseSeconds: env[WORKER_ENV.backoffBaseSeconds],
    backoffCapSeconds: env[WORKER_ENV.backoffCapSeconds],
    deadlineMarginMs: env[WORKER_ENV.deadlineMarginMs],
    testHooks: env[WORKER_ENV.testHooks],
    workerId: env[WORKER_ENV.workerId],
    maxBodyBytes: env[WORKER_ENV.maxBodyBytes],
  };
}

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
  const parsed = settingsSchema(label).safeParse(readSettings(env));
  if (parsed.success) return { settings: parsed.data, problems: processorProblems(parsed.data, label) };
  // The processor's checks too, on the numbers that did parse, so one message names every problem.
  const failed = new Set(parsed.error.issues.map((i) => i.path[0]));
  const numbers = settingsSchema(label).partial().pick({ leaseMs: true, maxAttempts: true });
  const parsedNumbers = numbers.safeParse(readSettings(env));
  const checkable = parsedNumbers.success
    ? Object.fromEntries(Object.entries(parsedNumbers.data).filter(([key]) => !failed.has(key)))
    : {};
  return {
    problems: [...parsed.error.issues.map((i) => i.message), ...processorProblems(checkable, label)],
  };
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
  const names = namesSchema.safeParse({
    queueUrl: env[WORKER_ENV.jobsQueueUrl],
    dlqUrl: env[WORKER_ENV.dlqUrl],
    jobsTable: env[WORKER_ENV.jobsTable],
    leasesTable: env[WORKER_ENV.leasesTable],
    payloadBucket: env[WORKER_ENV.payloadBucket] || undefined,
    payloadPrefix: env[WORKER_ENV.payloadPrefix] || undefined,
    payloadMaxBytes: env[WORKER_ENV.payloadMaxBytes] || undefined,
  });
  const { settings, problems } = parseSettings(env, {});
  const all = [...(names.success ? [] : names.error.issues.map((i) => i.message)), ...problems];
  if (!names.success || !settings || all.length > 0) throw configError(all);
  return { ...names.data, ...settings };
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
