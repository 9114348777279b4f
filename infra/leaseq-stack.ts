import { CfnOutput, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import {
  assertValidResourcePrefix,
  defaultResourcePrefix,
  REDRIVE_MARGIN,
  resourceNames,
  type StackOutputKey,
} from '../shared/resources.ts';
import { JobQueue } from './constructs/job-queue.ts';
import { StateTables } from './constructs/state-tables.ts';
import { WorkerFunction } from './constructs/worker-function.ts';

/** Well-known stages; any other lower-case name is a non-production stage. */
export type LeaseqStage = 'dev' | 'prod' | (string & {});

/** Properties of {@link LeaseqStack}. */
export interface LeaseqStackProps extends StackProps {
  /**
   * Deployment stage. `prod` retains tables, queues and logs on stack deletion and turns on table
   * deletion protection; every other stage destroys them.
   * @default 'dev'
   */
  readonly stage?: LeaseqStage;
  /**
   * Prefix of every physical queue and table name (`<prefix>-jobs`, `<prefix>-leases`, ...).
   * @default `leaseq-${stage}`
   */
  readonly resourcePrefix?: string;
  /**
   * The application's own attempt limit: after this many attempts a job is dead-lettered by the worker.
   * The queue's redrive `maxReceiveCount` is set above it (`maxAttempts + REDRIVE_MARGIN`) as a safety net.
   * @default 5
   */
  readonly maxAttempts?: number;
  /**
   * Timeout of the worker Lambda (1 s - 15 min). The queue's visibility timeout is 6x this.
   * @default Duration.seconds(60)
   */
  readonly workerTimeout?: Duration;
  /** Records per worker invocation (1-10). @default 10 */
  readonly batchSize?: number;
  /** Most concurrent worker invocations the SQS event source starts (2-1000). @default 5 */
  readonly maxConcurrency?: number;
  /** FIFO jobs queue and DLQ (names end in `.fifo`). @default false */
  readonly fifo?: boolean;
}

/** {@link LeaseqStackProps} with every default applied. */
export interface ResolvedLeaseqStackProps {
  readonly stage: string;
  readonly resourcePrefix: string;
  readonly maxAttempts: number;
  readonly workerTimeout: Duration;
  readonly batchSize: number;
  readonly maxConcurrency: number;
  readonly fifo: boolean;
}

/** Error for a stack property outside its allowed range; the message shows received and expected. */
export class InvalidLeaseqStackPropsError extends Error {
  override readonly name = 'InvalidLeaseqStackPropsError';
  readonly prop: string;

  constructor(prop: string, received: unknown, expected: string, options?: ErrorOptions) {
    super(`LeaseqStack prop ${prop} is ${JSON.stringify(received)}; expected ${expected}`, options);
    this.prop = prop;
  }
}

/** Applies the documented defaults in one place and validates the result. */
export function resolveLeaseqStackProps(props: LeaseqStackProps = {}): ResolvedLeaseqStackProps {
  const stage = props.stage ?? 'dev';
  if (!/^[a-z][a-z0-9-]{0,19}$/.test(stage)) {
    throw new InvalidLeaseqStackPropsError(
      'stage',
      stage,
      'a lower-case name like "dev" or "prod" (a-z, 0-9, -)',
    );
  }
  const resourcePrefix = props.resourcePrefix ?? defaultResourcePrefix(stage);
  try {
    assertValidResourcePrefix(resourcePrefix);
  } catch (error) {
    throw new InvalidLeaseqStackPropsError(
      'resourcePrefix',
      resourcePrefix,
      'letters, digits, "-" or "_", starting with a letter or digit, short enough for SQS names',
      { cause: error },
    );
  }
  const resolved: ResolvedLeaseqStackProps = {
    stage,
    resourcePrefix,
    maxAttempts: props.maxAttempts ?? 5,
    workerTimeout: props.workerTimeout ?? Duration.seconds(60),
    batchSize: props.batchSize ?? 10,
    maxConcurrency: props.maxConcurrency ?? 5,
    fifo: props.fifo ?? false,
  };
  assertInteger('maxAttempts', resolved.maxAttempts, 1, 1000 - REDRIVE_MARGIN);
  // A batch is handled within one invocation; more than 10 records would need a batching window.
  assertInteger('batchSize', resolved.batchSize, 1, 10);
  assertInteger('maxConcurrency', resolved.maxConcurrency, 2, 1000);
  const timeoutSeconds = resolved.workerTimeout.toSeconds({ integral: false });
  if (!Number.isInteger(timeoutSeconds) || timeoutSeconds < 1 || timeoutSeconds > 900) {
    throw new InvalidLeaseqStackPropsError(
      'workerTimeout',
      `${timeoutSeconds} s`,
      'whole seconds from 1 s to 900 s (the Lambda limit)',
    );
  }
  return resolved;
}

function assertInteger(prop: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new InvalidLeaseqStackPropsError(prop, value, `an integer from ${min} to ${max}`);
  }
}

