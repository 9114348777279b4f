import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import {
  DescribeContinuousBackupsCommand,
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
  UpdateContinuousBackupsCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { LeaseqError } from '../errors.ts';
import { loadOptional } from '../optional-package.ts';
import { isProcessAlive, processCommandLine, sleep } from './process.ts';

type CloudFormationSdk = typeof import('@aws-sdk/client-cloudformation');

/** The CloudFormation client is an optional peer: only deploys to the emulator need it. */
const cloudFormationSdk = () => loadOptional<CloudFormationSdk>('@aws-sdk/client-cloudformation');

/**
 * A CloudFormation client for the emulator at `endpoint`, with its test credentials.
 * @throws ConfigError when @aws-sdk/client-cloudformation is not installed (one line that says so).
 */
export async function localCloudFormation(endpoint: string, region: string): Promise<CloudFormationClient> {
  const { CloudFormationClient } = await cloudFormationSdk();
  return new CloudFormationClient({
    region,
    endpoint,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test', accountId: LOCAL_ACCOUNT },
  });
}

/** The account and credentials every local emulator accepts. */
export const LOCAL_ACCOUNT = '000000000000';
const LOCAL_CREDENTIALS = { AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' };

/** A step of a local deploy or destroy that failed, with the one line that says why. */
export class DeployError extends LeaseqError {
  override readonly name = 'DeployError';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { retryable: false, cause: options?.cause });
  }
}

export interface LocalDeployOptions {
  /** The emulator's endpoint (the deploy talks to nothing else). */
  readonly endpoint: string;
  readonly region: string;
  /** The CDK project: where cdk.json is. */
  readonly projectDir: string;
  /** The stack to deploy (`leaseq-<stage>`). */
  readonly stackName: string;
  /** `-c key=value` pairs for the CDK app. @default {} */
  readonly context?: Readonly<Record<string, string>>;
  /** The cloud assembly directory (`cdk --output`), relative to `projectDir`. @default 'cdk.out' */
  readonly cdkOut?: string;
  /** Where `cdk deploy --outputs-file` writes. */
  readonly outputsFile: string;
  readonly cloudFormation: CloudFormationClient;
  readonly dynamodb: DynamoDBClient;
  /** Progress lines (stderr). */
  readonly log: (line: string) => void;
}

export interface LocalDeployResult {
  readonly outputs: Readonly<Record<string, string>>;
  /** True when this deploy ran `cdk bootstrap` first. */
  readonly bootstrapped: boolean;
  /** What was set after the deploy because the emulator's CloudFormation drops it. */
  readonly gapsClosed: readonly string[];
  readonly seconds: number;
}

/**
 * `cdk bootstrap` (when the emulator has no CDKToolkit stack yet) and `cdk deploy` of the real stack:
 * the same synthesized template and assets as for AWS, with the endpoint and test credentials set for
 * these commands only. Then the emulator's CloudFormation gaps are closed on the deployed tables (TTL,
 * point-in-time recovery), and the outputs are read back.
 * @throws DeployError naming the failed step (and the stack event that failed, when there is one).
 */
