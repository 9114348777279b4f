import { CfnOutput, Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { DEFAULTS } from '../shared/core/contract/defaults.ts';
import { DEFAULT_PAYLOAD_PREFIX } from '../shared/core/contract/payload-store.ts';
import { JobRegistry, type JobSource } from '../shared/core/model/registry.ts';
import { type TableDefinition, tableOutputKey, tablePhysicalName } from '../shared/core/model/table.ts';
import {
  assertValidResourcePrefix,
  DEFAULT_WORKER_TIMEOUT_SECONDS,
  REDRIVE_MARGIN,
  redriveMaxReceiveCount,
  resourceNames,
  type StackOutputKey,
  WORKER_ENV,
} from '../shared/resources.ts';
import { type LeaseqAlarmThresholds, resolveAlarmThresholds } from './constructs/alarm-thresholds.ts';
import { grantPayloadPuts, grantPayloadReads, payloadBucket } from './constructs/payload-bucket.ts';
import { type LeaseqAlarms, PipelineMonitoring } from './constructs/pipeline-monitoring.ts';
import {
  type EventSourceScalingProps,
  eventSourceScaling,
  grantQueueSend,
  InvalidLeaseqPropsError,
  type LeaseqExistingQueue,
  type LeaseqExistingTables,
  pipelineResources,
} from './constructs/pipeline-resources.ts';
import { leaseqTable } from './constructs/state-tables.ts';
import { WorkerFunction, type WorkerLogLevel } from './constructs/worker-function.ts';
import { pipelineSafetyErrors } from './safety-checks.ts';

export { InvalidLeaseqPropsError, type LeaseqExistingQueue, type LeaseqExistingTables };

/** Properties of {@link LeaseqPipeline}. */
export interface LeaseqPipelineProps extends EventSourceScalingProps {
  /**
   * The worker's handler file: it exports `handler = createWorkerHandler({ jobs })`. Bundled with the
   * esbuild installed next to aws-cdk-lib (never Docker).
   */
  readonly entry: string;
  /**
   * The job module's jobs (`defineJobs([...])`). Every application table they declare is created (unless
   * given in `tables`), passed to the worker as `LEASEQ_TABLE_<NAME>` and granted item access.
   * @default no application tables
   */
  readonly jobs?: JobSource;
  /**
   * Existing tables to use for some of the jobs' tables, by logical name; the worker is granted item
   * access to them and nothing is created for those names.
   * @default {}
   */
  readonly tables?: Readonly<Record<string, dynamodb.ITable>>;
  /** An existing jobs queue and DLQ instead of new ones (see {@link LeaseqExistingQueue}). @default new queues */
  readonly existingQueue?: LeaseqExistingQueue;
  /** Existing `jobs` and `leases` tables (see {@link LeaseqExistingTables}). @default new tables */
  readonly existingStateTables?: LeaseqExistingTables;
  /**
   * Prefix of every physical queue and table name (`<prefix>-jobs`, `<prefix>-leases`, `<prefix>-<table>`);
   * the `leaseq` command finds a deployment by it (`--prefix`).
   * @default the stack name
   */
  readonly resourcePrefix?: string;
  /**
   * The application's own attempt limit: after this many attempts a job is dead-lettered by the worker.
   * The queue's redrive `maxReceiveCount` is set above it as a safety net (`maxAttempts + REDRIVE_MARGIN`;
   * on FIFO, or with `LEASEQ_BATCH_CONCURRENCY` in `environment` below `batchSize`,
   * `maxAttempts x batchSize + REDRIVE_MARGIN`, since records handed back unstarted are receives too).
   * @default 5
   */
  readonly maxAttempts?: number;
  /**
   * Timeout of the worker Lambda (1 s - 15 min). The queue's visibility timeout is 6x this. Every lease
   * ends `LEASEQ_DEADLINE_MARGIN_MS` (3 s) before it and no job starts under a 1 s lease, so synthesis
   * refuses less than 5 s (rule `timeout-leaves-a-lease`); a job needs this less 3 s to finish.
   * @default Duration.seconds(60)
   */
  readonly workerTimeout?: Duration;
  /** Records per worker invocation (1-10). @default 10 */
  readonly batchSize?: number;
  /**
   * Most concurrent worker invocations the SQS event source starts (2-1000). A reserved concurrency set
   * on the worker must be at least this (rule `reserved-covers-max-concurrency`). @default 5
   */
  readonly maxConcurrency?: number;
  /** FIFO jobs queue and DLQ (names end in `.fifo`). @default false */
  readonly fifo?: boolean;
  /** Removal policy of queues, tables and logs. @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
  /** Refuse `DeleteTable` of the tables, even from CloudFormation. @default false */
  readonly deletionProtection?: boolean;
  /** Worker memory in MiB. @default 256 */
  readonly memorySize?: number;
  /** `POWERTOOLS_LOG_LEVEL` of the worker. @default 'INFO' */
  readonly logLevel?: WorkerLogLevel;
  /**
   * Let the worker run test hooks carried in payloads (failure injection for demos and tests). Anyone who
   * can send to the queue could then stall or kill workers: never in production.
   * @default false
   */
  readonly testHooks?: boolean;
  /**
   * The largest message body (bytes, 1024 to 1015808): the jobs queue's `MaximumMessageSize` and the
   * worker's `LEASEQ_MAX_BODY_BYTES`, both set from it. Give producers the same (`JobProducer`
   * `maxBodyBytes`, `leaseq send --max-body-bytes`). At most 1 MiB less 32 KiB, so a letter (the body and
   * its reason attributes) always fits into the DLQ. @default 1015808
   */
  readonly maxBodyBytes?: number;
  /**
   * The claim check for bodies over `maxBodyBytes`: a bucket this construct owns (SSE-S3, public access
   * blocked, TLS only, objects expiring) where producers with `largePayloads: { bucket }` put such payloads;
   * the worker reads them (GetObject only, on the keys under `keyPrefix`; nothing is deleted: the lifecycle
   * rule expires objects). Give producers `grantProducer` (PutObject under `keyPrefix`). Stack output `PayloadBucketName` (`addStackOutputs`). A bucket kept on
   * stack deletion (removalPolicy RETAIN) keeps its objects until they expire.
   * @default false (no bucket; a body over the limit is refused by the producer)
   */
  readonly largePayloads?: boolean | LeaseqLargePayloadsProps;
  /** More environment variables for the worker (e.g. `LEASEQ_LEASE_MS`). @default {} */
  readonly environment?: Readonly<Record<string, string>>;
  /**
   * Export the worker's traces (OpenTelemetry, OTLP/HTTP). For X-Ray, add the ADOT Lambda layer (its
   * collector listens on 127.0.0.1:4318 and exports to X-Ray) and `xray: true` for the role's write
   * permission. @default no tracing
   */
  readonly tracing?: LeaseqTracingProps;
  /**
   * Create the dashboard and alarms. Off only where CloudWatch is not wanted.
   * @default true
   */
  readonly monitoring?: boolean;
  /**
   * The worker error-rate and lease-loss-rate alarms: `math` (a rate, metric math) or `counts` (plain
   * alarms on the error and `LeaseLost` counts), for CloudFormation that refuses metric-math alarms, as
   * the local emulator's does. Unset, the app's context decides: `-c rateAlarms=counts`, which
   * `leaseq local deploy` passes ({@link RATE_ALARMS_CONTEXT}).
   * @default the `rateAlarms` context, else 'math'
   */
  readonly rateAlarms?: 'math' | 'counts';
  /**
   * Thresholds of the alarms (DLQ not empty, oldest message age, worker error rate, lease-loss rate);
   * each field has its own default (see {@link LeaseqAlarmThresholds}).
   * @default { deadLetters: 1, oldestMessageAge: 30 min, errorRatePercent: 5, leaseLossRatePercent: 1, period: 5 min }
   */
  readonly alarmThresholds?: LeaseqAlarmThresholds;
  /** Topic every alarm notifies when it goes into ALARM. @default no alarm action */
  readonly alarmTopic?: sns.ITopic;
  /** Root of the project the entry belongs to. @default CDK's search from the lock file */
  readonly projectRoot?: string;
  /** That project's lock file. @default CDK's search upwards from the working directory */
  readonly depsLockFilePath?: string;
}

/** The settings of {@link LeaseqPipelineProps} that have defaults, with the defaults applied. */
export interface ResolvedPipelineSettings {
  readonly resourcePrefix: string;
  readonly maxAttempts: number;
  readonly workerTimeout: Duration;
  readonly batchSize: number;
  readonly maxConcurrency: number;
  readonly fifo: boolean;
  /** Records of a batch run at once: `LEASEQ_BATCH_CONCURRENCY` of `environment`, else the worker's default. */
  readonly batchConcurrency: number;
}

/**
 * Applies the documented defaults in one place and validates them.
 * @throws InvalidLeaseqPropsError naming the prop, the value received and the range expected.
 */
export function resolvePipelineSettings(
  props: Partial<Omit<ResolvedPipelineSettings, 'resourcePrefix'>> & { readonly resourcePrefix: string },
  construct = 'LeaseqPipeline',
): ResolvedPipelineSettings {
  const fail = (prop: string, received: unknown, expected: string, cause?: unknown) =>
    new InvalidLeaseqPropsError(construct, prop, received, expected, cause);
  try {
    assertValidResourcePrefix(props.resourcePrefix);
  } catch (error) {
    throw fail(
      'resourcePrefix',
      props.resourcePrefix,
      'letters, digits, "-" or "_", starting with a letter or digit, short enough for SQS names',
      error,
    );
  }
  const resolved: ResolvedPipelineSettings = {
    resourcePrefix: props.resourcePrefix,
    maxAttempts: props.maxAttempts ?? DEFAULTS.maxAttempts,
    workerTimeout: props.workerTimeout ?? Duration.seconds(DEFAULT_WORKER_TIMEOUT_SECONDS),
    batchSize: props.batchSize ?? 10,
    maxConcurrency: props.maxConcurrency ?? 5,
    fifo: props.fifo ?? false,
    batchConcurrency: props.batchConcurrency ?? DEFAULTS.batchConcurrency,
  };
  const integer = (prop: keyof ResolvedPipelineSettings, min: number, max: number) => {
    const value = resolved[prop] as number;
    if (!Number.isInteger(value) || value < min || value > max) {
      throw fail(prop, value, `an integer from ${min} to ${max}`);
    }
  };
  integer('maxAttempts', 1, 1000 - REDRIVE_MARGIN);
  // A batch is handled within one invocation; more than 10 records would need a batching window.
  integer('batchSize', 1, 10);
  integer('maxConcurrency', 2, 1000);
  if (redriveMaxReceiveCount(resolved) > 1000) {
    const where = resolved.fifo
      ? `on a FIFO queue with batchSize ${resolved.batchSize}`
      : `with batchSize ${resolved.batchSize} and ${WORKER_ENV.concurrency} ${resolved.batchConcurrency}`;
    const or = resolved.fifo ? '' : `; or set ${WORKER_ENV.concurrency} to at least ${resolved.batchSize}`;
    throw fail(
      'maxAttempts',
      resolved.maxAttempts,
      `at most ${Math.floor((1000 - REDRIVE_MARGIN) / resolved.batchSize)} ${where} (the redrive safety net, attempts x batch size + ${REDRIVE_MARGIN}, cannot exceed 1000 receives)${or}`,
    );
  }
  const timeoutSeconds = resolved.workerTimeout.toSeconds({ integral: false });
  if (!Number.isInteger(timeoutSeconds) || timeoutSeconds < 1 || timeoutSeconds > 900) {
    throw fail('workerTimeout', `${timeoutSeconds} s`, 'whole seconds from 1 s to 900 s (the Lambda limit)');
  }
  return resolved;
}

/**
 * leaseq in your own stack: the jobs queue with its DLQ, the `jobs` and `leases` tables, the tables your
 * jobs declare, and the worker Lambda fed by the queue (partial batch failures, maximum concurrency)
 * with least-privilege grants. Physical names come from `resourcePrefix`, so the `leaseq` command finds
 * the deployment by prefix or by the stack outputs.
 *
 * ```ts
 * const pipeline = new LeaseqPipeline(this, 'Jobs', { entry: 'src/worker.ts', jobs, resourcePrefix: 'orders' });
 * pipeline.grantEffects(existingAuditTable);
 * ```
 */
export class LeaseqPipeline extends Construct {
  readonly settings: ResolvedPipelineSettings;
  /** The jobs queue and DLQ: made here, or `existingQueue`'s. */
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
  /** The state tables: made here, or `existingStateTables`'. */
  readonly jobsTable: dynamodb.ITable;
  readonly leasesTable: dynamodb.ITable;
  /** The application tables the worker writes, by logical name (created here or given in `tables`). */
  readonly effectTables: Readonly<Record<string, dynamodb.ITable>>;
  readonly worker: WorkerFunction;
  /**
   * Dashboard `<resourcePrefix>-leaseq`: queue depth, age of oldest message, DLQ depth, worker duration
   * p50/p99 and errors, leaseq's own metrics (namespace `leaseq`, no dimensions), the alarms' states.
   */
  readonly dashboard: cloudwatch.Dashboard | undefined;
  /**
   * The alarms, named `<resourcePrefix>-leaseq-<what>`; they notify `alarmTopic` when given. Undefined,
   * like `dashboard`, when `monitoring` is false.
   */
  readonly alarms: LeaseqAlarms | undefined;
  /** The claim-check bucket (prop `largePayloads`); undefined without it. */
  readonly payloadBucket: s3.Bucket | undefined;
  /** The producers' key prefix in {@link payloadBucket}: the grants name the objects under it only. */
  #payloadPrefix = DEFAULT_PAYLOAD_PREFIX;

  constructor(scope: Construct, id: string, props: LeaseqPipelineProps) {
    super(scope, id);
    if (typeof props.entry !== 'string' || props.entry.trim() === '') {
      throw new InvalidLeaseqPropsError(
        'LeaseqPipeline',
        'entry',
        props.entry,
        'the path of your handler file',
      );
    }
    const concurrency = props.environment?.[WORKER_ENV.concurrency];
    this.settings = resolvePipelineSettings({
      ...props,
      resourcePrefix: props.resourcePrefix ?? Stack.of(this).stackName,
      // A value that is no positive integer is reported by the safety checks, naming the variable.
      ...(concurrency !== undefined && /^[1-9]\d*$/.test(concurrency)
        ? { batchConcurrency: Number(concurrency) }
        : {}),
    });
    const settings = this.settings;
    const thresholds = resolveAlarmThresholds(props.alarmThresholds);
    if ('prop' in thresholds) {
      throw new InvalidLeaseqPropsError(
        'LeaseqPipeline',
        `alarmThresholds.${thresholds.prop}`,
        thresholds.received,
        thresholds.expected,
      );
    }
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    const deletionProtection = props.deletionProtection ?? false;
    const names = resourceNames(settings.resourcePrefix, { fifo: settings.fifo });

    const resources = pipelineResources(this, {
      ...props,
      settings,
      names,
      removalPolicy,
      deletionProtection,
    });
    const { maxBodyBytes } = resources;
    ({ queue: this.queue, deadLetterQueue: this.deadLetterQueue } = resources);
    ({ jobsTable: this.jobsTable, leasesTable: this.leasesTable } = resources);

    const declared = jobTables(props.jobs);
    const given = props.tables ?? {};
    for (const name of Object.keys(given)) {
      if (!declared.some((t) => t.name === name)) {
        throw new InvalidLeaseqPropsError(
          'LeaseqPipeline',
          'tables',
          name,
          `a table the jobs declare (${declared.map((t) => t.name).join(', ') || 'none'})`,
        );
      }
    }
    const effectTables: Record<string, dynamodb.ITable> = {};
    for (const table of declared) {
      effectTables[table.name] =
        given[table.name] ??
        leaseqTable(this, tableOutputKey(table.name).replace(/Name$/, ''), {
          ...table,
          name: tablePhysicalName(settings.resourcePrefix, table.name),
          removalPolicy,
          deletionProtection,
        });
    }
    this.effectTables = effectTables;

    this.worker = new WorkerFunction(this, 'Worker', {
      entry: props.entry,
      jobsQueue: this.queue,
      deadLetterQueue: this.deadLetterQueue,
      jobsTable: this.jobsTable,
      leasesTable: this.leasesTable,
      effectTables,
      // Without the job module the limits are unknown: the role gets what a limit needs.
      ...(props.jobs === undefined ? {} : { limits: JobRegistry.from(props.jobs).limits() }),
      timeout: settings.workerTimeout,
      maxAttempts: settings.maxAttempts,
      batchSize: settings.batchSize,
      ...eventSourceScaling(props, settings.maxConcurrency),
      maxBodyBytes,
      removalPolicy,
      ...(props.memorySize === undefined ? {} : { memorySize: props.memorySize }),
      ...(props.logLevel === undefined ? {} : { logLevel: props.logLevel }),
      ...(props.testHooks === undefined ? {} : { testHooks: props.testHooks }),
      largePayloads: Boolean(props.largePayloads),
      ...(props.environment === undefined && props.tracing === undefined
        ? {}
        : { environment: { ...tracingEnvironment(props.tracing), ...props.environment } }),
      ...(props.projectRoot === undefined ? {} : { projectRoot: props.projectRoot }),
      ...(props.depsLockFilePath === undefined ? {} : { depsLockFilePath: props.depsLockFilePath }),
    });

    this.payloadBucket = props.largePayloads
      ? this.#payloadBucket(props.largePayloads === true ? {} : props.largePayloads, removalPolicy)
      : undefined;

    for (const layer of props.tracing?.layers ?? []) this.worker.function.addLayers(layer);
    if (props.tracing?.xray) {
      // X-Ray's write actions take no resource: '*' is the only form IAM accepts for them. In a policy of
      // their own, so the acknowledgement of that wildcard covers these two actions and nothing else.
      const role = this.worker.function.role;
      if (!role) throw new Error('LeaseqPipeline: the worker function has no role');
      const xray = new iam.Policy(this, 'XRayWrites', {
        roles: [role],
        statements: [
          new iam.PolicyStatement({
            actions: [...XRAY_WRITE_ACTIONS],
            resources: ['*'],
          }),
        ],
      });
      // Traces of the first invocations need the permission as much as the later ones.
      this.worker.function.node.addDependency(xray);
      Validations.of(xray).acknowledge({
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'X-Ray PutTraceSegments and PutTelemetryRecords support no resource-level permissions: IAM accepts ' +
          'only Resource "*" for them. This policy holds those two write actions and nothing else.',
      });
    }

    const monitoring =
      props.monitoring === false
        ? undefined
        : new PipelineMonitoring(this, 'Monitoring', {
            name: `${settings.resourcePrefix}-leaseq`,
            queue: this.queue,
            deadLetterQueue: this.deadLetterQueue,
            function: this.worker.function,
            thresholds,
            ...(props.alarmTopic ? { alarmTopic: props.alarmTopic } : {}),
            rateAlarms: props.rateAlarms ?? rateAlarmsFromContext(this),
          });
    this.dashboard = monitoring?.dashboard;
    this.alarms = monitoring?.alarms;

    // The protocol's timing and redrive rules, checked at synth time on the resources as they are then
    // (after any escape hatch): synthesis fails with the value found and the value required.
    this.node.addValidation({
      validate: () =>
        pipelineSafetyErrors({
          queue: this.queue,
          deadLetterQueue: this.deadLetterQueue,
          function: this.worker.function,
          ...(resources.queueFacts ? { queueFacts: resources.queueFacts } : {}),
        }),
    });
  }

  /**
   * Adds the stack outputs every `leaseq` command reads with `--outputs` (`cdk deploy --outputs-file`):
   * queue URLs and names, the table names (one `<Name>TableName` per application table) and the worker
   * function. They carry fixed names, so call it for one pipeline per stack.
   */
  addStackOutputs(): void {
    const stack = Stack.of(this);
    const outputs: Record<StackOutputKey, { value: string; description: string }> = {
      JobsQueueUrl: { value: this.queue.queueUrl, description: 'URL of the jobs queue' },
      JobsQueueName: { value: this.queue.queueName, description: 'Name of the jobs queue' },
      DlqUrl: { value: this.deadLetterQueue.queueUrl, description: 'URL of the dead-letter queue' },
      DlqName: { value: this.deadLetterQueue.queueName, description: 'Name of the dead-letter queue' },
      JobsTableName: {
        value: this.jobsTable.tableName,
        description: 'Dedup, job lease and checkpoint table',
      },
      LeasesTableName: { value: this.leasesTable.tableName, description: 'Named-lock table' },
      WorkerFunctionName: { value: this.worker.function.functionName, description: 'Worker Lambda function' },
    };
    for (const [key, output] of Object.entries(outputs)) new CfnOutput(stack, key, output);
    if (this.payloadBucket) {
      new CfnOutput(stack, 'PayloadBucketName', {
        value: this.payloadBucket.bucketName,
        description: 'Claim-check bucket of payloads over the body limit (JobProducer largePayloads)',
      });
    }
    for (const [name, table] of Object.entries(this.effectTables)) {
      new CfnOutput(stack, tableOutputKey(name), {
        value: table.tableName,
        description: `Application table ${name} (LEASEQ_TABLE_* of the worker)`,
      });
    }
  }

  /** Lets a producer send jobs ({@link grantQueueSend}); with `largePayloads`, PutObject under the prefix. */
  grantProducer(grantee: iam.IGrantable): void {
    grantQueueSend(this.queue, grantee);
    const bucket = this.payloadBucket;
    if (!bucket) return;
    grantPayloadPuts(grantee, bucket, this.#payloadPrefix);
  }

  #payloadBucket(options: LeaseqLargePayloadsProps, removalPolicy: RemovalPolicy): s3.Bucket {
    const expiration = options.expiration ?? Duration.days(21);
    if (expiration.toDays({ integral: false }) < MIN_PAYLOAD_DAYS) {
      throw new InvalidLeaseqPropsError(
        'LeaseqPipeline',
        'largePayloads.expiration',
        `${expiration.toDays({ integral: false })} days`,
        `at least ${MIN_PAYLOAD_DAYS} days: longer than a message lives (4 days in the jobs queue, then 14 in the DLQ), so a redriven job still finds its payload`,
      );
    }
    const prefix = options.keyPrefix ?? DEFAULT_PAYLOAD_PREFIX;
    // The grants name `<bucket>/<prefix>*`: a `*` or `?` widens them, and so does no trailing `/` ('' all).
    if (/[*?]/.test(prefix) || !prefix.endsWith('/')) {
      throw new InvalidLeaseqPropsError(
        'LeaseqPipeline',
        'largePayloads.keyPrefix',
        prefix,
        'a key prefix ending in / without * or ? (the grants are on the objects under it)',
      );
    }
    this.#payloadPrefix = prefix;
    const bucket = payloadBucket(this, { expiration, removalPolicy });
    grantPayloadReads(this, bucket, prefix, this.worker.function);
    if (options.maxBytes !== undefined)
      this.worker.function.addEnvironment(WORKER_ENV.payloadMaxBytes, String(options.maxBytes));
    return bucket;
  }

  /**
   * Lets the worker read `table` and write it from effects (GetItem, PutItem, UpdateItem, DeleteItem on
   * that table only), for a table your jobs use that this construct did not make.
   */
  grantEffects(table: dynamodb.ITable): void {
    this.worker.grantEffects(table);
  }
}

/**
 * The context key {@link LeaseqPipelineProps.rateAlarms} falls back to. It is read by the construct
 * itself, so any app holding it deploys to the emulator with `-c rateAlarms=counts`.
 */
export const RATE_ALARMS_CONTEXT = 'rateAlarms';

/**
 * `math` or `counts` from the app's context, else `math`.
 * @throws InvalidLeaseqPropsError for another value (a typo would otherwise deploy math alarms silently).
 */
function rateAlarmsFromContext(scope: Construct): 'math' | 'counts' {
  const value: unknown = scope.node.tryGetContext(RATE_ALARMS_CONTEXT);
  if (value === undefined || value === null) return 'math';
  if (value === 'math' || value === 'counts') return value;
  throw new InvalidLeaseqPropsError(
    'LeaseqPipeline',
    RATE_ALARMS_CONTEXT,
    value,
    'math or counts (context -c rateAlarms=counts, or the prop)',
  );
}

function jobTables(jobs: LeaseqPipelineProps['jobs']): TableDefinition[] {
  if (!jobs) return [];
  return JobRegistry.from(jobs).tables();
}

/** Shortest object expiration of `largePayloads`: the jobs queue's retention (4 d) + the DLQ's (14 d) + 1 d. */
const MIN_PAYLOAD_DAYS = 19;

/** Where large payloads are kept: see {@link LeaseqPipelineProps.largePayloads}. */
export interface LeaseqLargePayloadsProps {
  /**
   * How long an object is kept (the bucket's lifecycle rule); a job redriven later finds no payload and is
   * dead-lettered `invalid-payload-missing`. At least 19 days. @default Duration.days(21)
   */
  readonly expiration?: Duration;
  /**
   * Start of every object key: the producers' `largePayloads.keyPrefix` (the same value). The worker lists
   * under it only and follows pointers to keys under it only; it ends in `/` (the grants name `<prefix>*`). @default 'payloads/'
   */
  readonly keyPrefix?: string;
  /**
   * The largest payload the worker reads (`LEASEQ_PAYLOAD_MAX_BYTES`; a larger pointer is dead-lettered
   * `invalid-too-large`). Give producers the same `largePayloads.maxBytes`. @default 64 MiB
   */
  readonly maxBytes?: number;
}

/** The actions `tracing.xray` grants (on `*`: X-Ray has no resource-level permissions for them). */
export const XRAY_WRITE_ACTIONS = ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'] as const;

/** Where the worker's traces go: see {@link LeaseqPipelineProps.tracing}. */
export interface LeaseqTracingProps {
  /** OTLP/HTTP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`). @default 'http://127.0.0.1:4318' (a collector layer) */
  readonly otlpEndpoint?: string;
  /** `OTEL_SERVICE_NAME` of the worker's spans. @default 'leaseq-worker' */
  readonly serviceName?: string;
  /** Lambda layers to add, e.g. the ADOT collector layer of your region. @default none */
  readonly layers?: readonly lambda.ILayerVersion[];
  /** Grant the worker X-Ray's write actions (for a collector that exports to X-Ray). @default false */
  readonly xray?: boolean;
}

function tracingEnvironment(tracing: LeaseqTracingProps | undefined): Record<string, string> {
  if (!tracing) return {};
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: tracing.otlpEndpoint ?? 'http://127.0.0.1:4318',
    OTEL_SERVICE_NAME: tracing.serviceName ?? 'leaseq-worker',
  };
}
