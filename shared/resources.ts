/**
 * The one place where leaseq's AWS resource names and key attributes are decided.
 *
 * The CDK stack (infra/) builds its queues and tables from these values, local provisioning
 * (shared/local/provision.ts) creates what the synthesized stack template says, and the worker
 * and CLI read the same names from here or from the stack outputs. Change a name here, never in
 * a second list.
 */
import { ConfigError } from './errors.ts';

/** Key and TTL attribute names of the tables. */
export const KEY_ATTRIBUTES = {
  /** Partition key of the `jobs` table (one item per dedup key). */
  jobs: 'dedupKey',
  /** Partition key of the `leases` table (named locks such as `account#42`). */
  leases: 'leaseKey',
} as const;

/** TTL attribute of the `jobs` and `leases` tables (epoch seconds). TTL only tidies, it never decides. */
export const TTL_ATTRIBUTE = 'expiresAt';

/**
 * SQS receives allowed above the app's own `maxAttempts` before SQS redrives a message by itself.
 * leaseq dead-letters explicitly after `maxAttempts`; receives that are not attempts also count: our own
 * message returning while its lease is live, give-backs during a store outage (refunded, with a backoff
 * growing per receive: ten of them span over an hour at the default cap), and FIFO messages handed back
 * behind a failed group head. The redrive is only a safety net for what leaseq itself cannot handle.
 */
export const REDRIVE_MARGIN = 10;

/**
 * Refunded attempts a job item may have (DEFAULTS.maxRefunds), each a receive that is no attempt and may
 * come at any receive. On FIFO a limit's bounces spend REDRIVE_MARGIN - 1 receives before the head is
 * re-sent (limit-bounce.ts), so the FIFO count keeps this much room above the attempts besides.
 */
export const REFUND_RECEIVES = 3;

/**
 * The queue's redrive `maxReceiveCount`: a safety net above every receive leaseq itself may cause. On a
 * standard queue that is the attempts plus {@link REDRIVE_MARGIN}. When a batch's records cannot all start
 * at once, records are handed back unstarted, each a receive that is not an attempt: on FIFO every retry
 * of a group's head hands the rest of its batch back, and with `LEASEQ_BATCH_CONCURRENCY` below the batch
 * size the records left waiting when the deadline nears are handed back. A message can then be received
 * up to `batchSize` times per attempt, so the count is attempts x batch size + margin, or a never-attempted
 * message would reach the DLQ through SQS with no reason.
 */
export function redriveMaxReceiveCount(settings: {
  readonly maxAttempts: number;
  readonly batchSize: number;
  readonly fifo: boolean;
  /** Records of a batch run at once (`LEASEQ_BATCH_CONCURRENCY`). @default the batch size (all) */
  readonly batchConcurrency?: number;
}): number {
  const handedBack = handsBackUnstarted(settings)
    ? settings.maxAttempts * settings.batchSize
    : settings.maxAttempts;
  // A FIFO head's bounces take nearly all of the margin, its refunds then need room of their own (with a
  // batch of one there are no batch-mates' receives to take it from).
  return (
    (settings.fifo ? Math.max(handedBack, settings.maxAttempts + REFUND_RECEIVES) : handedBack) +
    REDRIVE_MARGIN
  );
}

/** Whether a batch may hand records back unstarted (see {@link redriveMaxReceiveCount}). */
export function handsBackUnstarted(settings: {
  readonly batchSize: number;
  readonly fifo: boolean;
  readonly batchConcurrency?: number;
}): boolean {
  return settings.fifo || (settings.batchConcurrency ?? settings.batchSize) < settings.batchSize;
}

/**
 * How long a dedup record (a `jobs` item) lives after its last write unless the store is told otherwise:
 * 15 days. It must be at least the DLQ's retention (14 days at most), so a redriven letter still finds its
 * item and checkpoint (docs/protocol.md); the CDK construct checks that at synth time.
 */
export const DEFAULT_DEDUP_TTL_SECONDS = 15 * 24 * 3600;

/** Timeout of the worker Lambda unless the stack says otherwise; local workers default to the same. */
export const DEFAULT_WORKER_TIMEOUT_SECONDS = 60;

/**
 * Logical names of leaseq's own stack outputs (CfnOutput ids); the CLI and tests look values up by these
 * keys. Each application table adds `<Name>TableName` (see `tableOutputKey`).
 */
export const STACK_OUTPUT_KEYS = [
  'JobsQueueUrl',
  'JobsQueueName',
  'DlqUrl',
  'DlqName',
  'JobsTableName',
  'LeasesTableName',
  'WorkerFunctionName',
] as const;