export async function deployLocal(options: LocalDeployOptions): Promise<LocalDeployResult> {
  const started = Date.now();
  const env = cdkEnv(options);
  let bootstrapped = false;
  if (!(await stackExists(options.cloudFormation, 'CDKToolkit'))) {
    options.log(`cdk bootstrap aws://${LOCAL_ACCOUNT}/${options.region} (first deploy on this emulator)`);
    const code = await runCdk(['bootstrap', `aws://${LOCAL_ACCOUNT}/${options.region}`], options, env);
    if (code !== 0) throw new DeployError(`cdk bootstrap failed (exit ${code}); see the lines above`);
    bootstrapped = true;
  }
  mkdirSync(dirname(options.outputsFile), { recursive: true });
  options.log(`cdk deploy ${options.stackName} to ${options.endpoint}`);
  const code = await runCdk(
    [
      'deploy',
      options.stackName,
      '--require-approval',
      'never',
      '--outputs-file',
      options.outputsFile,
      '--output',
      options.cdkOut ?? 'cdk.out',
      ...contextArgs(options.context),
    ],
    options,
    env,
  );
  if (code !== 0) {
    const failed = await failedEvent(options.cloudFormation, options.stackName);
    throw new DeployError(
      `cdk deploy failed (exit ${code})${failed ? `: ${failed}` : '; see the lines above'}`,
    );
  }
  const outputs = readStackOutputs(options.outputsFile, options.stackName);
  const gapsClosed = await closeTableGaps(options);
  for (const line of gapsClosed) options.log(line);
  return { outputs, bootstrapped, gapsClosed, seconds: (Date.now() - started) / 1000 };
}

export interface LocalDestroyResult {
  readonly destroyed: boolean;
  /** Function worker processes the emulator left running, stopped here. */
  readonly stoppedWorkers: number;
  readonly seconds: number;
}

/**
 * `cdk destroy --force` of the stack, then stops the function worker processes the emulator leaves
 * running after the function is gone (children of the emulator running its Node worker script).
 */
export async function destroyLocal(
  options: Omit<LocalDeployOptions, 'outputsFile' | 'dynamodb'> & { readonly emulatorPid?: number },
): Promise<LocalDestroyResult> {
  const started = Date.now();
  if (!(await stackExists(options.cloudFormation, options.stackName))) {
    options.log(`no stack ${options.stackName} on ${options.endpoint}: nothing to destroy`);
    return { destroyed: false, stoppedWorkers: await stopFunctionWorkers(options.emulatorPid), seconds: 0 };
  }
  options.log(`cdk destroy ${options.stackName} on ${options.endpoint}`);
  const code = await runCdk(
    [
      'destroy',
      options.stackName,
      '--force',
      '--output',
      options.cdkOut ?? 'cdk.out',
      ...contextArgs(options.context),
    ],
    options,
    cdkEnv(options),
  );
  if (code !== 0) throw new DeployError(`cdk destroy failed (exit ${code}); see the lines above`);
  const stoppedWorkers = await stopFunctionWorkers(options.emulatorPid);
  if (stoppedWorkers > 0)
    options.log(`stopped ${stoppedWorkers} function worker process(es) the emulator left running`);
  return { destroyed: true, stoppedWorkers, seconds: (Date.now() - started) / 1000 };
}

/** The environment of the cdk commands: this process's, plus the emulator's endpoint and test keys. */
function cdkEnv(options: Pick<LocalDeployOptions, 'endpoint' | 'region'>): NodeJS.ProcessEnv {
  return {
    ...process.env,
    ...LOCAL_CREDENTIALS,
    AWS_SESSION_TOKEN: '',
    AWS_PROFILE: '',
    AWS_ENDPOINT_URL: options.endpoint,
    AWS_REGION: options.region,
    AWS_DEFAULT_REGION: options.region,
    CDK_DEFAULT_ACCOUNT: LOCAL_ACCOUNT,
    CDK_DEFAULT_REGION: options.region,
  };
}

/**
 * Context every local deploy and destroy adds unless the caller sets it: the error-rate and lease-loss
 * alarms as plain count alarms, because the emulator's CloudFormation refuses alarms on metric math
 * (`Properties.Metrics`). The dashboard and the other alarms deploy as on AWS.
 */
export const LOCAL_DEPLOY_CONTEXT: Readonly<Record<string, string>> = { rateAlarms: 'counts' };

function contextArgs(context: Readonly<Record<string, string>> = {}): string[] {
  return Object.entries({ ...LOCAL_DEPLOY_CONTEXT, ...context }).flatMap(([key, value]) => [
    '-c',
    `${key}=${value}`,
  ]);
}

