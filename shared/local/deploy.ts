import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import {
  DescribeContinuousBackupsCommand,
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
  UpdateContinuousBackupsCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import type { LocalCredential } from '../aws/local-credential.ts';
import { LeaseqError } from '../errors.ts';
import { bootstrapLockFile, cdkEnv, cloudFormationSdk, LOCAL_ACCOUNT } from './deploy-env.ts';
import { functionWorkers, stopFunctionWorkers } from './function-workers.ts';
import { withFileLock } from './lock.ts';

export { LOCAL_ACCOUNT, localCloudFormation } from './deploy-env.ts';

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
  /**
   * The stacks to deploy, as `cdk deploy` names them (stack names or hierarchical ids).
   * @default every stack of the app (`cdk deploy --all`)
   */
  readonly stacks?: readonly string[];
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
  /**
   * What the cdk commands sign with. @default the embedded emulator's credential (a loopback
   * endpoint), else `test`/`test`
   */
  readonly credentials?: LocalCredential;
  /**
   * The private directory the bootstrap lock lives in (the emulator's state directory).
   * @default `LEASEQ_STATE_DIR`, else `.leaseq` of the project
   */
  readonly lockDir?: string;
}

/** One stack a local deploy deployed. */
export interface DeployedStack {
  readonly stackName: string;
  /** Its outputs, as `cdk deploy --outputs-file` wrote them. */
  readonly outputs: Readonly<Record<string, string>>;
  /** What was set after the deploy because the emulator's CloudFormation drops it. */
  readonly gapsClosed: readonly string[];
}

export interface LocalDeployResult {
  /** The deployed stacks, in the order cdk deployed them. */
  readonly stacks: readonly DeployedStack[];
  /** True when this deploy ran `cdk bootstrap` first. */
  readonly bootstrapped: boolean;
  readonly seconds: number;
}

/** `cdk deploy|destroy` arguments that pick the stacks: the names, or `--all`. */
function stackArgs(stacks: readonly string[] | undefined): string[] {
  return stacks && stacks.length > 0 ? [...stacks] : ['--all'];
}

/**
 * `cdk bootstrap` (when the emulator has no CDKToolkit stack yet) and `cdk deploy` of the app's stacks
 * (the named ones, or all): the same synthesized templates and assets as for AWS, with the endpoint and
 * test credentials set for these commands only. Then the emulator's CloudFormation gaps are closed on
 * every table of the deployed stacks (TTL, point-in-time recovery), and the outputs are read back.
 * Any app works: `-c rateAlarms=counts` makes the construct's rate alarms deployable here.
 * @throws DeployError naming the failed step (and the stack event that failed, when there is one).
 */