export type StackOutputKey = (typeof STACK_OUTPUT_KEYS)[number];

/**
 * Environment variables of the worker (the stack sets them on the Lambda; local workers set the same).
 * Application tables add one variable each, `LEASEQ_TABLE_<NAME>` (see `tableEnvVar`).
 */
export const WORKER_ENV = {
  jobsQueueUrl: 'LEASEQ_JOBS_QUEUE_URL',
  dlqUrl: 'LEASEQ_DLQ_URL',
  jobsTable: 'LEASEQ_JOBS_TABLE',
  leasesTable: 'LEASEQ_LEASES_TABLE',
  maxAttempts: 'LEASEQ_MAX_ATTEMPTS',
  leaseMs: 'LEASEQ_LEASE_MS',
  concurrency: 'LEASEQ_BATCH_CONCURRENCY',
  backoffBaseSeconds: 'LEASEQ_BACKOFF_BASE_SECONDS',
  backoffCapSeconds: 'LEASEQ_BACKOFF_CAP_SECONDS',
  deadlineMarginMs: 'LEASEQ_DEADLINE_MARGIN_MS',
  testHooks: 'LEASEQ_TEST_HOOKS',
  workerId: 'LEASEQ_WORKER_ID',
  maxBodyBytes: 'LEASEQ_MAX_BODY_BYTES',
  payloadBucket: 'LEASEQ_PAYLOAD_BUCKET',
  payloadPrefix: 'LEASEQ_PAYLOAD_PREFIX',
  payloadMaxBytes: 'LEASEQ_PAYLOAD_MAX_BYTES',
} as const;

/** Names of one copy of leaseq's resources. */
export interface ResourceNames {
  readonly prefix: string;
  readonly queues: {
    /** The jobs queue (`<prefix>-jobs`, `.fifo` appended for FIFO). */
    readonly jobs: string;
    /** Its dead-letter queue (`<prefix>-jobs-dlq`, `.fifo` appended for FIFO). */
    readonly dlq: string;
  };
  readonly tables: {
    readonly jobs: TableNames;
    readonly leases: TableNames;
  };
}

export interface TableNames {
  readonly name: string;
  readonly partitionKey: string;
  readonly ttlAttribute: string;
}

export interface ResourceNameOptions {
  /** FIFO queues get the `.fifo` suffix SQS requires. @default false */
  readonly fifo?: boolean;
}

const FIFO_SUFFIX = '.fifo';
const PREFIX_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;
// SQS queue names are at most 80 characters; the longest name is `<prefix>-jobs-dlq.fifo`.
const MAX_PREFIX_LENGTH = 80 - '-jobs-dlq'.length - FIFO_SUFFIX.length;

/** Error for a resource prefix that SQS or DynamoDB would refuse as part of a name. */
export class InvalidResourcePrefixError extends ConfigError {
  readonly prefix: string;

  constructor(prefix: string) {
    super(
      `Invalid resource prefix ${JSON.stringify(prefix)}: expected 1-${MAX_PREFIX_LENGTH} characters of ` +
        'letters, digits, "-" or "_", starting with a letter or digit (it prefixes SQS queue and DynamoDB table names)',
    );
    this.name = 'InvalidResourcePrefixError';
    this.prefix = prefix;
  }
}

/** Throws {@link InvalidResourcePrefixError} unless `prefix` is usable in every queue and table name. */
export function assertValidResourcePrefix(prefix: string): void {
  if (prefix.length > MAX_PREFIX_LENGTH || !PREFIX_PATTERN.test(prefix)) {
    throw new InvalidResourcePrefixError(prefix);
  }
}

/** The default prefix of a stage's resources. */
export function defaultResourcePrefix(stage: string): string {
  return `leaseq-${stage}`;
}

/**
 * Names of the queues and tables for `prefix`, with the tables' key and TTL attribute names.
 * @throws InvalidResourcePrefixError when the prefix cannot be part of an SQS or DynamoDB name.
 */
export function resourceNames(prefix: string, options: ResourceNameOptions = {}): ResourceNames {
  assertValidResourcePrefix(prefix);
  const suffix = options.fifo ? FIFO_SUFFIX : '';
  return {
    prefix,
    queues: {
      jobs: `${prefix}-jobs${suffix}`,
      dlq: `${prefix}-jobs-dlq${suffix}`,
    },
    tables: {
      jobs: { name: `${prefix}-jobs`, partitionKey: KEY_ATTRIBUTES.jobs, ttlAttribute: TTL_ATTRIBUTE },
      leases: { name: `${prefix}-leases`, partitionKey: KEY_ATTRIBUTES.leases, ttlAttribute: TTL_ATTRIBUTE },
    },
  };
}
