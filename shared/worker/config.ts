import { z } from 'zod';
import { DEFAULTS } from '../core/contract/defaults.ts';
import { tableEnvVar } from '../core/model/table.ts';
import { ConfigError } from '../errors.ts';
import { WORKER_ENV } from '../resources.ts';

const positiveInt = (name: string, fallback: number) =>
  z.coerce
    .number({ error: `${name} must be a number` })
    .int(`${name} must be an integer`)
    .positive(`${name} must be > 0`)
    .default(fallback);

const flag = (name: string) =>
  z
    .enum(['1', 'true', '0', 'false', ''], { error: `${name} must be 1, true, 0 or false` })
    .optional()
    .transform((v) => v === '1' || v === 'true');

const schema = z.object({
  queueUrl: z.string({ error: `${WORKER_ENV.jobsQueueUrl} is required` }).min(1),
  dlqUrl: z.string({ error: `${WORKER_ENV.dlqUrl} is required` }).min(1),
  jobsTable: z.string({ error: `${WORKER_ENV.jobsTable} is required` }).min(1),
  leasesTable: z
    .string({ error: `${WORKER_ENV.leasesTable} is required` })
    .min(1, `${WORKER_ENV.leasesTable} is empty`),
  maxAttempts: positiveInt(WORKER_ENV.maxAttempts, DEFAULTS.maxAttempts),
  leaseMs: z.coerce
    .number({ error: `${WORKER_ENV.leaseMs} must be a number` })
    .int(`${WORKER_ENV.leaseMs} must be an integer`)
    // The processor's own minimum (DEFAULTS.minLeaseMs): checked here so a worker fails at start, not by
    // handing every record back.
    .refine((ms) => ms >= DEFAULTS.minLeaseMs, {
      error: (issue) =>
        `${WORKER_ENV.leaseMs} must be at least ${DEFAULTS.minLeaseMs} (ms), received ${String(issue.input)}`,
    })
    .default(DEFAULTS.leaseMs),
  concurrency: positiveInt(WORKER_ENV.concurrency, 10),
  backoffBaseSeconds: positiveInt(WORKER_ENV.backoffBaseSeconds, 2),
  backoffCapSeconds: positiveInt(WORKER_ENV.backoffCapSeconds, 900),
  deadlineMarginMs: positiveInt(WORKER_ENV.deadlineMarginMs, 3000),
  testHooks: flag(WORKER_ENV.testHooks),
  workerId: z
    .string()
    .min(1, `${WORKER_ENV.workerId} is empty`)
    .max(128, `${WORKER_ENV.workerId} is longer than 128 characters`)
    .optional(),
});

/** Settings of a worker, from the environment the stack (or a local worker process) sets. */
export type WorkerConfig = z.infer<typeof schema>;

/**
 * Reads and validates the worker's environment; the error names every missing or bad variable.
 * Every variable, its default and meaning: README "Worker settings".
 */
export function workerConfigFromEnv(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const parsed = schema.safeParse({
    queueUrl: env[WORKER_ENV.jobsQueueUrl],
    dlqUrl: env[WORKER_ENV.dlqUrl],
    jobsTable: env[WORKER_ENV.jobsTable],
    leasesTable: env[WORKER_ENV.leasesTable],
    maxAttempts: env[WORKER_ENV.maxAttempts],
    leaseMs: env[WORKER_ENV.leaseMs],
    concurrency: env[WORKER_ENV.concurrency],
    backoffBaseSeconds: env[WORKER_ENV.backoffBaseSeconds],
    backoffCapSeconds: env[WORKER_ENV.backoffCapSeconds],
    deadlineMarginMs: env[WORKER_ENV.deadlineMarginMs],
    testHooks: env[WORKER_ENV.testHooks],
    workerId: env[WORKER_ENV.workerId],
  });
  if (!parsed.success) {
    throw new ConfigError(
      `invalid worker configuration: ${parsed.error.issues.map((i) => i.message).join('; ')}`,
    );
  }
  return parsed.data;
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
  // Always explicit, so a LEASEQ_TEST_HOOKS exported in the shell never switches hooks on unasked.
  env[WORKER_ENV.testHooks] = config.testHooks ? '1' : '0';
  for (const [name, physical] of Object.entries(config.tables ?? {})) env[tableEnvVar(name)] = physical;
  return env;
}