export async function deployLocal(options: LocalDeployOptions): Promise<LocalDeployResult> {
  const started = Date.now();
  const env = cdkEnv(options);
  let bootstrapped = false;
  if (!(await stackExists(options.cloudFormation, BOOTSTRAP_STACK))) {
    // Two deploys starting together on a fresh emulator (two terminals, parallel test files) would both
    // create the toolkit stack, and one fails: one bootstraps under a lock per emulator, the other finds
    // the stack there once it holds the lock.
    const lockFile = bootstrapLockFile(options);
    const waiting = (holder: number) =>
      options.log(
        `waiting for another deploy (pid ${holder}) to bootstrap this emulator, at most ${BOOTSTRAP_LOCK_MS / 60_000} minutes; if no leaseq deploy is running, remove ${lockFile}`,
      );
    bootstrapped = await withFileLock(
      lockFile,
      BOOTSTRAP_LOCK_MS,
      async () => {
        if (await stackExists(options.cloudFormation, BOOTSTRAP_STACK)) return false;
        options.log(`cdk bootstrap aws://${LOCAL_ACCOUNT}/${options.region} (first deploy on this emulator)`);
        const code = await runCdk(['bootstrap', `aws://${LOCAL_ACCOUNT}/${options.region}`], options, env);
        if (code !== 0) throw new DeployError(`cdk bootstrap failed (exit ${code}); see the lines above`);
        return true;
      },
      { onWait: waiting },
    );
  }
  mkdirSync(dirname(resolve(options.projectDir, options.outputsFile)), { recursive: true });
  const which = options.stacks?.length ? options.stacks.join(', ') : 'every stack of the app';
  options.log(`cdk deploy ${which} to ${options.endpoint}`);
  const code = await runCdk(
    [
      'deploy',
      ...stackArgs(options.stacks),
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
  const assembly = assemblyStacks(resolve(options.projectDir, options.cdkOut ?? 'cdk.out'));
  if (code !== 0) {
    const failed = await firstFailedEvent(
      options.cloudFormation,
      selectStacks(assembly, options.stacks).map((s) => s.stackName),
    );
    throw new DeployError(
      `cdk deploy failed (exit ${code})${failed ? `: ${failed}` : '; see the lines above'}`,
    );
  }
  // The outputs file lists only stacks that have outputs: which stacks were deployed comes from the
  // cloud assembly (the selection cdk made), each checked to be on the emulator.
  const written = JSON.parse(
    readFileSync(resolve(options.projectDir, options.outputsFile), 'utf8'),
  ) as Record<string, Record<string, string>>;
  const stacks: DeployedStack[] = [];
  for (const stack of selectStacks(assembly, options.stacks)) {
    if (!(await stackExists(options.cloudFormation, stack.stackName))) continue;
    const gapsClosed = await closeTableGaps(options, stack.stackName, stack.templateFile);
    for (const line of gapsClosed) options.log(line);
    stacks.push({ stackName: stack.stackName, outputs: written[stack.stackName] ?? {}, gapsClosed });
  }
  return { stacks, bootstrapped, seconds: (Date.now() - started) / 1000 };
}

export interface LocalDestroyOptions extends Omit<LocalDeployOptions, 'outputsFile' | 'dynamodb' | 'stacks'> {
  /** The stacks to destroy. @default every stack of the app (`cdk destroy --all`) */
  readonly stacks?: readonly string[];
}

export interface LocalDestroyResult {
  /** The stacks that were on the emulator before and are gone now. */
  readonly destroyed: readonly string[];
  /** Processes the emulator kept running for the destroyed stacks' functions, stopped here. */
  readonly stoppedWorkers: number;
  readonly seconds: number;
}

/**
 * `cdk destroy --force` of the app's stacks (the named ones, or all), then what the emulator leaves
 * behind of their functions: the processes it keeps running after the function is gone, and the
 * folders (`<tmp>/ministack-lambda-<function>-*`) they ran in. Only the functions of the stacks this
 * destroy removed, and only processes of the emulator at `endpoint`, are touched.
 */
export async function destroyLocal(options: LocalDestroyOptions): Promise<LocalDestroyResult> {
  const started = Date.now();
  const named = options.stacks ?? [];
  // `--stack` takes what cdk takes (ids, `Stage/*` patterns), not CloudFormation stack names, so it is
  // not looked up here: cdk says when nothing matches. Only an emulator with no stack at all is skipped.
  const before = await stackFunctions(options.cloudFormation);
  if ([...before.keys()].every((stack) => stack === BOOTSTRAP_STACK)) {
    options.log(`no stack on ${options.endpoint}: nothing to destroy`);
    return { destroyed: [], stoppedWorkers: 0, seconds: 0 };
  }
  options.log(
    `cdk destroy ${named.length > 0 ? named.join(', ') : 'every stack of the app'} on ${options.endpoint}`,
  );
  const code = await runCdk(
    [
      'destroy',
      ...stackArgs(options.stacks),
      '--force',
      '--output',
      options.cdkOut ?? 'cdk.out',
      ...contextArgs(options.context),
    ],
    options,
    cdkEnv(options),
  );
  if (code !== 0) throw new DeployError(`cdk destroy failed (exit ${code}); see the lines above`);
  const after = await stackFunctions(options.cloudFormation);
  const destroyed = [...before.keys()].filter((stack) => !after.has(stack));
  const functions = new Set(destroyed.flatMap((stack) => before.get(stack) ?? []));
  const port = Number(new URL(options.endpoint).port || 80);
  const stoppedWorkers = functions.size > 0 ? await stopFunctionWorkers(functionWorkers(port, functions)) : 0;
  if (stoppedWorkers > 0)
    options.log(
      `stopped ${stoppedWorkers} function process(es) the emulator left running, and removed their folders`,
    );
  return { destroyed, stoppedWorkers, seconds: (Date.now() - started) / 1000 };
}

/** How long a deploy waits for another one's bootstrap of the same emulator. */
const BOOTSTRAP_LOCK_MS = 10 * 60_000;

/** The stack `cdk bootstrap` makes; never the user's to destroy. */
const BOOTSTRAP_STACK = 'CDKToolkit';

/** The stacks on the emulator now (but the bootstrap stack), for a destroy's confirmation to name. */
export async function emulatorStacks(cfn: CloudFormationClient): Promise<string[]> {
  return [...(await stackFunctions(cfn)).keys()].filter((stack) => stack !== BOOTSTRAP_STACK).sort();
}

/** The Lambda functions of every stack on the emulator, by stack name. */
async function stackFunctions(cfn: CloudFormationClient): Promise<Map<string, string[]>> {
  const { DescribeStackResourcesCommand, paginateListStacks } = await cloudFormationSdk();
  const functions = new Map<string, string[]>();
  for await (const page of paginateListStacks({ client: cfn }, {})) {
    for (const summary of page.StackSummaries ?? []) {
      const name = summary.StackName;
      if (!name || summary.StackStatus === 'DELETE_COMPLETE' || functions.has(name)) continue;
      const resources = await cfn
        .send(new DescribeStackResourcesCommand({ StackName: name }))
        .catch(() => ({ StackResources: [] }));
      functions.set(
        name,
        (resources.StackResources ?? [])
          .filter((r) => r.ResourceType === 'AWS::Lambda::Function' && r.PhysicalResourceId)
          .map((r) => r.PhysicalResourceId as string),
      );
    }
  }
  return functions;
}

/**
 * Context every local deploy and destroy adds unless the caller sets it: the error-rate and lease-loss
 * alarms as plain count alarms, because the emulator's CloudFormation refuses alarms on metric math
 * (`Properties.Metrics`). `LeaseqPipeline` reads it itself (unless its `rateAlarms` prop is set), so it
 * works for any app holding the construct. The dashboard and the other alarms deploy as on AWS.
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
  options: LocalDeployOptions | LocalDestroyOptions,
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
    const bundle = cdkCaBundle(env, options.projectDir);
    const extra = ['--no-notices', '--ci', ...(bundle ? ['--ca-bundle-path', bundle.file] : [])];
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
    child.on('error', (error) => {
      bundle?.remove();
      reject(error);
    });
    child.on('close', (code) => {
      bundle?.remove();
      resolve(code ?? 1);
    });
  });
}

/**
 * The CA bundle the CDK CLI should trust: AWS_CA_BUNDLE plus NODE_EXTRA_CA_CERTS (an emulator's own
 * certificate) in one file, since the CLI takes a single bundle. A file of its own per run (two deploys
 * of one project at once must not swap bundles between the write and the CLI reading it), removed by
 * `remove()` once the CLI has exited. Undefined when neither variable is set.
 */
export function cdkCaBundle(
  env: NodeJS.ProcessEnv,
  projectDir: string,
): { readonly file: string; remove(): void } | undefined {
  const extra = env.NODE_EXTRA_CA_CERTS;
  const base = env.AWS_CA_BUNDLE;
  if (!extra) return base ? { file: base, remove: () => {} } : undefined;
  const parts = [base, extra].filter((f): f is string => Boolean(f) && existsSync(f as string));
  const tmp = join(projectDir, '.leaseq', 'tmp');
  mkdirSync(tmp, { recursive: true });
  const dir = mkdtempSync(join(tmp, 'cdk-ca-'));
  const file = join(dir, 'bundle.pem');
  writeFileSync(file, parts.map((f) => readFileSync(f, 'utf8')).join('\n'));
  return { file, remove: () => rmSync(dir, { recursive: true, force: true }) };
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

/** The first failed resource event of the stacks' latest operations, as one line. */
async function firstFailedEvent(
  cfn: CloudFormationClient,
  stackNames: readonly string[],
): Promise<string | undefined> {
  const { DescribeStackEventsCommand } = await cloudFormationSdk();
  for (const stackName of stackNames) {
    try {
      const out = await cfn.send(new DescribeStackEventsCommand({ StackName: stackName }));
      const failed = (out.StackEvents ?? []).find((e) => e.ResourceStatus?.endsWith('_FAILED'));
      if (failed)
        return `${failed.LogicalResourceId} (${failed.ResourceType}) ${failed.ResourceStatus}: ${failed.ResourceStatusReason ?? 'no reason given'}`;
    } catch {
      // no such stack (it was never created): look at the next
    }
  }
  return undefined;
}

/** A stack of the cloud assembly `cdk` synthesized. */
interface AssemblyStack {
  /** The artifact id, e.g. `Shop` or `Prod/Shop` in a stage (what `cdk deploy` also accepts). */
  readonly id: string;
  readonly stackName: string;
  readonly templateFile: string;
}

/** The stacks of the cloud assembly in `dir` (`manifest.json`), nested assemblies (stages) included. */
export function assemblyStacks(dir: string): AssemblyStack[] {
  let manifest: {
    artifacts?: Record<
      string,
      {
        type?: string;
        displayName?: string;
        properties?: { templateFile?: string; stackName?: string; directoryName?: string };
      }
    >;
  };
  try {
    manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
  } catch {
    return [];
  }
  const stacks: AssemblyStack[] = [];
  for (const [id, artifact] of Object.entries(manifest.artifacts ?? {})) {
    const props = artifact.properties ?? {};
    if (artifact.type === 'aws:cloudformation:stack' && props.templateFile) {
      stacks.push({
        id: artifact.displayName ?? id,
        stackName: props.stackName ?? id,
        templateFile: join(dir, props.templateFile),
      });
    } else if (artifact.type === 'cdk:cloud-assembly' && props.directoryName) {
      stacks.push(...assemblyStacks(join(dir, props.directoryName)));
    }
  }
  return stacks;
}

/**
 * The stacks `names` pick (stack name or id; `*` matches any text, as in `cdk deploy 'Prod/*'`), or
 * every stack when none is named.
 */
function selectStacks(stacks: readonly AssemblyStack[], names: readonly string[] | undefined) {
  if (!names || names.length === 0) return stacks;
  const patterns = names.map(
    (name) => new RegExp(`^${name.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`),
  );
  return stacks.filter((s) => patterns.some((p) => p.test(s.stackName) || p.test(s.id)));
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
 * time recovery, as the stack's synthesized template declares them. Returns a line per change.
 */
async function closeTableGaps(
  options: LocalDeployOptions,
  stackName: string,
  templateFile: string,
): Promise<string[]> {
  const declared = tableSettingsFromTemplate(templateFile);
  if (declared.size === 0) return [];
  const { DescribeStackResourcesCommand } = await cloudFormationSdk();
  const resources = await options.cloudFormation.send(
    new DescribeStackResourcesCommand({ StackName: stackName }),
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

/** TTL and PITR of each `AWS::DynamoDB::Table` in a synthesized template, by logical id. */
function tableSettingsFromTemplate(file: string): Map<string, TableSettings> {
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