/** Runs the project's own `cdk` (node_modules/.bin), its output passed to stderr line by line. */
function runCdk(
  args: readonly string[],
  options: LocalDeployOptions | Parameters<typeof destroyLocal>[0],
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const bin = join(options.projectDir, 'node_modules', '.bin', 'cdk');
  if (!existsSync(bin)) {
    throw new DeployError(
      `no cdk in ${options.projectDir}/node_modules/.bin: run npm install (aws-cdk is a dev dependency)`,
    );
  }
  return new Promise((resolve, reject) => {
    // An emulator with TLS and its own certificate: the CDK CLI trusts it only through --ca-bundle-path
    // (NODE_EXTRA_CA_CERTS, which this process honours, does not reach the CLI's HTTP agent).
    const bundle = caBundle(env, options.projectDir);
    const extra = ['--no-notices', '--ci', ...(bundle ? ['--ca-bundle-path', bundle] : [])];
    const child = spawn(bin, [...args, ...extra], {
      cwd: options.projectDir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const forward = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line.trim()) options.log(`  ${line.trimEnd()}`);
    };
    child.stdout.on('data', forward);
    child.stderr.on('data', forward);
    child.on('error', reject);
    child.on('close', (code) => resolve(code ?? 1));
  });
}

/**
 * The CA bundle the CDK CLI should trust: AWS_CA_BUNDLE plus NODE_EXTRA_CA_CERTS (an emulator's own
 * certificate) in one file, since the CLI takes a single bundle. Undefined when neither is set.
 */
function caBundle(env: NodeJS.ProcessEnv, projectDir: string): string | undefined {
  const extra = env.NODE_EXTRA_CA_CERTS;
  const base = env.AWS_CA_BUNDLE;
  if (!extra) return base || undefined;
  const parts = [base, extra].filter((f): f is string => Boolean(f) && existsSync(f as string));
  const file = join(projectDir, '.leaseq', 'tmp', 'cdk-ca-bundle.pem');
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, parts.map((f) => readFileSync(f, 'utf8')).join('\n'));
  return file;
}

async function stackExists(cfn: CloudFormationClient, stackName: string): Promise<boolean> {
  try {
    const { DescribeStacksCommand } = await cloudFormationSdk();
    const out = await cfn.send(new DescribeStacksCommand({ StackName: stackName }));
    const status = out.Stacks?.[0]?.StackStatus;
    return status !== undefined && status !== 'DELETE_COMPLETE';
  } catch (error) {
    if (error instanceof Error && /does not exist/i.test(error.message)) return false;
    throw error;
  }
}

/** The first failed resource event of the stack's latest operation, as one line. */
async function failedEvent(cfn: CloudFormationClient, stackName: string): Promise<string | undefined> {
  try {
    const { DescribeStackEventsCommand } = await cloudFormationSdk();
    const out = await cfn.send(new DescribeStackEventsCommand({ StackName: stackName }));
    const failed = (out.StackEvents ?? []).find((e) => e.ResourceStatus?.endsWith('_FAILED'));
    if (!failed) return undefined;
    return `${failed.LogicalResourceId} (${failed.ResourceType}) ${failed.ResourceStatus}: ${failed.ResourceStatusReason ?? 'no reason given'}`;
  } catch {
    return undefined;
  }
}

/** The outputs `cdk deploy --outputs-file` wrote for the stack. */
export function readStackOutputs(file: string, stackName: string): Record<string, string> {
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as Record<string, Record<string, string>>;
  const outputs = parsed[stackName];
  if (!outputs) throw new DeployError(`${file} has no outputs for ${stackName}`);
  return outputs;
}

interface TableSettings {
  readonly ttlAttribute?: string;
  readonly pointInTimeRecovery: boolean;
}

/**
 * Sets what the emulator's CloudFormation drops from `AWS::DynamoDB::Table`: time to live and point in
 * time recovery, as the synthesized template declares them. Returns a line per change.
 */
