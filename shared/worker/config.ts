import { z } from 'zod';
import { WORKER_ENV } from '../resources.ts';

const positiveInt = (name: string, fallback: number) =>
  z.coerce
    .number({ error: `${name} must be a number` })
    .int(`${name} must be an integer`)
    .positive(`${name} must be > 0`)
    .default(fallback);

const schema = z.object({
  queueUrl: z.string({ error: `${WORKER_ENV.jobsQueueUrl} is required` }).min(1),
  dlqUrl: z.string({ error: `${WORKER_ENV.dlqUrl} is required` }).min(1),
  jobsTable: z.string({ error: `${WORKER_ENV.jobsTable} is required` }).min(1),
  leasesTable: z.string().min(1).optional(),
  ledgerTable: z.string({ error: `${WORKER_ENV.ledgerTable} is required` }).min(1),
  maxAttempts: positiveInt(WORKER_ENV.maxAttempts, 5),
  leaseMs: positiveInt('LEASEQ_LEASE_MS', 30_000),
  concurrency: positiveInt('LEASEQ_BATCH_CONCURRENCY', 10),
  backoffBaseSeconds: positiveInt('LEASEQ_BACKOFF_BASE_SECONDS', 2),
  backoffCapSeconds: positiveInt('LEASEQ_BACKOFF_CAP_SECONDS', 900),
  deadlineMarginMs: positiveInt('LEASEQ_DEADLINE_MARGIN_MS', 3000),
  workerId: z.string().min(1).max(128).optional(),
});

/** Settings of a worker, from the environment the stack (or a local worker process) sets. */
export type WorkerConfig = z.infer<typeof schema>;

/** Reads and validates the worker's environment; the error names every missing or bad variable. */
export function workerConfigFromEnv(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const parsed = schema.safeParse({
    queueUrl: env[WORKER_ENV.jobsQueueUrl],
    dlqUrl: env[WORKER_ENV.dlqUrl],
    jobsTable: env[WORKER_ENV.jobsTable],
    leasesTable: env[WORKER_ENV.leasesTable],
    ledgerTable: env[WORKER_ENV.ledgerTable],
    maxAttempts: env[WORKER_ENV.maxAttempts],
    leaseMs: env.LEASEQ_LEASE_MS,
    concurrency: env.LEASEQ_BATCH_CONCURRENCY,
    backoffBaseSeconds: env.LEASEQ_BACKOFF_BASE_SECONDS,
    backoffCapSeconds: env.LEASEQ_BACKOFF_CAP_SECONDS,
    deadlineMarginMs: env.LEASEQ_DEADLINE_MARGIN_MS,
    workerId: env.LEASEQ_WORKER_ID,
  });
  if (!parsed.success) {
    throw new Error(`invalid worker configuration: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  }
  return parsed.data;
}

/** The environment a local worker process needs (the same variables the stack sets on the Lambda). */
export function workerEnv(
  config: Partial<WorkerConfig> & Pick<WorkerConfig, 'queueUrl' | 'dlqUrl' | 'jobsTable' | 'ledgerTable'>,
): Record<string, string> {
  const env: Record<string, string> = {
    [WORKER_ENV.jobsQueueUrl]: config.queueUrl,
    [WORKER_ENV.dlqUrl]: config.dlqUrl,
    [WORKER_ENV.jobsTable]: config.jobsTable,
    [WORKER_ENV.ledgerTable]: config.ledgerTable,
  };
  if (config.leasesTable) env[WORKER_ENV.leasesTable] = config.leasesTable;
  if (config.maxAttempts) env[WORKER_ENV.maxAttempts] = String(config.maxAttempts);
  if (config.leaseMs) env.LEASEQ_LEASE_MS = String(config.leaseMs);
  if (config.concurrency) env.LEASEQ_BATCH_CONCURRENCY = String(config.concurrency);
  if (config.backoffBaseSeconds) env.LEASEQ_BACKOFF_BASE_SECONDS = String(config.backoffBaseSeconds);
  if (config.backoffCapSeconds) env.LEASEQ_BACKOFF_CAP_SECONDS = String(config.backoffCapSeconds);
  if (config.deadlineMarginMs) env.LEASEQ_DEADLINE_MARGIN_MS = String(config.deadlineMarginMs);
  if (config.workerId) env.LEASEQ_WORKER_ID = config.workerId;
  return env;
}