/**
 * leaseq in AWS: the jobs queue with its DLQ, the state tables and the worker Lambda wired to the queue.
 * Physical queue and table names come from `resourceNames(resourcePrefix)` so the CLI, local
 * provisioning and the worker agree on them.
 */
export class LeaseqStack extends Stack {
  readonly settings: ResolvedLeaseqStackProps;
  readonly jobQueue: JobQueue;
  readonly tables: StateTables;
  readonly worker: WorkerFunction;

  constructor(scope: Construct, id: string, props: LeaseqStackProps = {}) {
    // Validate before anything is created, so a bad value fails with its own message.
    const settings = resolveLeaseqStackProps(props);
    super(scope, id, props);
    this.settings = settings;

    const production = settings.stage === 'prod';
    const removalPolicy = production ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    const names = resourceNames(settings.resourcePrefix, { fifo: settings.fifo });

    this.jobQueue = new JobQueue(this, 'JobQueue', {
      queueName: names.queues.jobs,
      deadLetterQueueName: names.queues.dlq,
      consumerTimeout: settings.workerTimeout,
      maxReceiveCount: settings.maxAttempts + REDRIVE_MARGIN,
      fifo: settings.fifo,
      removalPolicy,
    });

    this.tables = new StateTables(this, 'StateTables', {
      names: names.tables,
      removalPolicy,
      deletionProtection: production,
    });

    this.worker = new WorkerFunction(this, 'Worker', {
      jobsQueue: this.jobQueue.queue,
      deadLetterQueue: this.jobQueue.deadLetterQueue,
      jobsTable: this.tables.jobs,
      leasesTable: this.tables.leases,
      ledgerTable: this.tables.ledger,
      timeout: settings.workerTimeout,
      maxAttempts: settings.maxAttempts,
      batchSize: settings.batchSize,
      maxConcurrency: settings.maxConcurrency,
      removalPolicy,
    });

    const outputs: Record<StackOutputKey, { value: string; description: string }> = {
      JobsQueueUrl: { value: this.jobQueue.queue.queueUrl, description: 'URL of the jobs queue' },
      JobsQueueName: { value: this.jobQueue.queue.queueName, description: 'Name of the jobs queue' },
      DlqUrl: { value: this.jobQueue.deadLetterQueue.queueUrl, description: 'URL of the dead-letter queue' },
      DlqName: {
        value: this.jobQueue.deadLetterQueue.queueName,
        description: 'Name of the dead-letter queue',
      },
      JobsTableName: {
        value: this.tables.jobs.tableName,
        description: 'Dedup, job lease and checkpoint table',
      },
      LeasesTableName: { value: this.tables.leases.tableName, description: 'Named-lock table' },
      LedgerTableName: {
        value: this.tables.ledger.tableName,
        description: 'Example application ledger table',
      },
      WorkerFunctionName: { value: this.worker.function.functionName, description: 'Worker Lambda function' },
    };
    for (const [key, output] of Object.entries(outputs)) {
      new CfnOutput(this, key, output);
    }
  }
}
