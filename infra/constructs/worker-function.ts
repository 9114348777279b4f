import { type Duration, Names, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { tableEnvVar } from '../../shared/core/model/table.ts';
import { isInstalled, missingPackage } from '../../shared/optional-package.ts';
import { WORKER_ENV } from '../../shared/resources.ts';
import { type LeaseqProvisionedPollers, provisionedPollerConfig } from './provisioned-pollers.ts';

/** Powertools log levels. */
export type WorkerLogLevel = 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';

/** Properties of {@link WorkerFunction}. */
export interface WorkerFunctionProps {
  /** Queue the worker consumes (event source). */
  readonly jobsQueue: sqs.IQueue;
  /** Dead-letter queue the worker sends to explicitly once a job has used its attempts. */
  readonly deadLetterQueue: sqs.IQueue;
  /** Dedup + job lease + checkpoint table. */
  readonly jobsTable: dynamodb.ITable;
  /** Named-lock table. */
  readonly leasesTable: dynamodb.ITable;
  /**
   * Which limits the worker's jobs declare: each adds the actions of {@link WORKER_LIMIT_ACTIONS} it uses.
   * @default both (the jobs are not known)
   */
  readonly limits?: { readonly concurrency: boolean; readonly rate: boolean };
  /** Application tables the jobs' effects write, by logical table name (`LEASEQ_TABLE_<NAME>`). @default {} */
  readonly effectTables?: Readonly<Record<string, dynamodb.ITable>>;
  /** Lambda timeout; the queue's visibility timeout must be at least 6x this. */
  readonly timeout: Duration;
  /** The application's attempt limit, passed to the handler as `LEASEQ_MAX_ATTEMPTS`. */
  readonly maxAttempts: number;
  /** The largest body the worker runs (`LEASEQ_MAX_BODY_BYTES`): the jobs queue's `MaximumMessageSize`. */
  readonly maxBodyBytes: number;
  /** Records per invocation (1-10). */
  readonly batchSize: number;
  /** Most concurrent invocations the event source starts (2-1000); none in provisioned mode. */
  readonly maxConcurrency?: number;
  /** The event source's provisioned mode (provisioned-pollers.ts). @default standard mode */
  readonly provisionedPollers?: LeaseqProvisionedPollers;
  /** Removal policy of the function's log group. */
  readonly removalPolicy: RemovalPolicy;
  /** Handler source file (exports `handler`, e.g. `createWorkerHandler({ jobs })`). */
  readonly entry: string;
  /** Root of the project the entry belongs to. @default CDK's own search (the lock file's directory) */
  readonly projectRoot?: string;
  /** Lock file of that project. @default CDK's own search upwards from the working directory */
  readonly depsLockFilePath?: string;
  /**
   * Bundles `@aws-sdk/client-s3` (the claim check's reads). Without it the client is left out of the
   * bundle: a worker without a payload bucket dead-letters a pointer before importing it. @default false
   */
  readonly largePayloads?: boolean;
  /** Runs test hooks carried in payloads (`LEASEQ_TEST_HOOKS`). Never in production. @default false */
  readonly testHooks?: boolean;
  /** More environment variables for the function. @default {} */
  readonly environment?: Readonly<Record<string, string>>;
  /** Memory in MiB. @default 256 */
  readonly memorySize?: number;
  /** `POWERTOOLS_SERVICE_NAME`. @default 'leaseq' */
  readonly serviceName?: string;
  /** `POWERTOOLS_LOG_LEVEL`. @default 'INFO' */
  readonly logLevel?: WorkerLogLevel;
  /** Retention of the function's log group. @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
}

/**
 * DynamoDB actions the worker uses, per table. Item-level only: no scans, no table administration.
 * `TransactWriteItems` has no IAM action of its own; each item in a transaction is authorised by the
 * action it performs (Put/Update/Delete/ConditionCheck), so these lists cover the completion transaction.
 */
export const WORKER_TABLE_ACTIONS = {
  /** The job store only reads and updates job items (the claim is a conditional UpdateItem). */
  jobs: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
  /** Named leases and rate permits: conditional updates, reads, and the ConditionCheck a fenced commit carries. */
  leases: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:ConditionCheckItem'],
  /**
   * Application tables: reads (`ctx.tables.<name>.get`), and the writes the effect builders make (Put,
   * Update, Delete). No ConditionCheckItem: no effect builder makes a ConditionCheck on an application
   * table (the only ConditionChecks in a commit are the named-lease fences, on the leases table).
   */
  effects: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
} as const;

/**
 * SQS actions the worker role gets, per queue: exactly what the Lambda event source mapping and the worker
 * code call. Not CDK's `grantConsumeMessages` / `grantSendMessages`, which add `sqs:GetQueueUrl` (and
 * `GetQueueAttributes` on the DLQ): the worker gets both URLs from its environment and never asks.
 */
export const WORKER_QUEUE_ACTIONS = {
  /**
   * The event source mapping polls with the role (ReceiveMessage, DeleteMessage, GetQueueAttributes);
   * the worker extends and resets visibility (heartbeat, backoff) and deletes what it finished.
   */
  jobs: ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueAttributes'],
  /** Explicit dead-lettering with the reason attributes: one SendMessage, nothing else. */
  deadLetter: ['sqs:SendMessage'],
} as const;

/** On the KMS key of an existing queue encrypted with one (the queues leaseq makes use SQS-managed SSE). */
export const WORKER_QUEUE_KMS_ACTIONS = ['kms:Decrypt', 'kms:GenerateDataKey'] as const;

/**
 * On the KMS key of an existing state or application table encrypted with a customer managed key (given with
 * `Table.fromTableAttributes({ encryptionKey })`): DynamoDB uses it with the caller's permissions to read
 * and write items (the tables leaseq makes use the AWS managed key, which needs no grant).
 */
export const WORKER_TABLE_KMS_ACTIONS = [
  'kms:Decrypt',
  'kms:DescribeKey',
  'kms:Encrypt',
  'kms:GenerateDataKey',
] as const;

/**
 * What the worker's role gets only when its jobs declare limits (WorkerFunctionProps.limits): a
 * concurrency scope's busy acquire reads the scope's slots with one BatchGetItem on the leases table, and
 * a concurrency or rate limit's bounce re-sends a message received often (SendMessage on the jobs queue),
 * so waits use no receives.
 */
export const WORKER_LIMIT_ACTIONS = {
  leases: ['dynamodb:BatchGetItem'],
  jobsQueue: ['sqs:SendMessage'],
} as const;

/**
 * The worker Lambda: the handler bundled by the locally installed esbuild (never Docker), Node 22 on
 * arm64, ESM output, fed by an SQS event source that reports partial batch failures, with
 * least-privilege grants on the queues and tables.
 */
export class WorkerFunction extends Construct {
  readonly function: nodejs.NodejsFunction;
  /** The SQS event source mapping (partial batch failures, maximum concurrency). */
  readonly eventSource: lambda.EventSourceMapping;

  constructor(scope: Construct, id: string, props: WorkerFunctionProps) {
    super(scope, id);
    assertLocalEsbuild(this);
    const removalPolicy = props.removalPolicy;

    const logGroup = new logs.LogGroup(this, 'LogGroup', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy,
    });

    // An own role instead of AWSLambdaBasicExecutionRole, whose log actions apply to every log group
    // (`Resource: *`): this one may only write to the function's own log group.
    const role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: 'leaseq worker: consume the jobs queue, dead-letter, item access to the state tables',
    });
    logGroup.grantWrite(role);

    this.function = new nodejs.NodejsFunction(this, 'Function', {
      description: `leaseq worker (${Stack.of(this).stackName})`,
      entry: props.entry,
      handler: 'handler',
      ...(props.projectRoot ? { projectRoot: props.projectRoot } : {}),
      ...(props.depsLockFilePath ? { depsLockFilePath: props.depsLockFilePath } : {}),
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize ?? 256,
      timeout: props.timeout,
      role,
      logGroup,
      environment: {
        POWERTOOLS_SERVICE_NAME: props.serviceName ?? 'leaseq',
        POWERTOOLS_LOG_LEVEL: props.logLevel ?? 'INFO',
        POWERTOOLS_METRICS_NAMESPACE: 'leaseq',
        // Stack traces through the bundled source map.
        NODE_OPTIONS: '--enable-source-maps',
        [WORKER_ENV.jobsQueueUrl]: props.jobsQueue.queueUrl,
        [WORKER_ENV.dlqUrl]: props.deadLetterQueue.queueUrl,
        [WORKER_ENV.jobsTable]: props.jobsTable.tableName,
        [WORKER_ENV.leasesTable]: props.leasesTable.tableName,
        [WORKER_ENV.maxAttempts]: String(props.maxAttempts),
        [WORKER_ENV.maxBodyBytes]: String(props.maxBodyBytes),
        ...(props.testHooks ? { [WORKER_ENV.testHooks]: '1' } : {}),
        ...Object.fromEntries(
          Object.entries(props.effectTables ?? {}).map(([name, table]) => [
            tableEnvVar(name),
            table.tableName,
          ]),
        ),
        ...props.environment,
      },
      bundling: {
        // Local esbuild (a dependency of this package); assertLocalEsbuild makes a missing one an
        // error instead of CDK's silent fall-back to a Docker build.
        forceDockerBundling: false,
        format: nodejs.OutputFormat.ESM,
        target: 'node22',
        mainFields: ['module', 'main'],
        // ESM output: give bundled CommonJS dependencies a `require` for Node built-ins.
        banner:
          "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
        // Ship the SDK versions the tests ran with instead of whatever the runtime provides.
        bundleAwsSDK: true,
        externalModules: workerExternalModules(Boolean(props.largePayloads)),
        minify: true,
        sourceMap: true,
        sourcesContent: false,
      },
    });

    // cdk-nag (AwsSolutions-L1) asks for the newest Node runtime. Node 22 is a decision, not an oversight:
    // the bundle targets node22, the repository pins Node 22 for its tests, the local loop and the
    // emulator's Lambda executor, and the deployed-stack test checks the function runs on Node 22. A newer
    // runtime is an upgrade of all of those together.
    Validations.of(this.function).acknowledge({
      id: 'AwsSolutions-L1',
      reason:
        'Node.js 22 on purpose: the bundle targets node22 and the repository tests, runs locally and on the ' +
        "emulator's Lambda executor with Node 22 (package.json pins node 22); moving to a newer runtime is a " +
        'deliberate upgrade of all of them together',
    });

    // The mapping itself rather than SqsEventSource, whose bind() grants `grantConsumeMessages` (with
    // sqs:GetQueueUrl). The construct id is SqsEventSource's own, so the logical id is unchanged.
    this.eventSource = this.function.addEventSourceMapping(
      `SqsEventSource:${Names.nodeUniqueId(props.jobsQueue.node)}`,
      {
        eventSourceArn: props.jobsQueue.queueArn,
        batchSize: props.batchSize,
        ...(props.maxConcurrency === undefined ? {} : { maxConcurrency: props.maxConcurrency }),
        ...(props.provisionedPollers === undefined
          ? {}
          : { provisionedPollerConfig: provisionedPollerConfig(props.provisionedPollers) }),
        reportBatchItemFailures: true,
      },
    );

    // The queues are SQS-managed SSE (no KMS key to grant); see WORKER_QUEUE_ACTIONS.
    props.jobsQueue.grant(this.function, ...WORKER_QUEUE_ACTIONS.jobs);
    props.deadLetterQueue.grant(this.function, ...WORKER_QUEUE_ACTIONS.deadLetter);
    // An existing queue may be encrypted with a KMS key (given with `Queue.fromQueueAttributes({ keyArn })`):
    // receiving needs kms:Decrypt, sending (the DLQ, a limit's re-send) GenerateDataKey and Decrypt.
    for (const queue of [props.jobsQueue, props.deadLetterQueue])
      queue.encryptionMasterKey?.grant(this.function, ...WORKER_QUEUE_KMS_ACTIONS);
    // On the table's ARN alone: `Table.grant` would add `<table>/index/*` for the problems index, which the
    // worker never reads (item actions do not apply to an index; listings are the operator's).
    iam.Grant.addToPrincipal({
      grantee: this.function,
      actions: [...WORKER_TABLE_ACTIONS.jobs],
      resourceArns: [props.jobsTable.tableArn],
    });
    props.leasesTable.grant(this.function, ...WORKER_TABLE_ACTIONS.leases);
    for (const table of [props.jobsTable, props.leasesTable])
      table.encryptionKey?.grant(this.function, ...WORKER_TABLE_KMS_ACTIONS);
    const limits = props.limits ?? { concurrency: true, rate: true };
    if (limits.concurrency) props.leasesTable.grant(this.function, ...WORKER_LIMIT_ACTIONS.leases);
    if (limits.concurrency || limits.rate)
      props.jobsQueue.grant(this.function, ...WORKER_LIMIT_ACTIONS.jobsQueue);
    for (const table of Object.values(props.effectTables ?? {})) this.grantEffects(table);
  }

  /** Lets the worker read `table` and write it from effects (item-level actions only, and its KMS key's). */
  grantEffects(table: dynamodb.ITable): void {
    table.grant(this.function, ...WORKER_TABLE_ACTIONS.effects);
    table.encryptionKey?.grant(this.function, ...WORKER_TABLE_KMS_ACTIONS);
  }
}

/**
 * Bundling must use a local esbuild (an optional peer of leaseq, installed next to aws-cdk-lib): CDK
 * would otherwise try Docker.
 */
function assertLocalEsbuild(scope: Construct): void {
  if (!Stack.of(scope).bundlingRequired) return;
  if (!isInstalled('esbuild')) throw missingPackage('esbuild');
}

/**
 * Modules left out of the worker's bundle. `@aws-sdk/client-s3` is imported (lazily) by the claim check
 * only, and adds about 21 % to the bundle: without `largePayloads` it is left out (a worker without a
 * payload bucket dead-letters a pointer before importing it).
 */
export function workerExternalModules(largePayloads: boolean): string[] {
  return largePayloads ? [] : ['@aws-sdk/client-s3'];
}
