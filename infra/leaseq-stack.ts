import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import ledgerJobs from '../examples/ledger/jobs.ts';
import { JobRegistry, type JobSource } from '../shared/core/model/registry.ts';
import { defaultResourcePrefix } from '../shared/resources.ts';
import { siblingModule } from '../shared/sibling-module.ts';
import {
  InvalidLeaseqPropsError,
  LeaseqPipeline,
  type ResolvedPipelineSettings,
  resolvePipelineSettings,
} from './leaseq-pipeline.ts';

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
  /** The worker's handler file. @default functions/worker.ts (the ledger example) */
  readonly entry?: string;
  /** The job module's jobs, whose tables the stack creates. @default the ledger example's jobs */
  readonly jobs?: JobSource;
  /** See {@link LeaseqPipelineProps.maxAttempts}. @default 5 */
  readonly maxAttempts?: number;
  /** See {@link LeaseqPipelineProps.workerTimeout}. @default Duration.seconds(60) */
  readonly workerTimeout?: Duration;
  /** Records per worker invocation (1-10). @default 10 */
  readonly batchSize?: number;
  /** Most concurrent worker invocations the SQS event source starts (2-1000). @default 5 */
  readonly maxConcurrency?: number;
  /** FIFO jobs queue and DLQ (names end in `.fifo`). @default false */
  readonly fifo?: boolean;
  /** Run test hooks carried in payloads (the demo's failure injection). Never in prod. @default false */
  readonly testHooks?: boolean;
  /** The worker's job lease in ms (`LEASEQ_LEASE_MS`). @default the worker's default, 30000 */
  readonly leaseMs?: number;
  /** See {@link LeaseqPipelineProps.monitoring}: the dashboard and alarms. @default true */
  readonly monitoring?: boolean;
  /** See {@link LeaseqPipelineProps.rateAlarms}. @default 'math' */
  readonly rateAlarms?: 'math' | 'counts';
}

/** {@link LeaseqStackProps} settings with every default applied. */
export interface ResolvedLeaseqStackProps extends ResolvedPipelineSettings {
  readonly stage: string;
}

/** A stack property outside its allowed range (the same error class as the construct's). */
export { InvalidLeaseqPropsError as InvalidLeaseqStackPropsError };

/** Applies the documented defaults in one place and validates the result. */
export function resolveLeaseqStackProps(props: LeaseqStackProps = {}): ResolvedLeaseqStackProps {
  const stage = props.stage ?? 'dev';
  if (!/^[a-z][a-z0-9-]{0,19}$/.test(stage)) {
    throw new InvalidLeaseqPropsError(
      'LeaseqStack',
      'stage',
      stage,
      'a lower-case name like "dev" or "prod" (a-z, 0-9, -)',
    );
  }
  const resourcePrefix = props.resourcePrefix ?? defaultResourcePrefix(stage);
  return { stage, ...resolvePipelineSettings({ ...props, resourcePrefix }, 'LeaseqStack') };
}

// In a checkout the handler is TypeScript and the repository's lock file pins the bundle; in the
// installed package both are absent and CDK finds the user's project instead.
const DEFAULT_ENTRY = siblingModule(new URL('../functions/', import.meta.url).href, 'worker');
const REPO_LOCK = fileURLToPath(new URL('../package-lock.json', import.meta.url));

/**
 * The reference pipeline: a {@link LeaseqPipeline} running the ledger example (or the jobs you pass),
 * with a stage, and every queue and table name as a stack output (`cdk deploy --outputs-file`), which
 * every `leaseq` command reads with `--outputs`.
 */
export class LeaseqStack extends Stack {
  readonly settings: ResolvedLeaseqStackProps;
  readonly pipeline: LeaseqPipeline;

  constructor(scope: Construct, id: string, props: LeaseqStackProps = {}) {
    // Validate before anything is created, so a bad value fails with its own message.
    const settings = resolveLeaseqStackProps(props);
    super(scope, id, props);
    this.settings = settings;
    const production = settings.stage === 'prod';
    const lockFile = existsSync(REPO_LOCK) ? REPO_LOCK : undefined;

    this.pipeline = new LeaseqPipeline(this, 'Pipeline', {
      entry: props.entry ?? DEFAULT_ENTRY,
      jobs: stackJobs(props),
      resourcePrefix: settings.resourcePrefix,
      maxAttempts: settings.maxAttempts,
      workerTimeout: settings.workerTimeout,
      batchSize: settings.batchSize,
      maxConcurrency: settings.maxConcurrency,
      fifo: settings.fifo,
      removalPolicy: production ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
      deletionProtection: production,
      ...(props.testHooks && !production ? { testHooks: true } : {}),
      ...(props.monitoring === false ? { monitoring: false } : {}),
      ...(props.rateAlarms ? { rateAlarms: props.rateAlarms } : {}),
      ...(props.leaseMs === undefined ? {} : { environment: { LEASEQ_LEASE_MS: String(props.leaseMs) } }),
      ...(lockFile && !props.entry
        ? { projectRoot: fileURLToPath(new URL('..', import.meta.url)), depsLockFilePath: lockFile }
        : {}),
    });
    this.pipeline.addStackOutputs();
  }
}

/** The jobs a {@link LeaseqStack} with these props runs (the ledger example unless given). */
export function stackJobs(props: Pick<LeaseqStackProps, 'jobs'>): JobRegistry {
  const jobs = props.jobs ?? ledgerJobs;
  return JobRegistry.from(jobs);
}