async function closeTableGaps(options: LocalDeployOptions): Promise<string[]> {
  const declared = tableSettingsFromTemplate(
    resolve(options.projectDir, options.cdkOut ?? 'cdk.out'),
    options.stackName,
  );
  const { DescribeStackResourcesCommand } = await cloudFormationSdk();
  const resources = await options.cloudFormation.send(
    new DescribeStackResourcesCommand({ StackName: options.stackName }),
  );
  const lines: string[] = [];
  for (const resource of resources.StackResources ?? []) {
    const settings = resource.LogicalResourceId ? declared.get(resource.LogicalResourceId) : undefined;
    const table = resource.PhysicalResourceId;
    if (!settings || !table) continue;
    if (settings.ttlAttribute) {
      const ttl = await options.dynamodb.send(new DescribeTimeToLiveCommand({ TableName: table }));
      if (ttl.TimeToLiveDescription?.TimeToLiveStatus !== 'ENABLED') {
        await options.dynamodb.send(
          new UpdateTimeToLiveCommand({
            TableName: table,
            TimeToLiveSpecification: { AttributeName: settings.ttlAttribute, Enabled: true },
          }),
        );
        lines.push(`set TTL on ${table} (${settings.ttlAttribute}): the emulator's CloudFormation drops it`);
      }
    }
    if (settings.pointInTimeRecovery) {
      const backups = await options.dynamodb
        .send(new DescribeContinuousBackupsCommand({ TableName: table }))
        .catch(() => undefined);
      const status =
        backups?.ContinuousBackupsDescription?.PointInTimeRecoveryDescription?.PointInTimeRecoveryStatus;
      if (backups && status !== 'ENABLED') {
        await options.dynamodb.send(
          new UpdateContinuousBackupsCommand({
            TableName: table,
            PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          }),
        );
        lines.push(`set point-in-time recovery on ${table}: the emulator's CloudFormation drops it`);
      }
    }
  }
  return lines;
}

/** TTL and PITR of each `AWS::DynamoDB::Table` in the stack's synthesized template, by logical id. */
function tableSettingsFromTemplate(cdkOut: string, stackName: string): Map<string, TableSettings> {
  const file = join(cdkOut, `${stackName}.template.json`);
  const template = JSON.parse(readFileSync(file, 'utf8')) as {
    Resources?: Record<string, { Type?: string; Properties?: Record<string, unknown> }>;
  };
  const settings = new Map<string, TableSettings>();
  for (const [id, resource] of Object.entries(template.Resources ?? {})) {
    if (resource.Type !== 'AWS::DynamoDB::Table') continue;
    const props = resource.Properties ?? {};
    const ttl = props.TimeToLiveSpecification as { AttributeName?: string; Enabled?: boolean } | undefined;
    const pitr = props.PointInTimeRecoverySpecification as
      | { PointInTimeRecoveryEnabled?: boolean }
      | undefined;
    settings.set(id, {
      ...(ttl?.Enabled && ttl.AttributeName ? { ttlAttribute: ttl.AttributeName } : {}),
      pointInTimeRecovery: pitr?.PointInTimeRecoveryEnabled === true,
    });
  }
  return settings;
}

/**
 * Stops the function worker processes the emulator leaves running once their function is gone: its
 * child processes running Node. Returns how many were stopped.
 */
async function stopFunctionWorkers(emulatorPid: number | undefined): Promise<number> {
  if (emulatorPid === undefined) return 0;
  const workers = childProcesses(emulatorPid).filter((pid) => /\bnode\b/.test(processCommandLine(pid) ?? ''));
  for (const pid of workers) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  const until = Date.now() + 3000;
  while (workers.some(isProcessAlive) && Date.now() < until) await sleep(100);
  for (const pid of workers.filter(isProcessAlive)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  return workers.length;
}

/** Direct children of `pid` (Linux `/proc`); empty where that is not available. */
function childProcesses(pid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const children: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}
