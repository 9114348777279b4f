import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { App, Duration } from 'aws-cdk-lib';
import { InvalidLeaseqPropsError } from './leaseq-pipeline.ts';
import { LeaseqStack, type LeaseqStackProps } from './leaseq-stack.ts';

const CDK_JSON = fileURLToPath(new URL('../cdk.json', import.meta.url));

/** Context key that lists the stacks whose assets are bundled; `[]` skips all bundling. */
export const BUNDLING_STACKS_CONTEXT = 'aws:cdk:bundling-stacks';

/**
 * The `context` of cdk.json (feature flags). `cdk synth` passes it to the app itself; an app built
 * in-process (tests, local provisioning) gets it from here so it synthesizes the same template.
 */
export function cdkJsonContext(): Record<string, unknown> {
  const parsed: unknown = JSON.parse(readFileSync(CDK_JSON, 'utf8'));
  if (typeof parsed === 'object' && parsed !== null && 'context' in parsed) {
    const { context } = parsed;
    if (typeof context === 'object' && context !== null) return { ...context };
  }
  return {};
}

/** The CloudFormation stack name of a stage. */
export function leaseqStackName(stage: string): string {
  return `leaseq-${stage}`;
}

export interface CreateLeaseqAppOptions {
  /** Stack properties. @default {} (stage dev, all defaults) */
  readonly stackProps?: LeaseqStackProps;
  /**
   * Bundle the worker with esbuild. Skipping it makes synthesis fast when only the template matters
   * (the Lambda's code location is then a placeholder).
   * @default true
   */
  readonly bundle?: boolean;
  /** Cloud assembly directory. @default a fresh temporary directory */
  readonly outdir?: string;
}

/**
 * Builds an App holding one {@link LeaseqStack}, with cdk.json's feature flags, for in-process synthesis.
 * The stack is environment-agnostic (no account or region), like the one `cdk synth` produces.
 */
export function createLeaseqApp(options: CreateLeaseqAppOptions = {}): { app: App; stack: LeaseqStack } {
  const context: Record<string, unknown> = { ...cdkJsonContext() };
  if (options.bundle === false) context[BUNDLING_STACKS_CONTEXT] = [];
  const app = new App({ context, ...(options.outdir ? { outdir: options.outdir } : {}) });
  const props = options.stackProps ?? {};
  const stack = new LeaseqStack(app, leaseqStackName(props.stage ?? 'dev'), props);
  return { app, stack };
}

/**
 * Reads stack properties from CDK context (`cdk synth -c stage=prod -c fifo=true`). Context values
 * given on the command line are strings; numbers and booleans are parsed here.
 */
export function stackPropsFromContext(app: App): LeaseqStackProps {
  const text = (key: string): string | undefined => {
    const value: unknown = app.node.tryGetContext(key);
    return value === undefined || value === null ? undefined : String(value);
  };
  const int = (key: string): number | undefined => {
    const value = text(key);
    if (value === undefined) return undefined;
    if (!/^-?\d+$/.test(value.trim())) {
      throw new InvalidLeaseqPropsError('LeaseqStack', key, value, `an integer (-c ${key}=<n>)`);
    }
    return Number(value);
  };
  const bool = (key: string, value: string): boolean => {
    if (value === 'true' || value === 'false') return value === 'true';
    throw new InvalidLeaseqPropsError('LeaseqStack', key, value, `true or false (-c ${key}=true)`);
  };
  const stage = text('stage');
  const resourcePrefix = text('resourcePrefix');
  const maxAttempts = int('maxAttempts');
  const workerTimeoutSeconds = int('workerTimeoutSeconds');
  const batchSize = int('batchSize');
  const maxConcurrency = int('maxConcurrency');
  const fifo = text('fifo');
  const testHooks = text('testHooks');
  const leaseMs = int('leaseMs');
  const monitoring = text('monitoring');
  const rateAlarms = text('rateAlarms');
  if (rateAlarms !== undefined && rateAlarms !== 'math' && rateAlarms !== 'counts') {
    throw new InvalidLeaseqPropsError(
      'LeaseqStack',
      'rateAlarms',
      rateAlarms,
      'math or counts (-c rateAlarms=counts)',
    );
  }
  return {
    ...(stage !== undefined ? { stage } : {}),
    ...(resourcePrefix !== undefined ? { resourcePrefix } : {}),
    ...(maxAttempts !== undefined ? { maxAttempts } : {}),
    ...(workerTimeoutSeconds !== undefined ? { workerTimeout: Duration.seconds(workerTimeoutSeconds) } : {}),
    ...(batchSize !== undefined ? { batchSize } : {}),
    ...(maxConcurrency !== undefined ? { maxConcurrency } : {}),
    ...(fifo !== undefined ? { fifo: bool('fifo', fifo) } : {}),
    ...(testHooks !== undefined ? { testHooks: bool('testHooks', testHooks) } : {}),
    ...(leaseMs !== undefined ? { leaseMs } : {}),
    ...(monitoring !== undefined ? { monitoring: bool('monitoring', monitoring) } : {}),
    ...(rateAlarms === 'math' || rateAlarms === 'counts' ? { rateAlarms } : {}),
  };
}
