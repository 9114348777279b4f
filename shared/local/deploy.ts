// `leaseq local deploy` and `destroy`: cdk bootstrap (once per emulator, under a lock), cdk deploy and
// cdk destroy of the app's stacks against the emulator; what they find afterwards is deployed-stacks.ts.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { endpointText } from '../aws/endpoint-text.ts';
import type { LocalCredential } from '../aws/local-credential.ts';
import { bootstrapLockFile, cdkEnv, LOCAL_ACCOUNT } from './deploy-env.ts';
import {
  assemblyStacks,
  BOOTSTRAP_STACK,
  closeTableGaps,
  firstFailedEvent,
  selectStacks,
  stackExists,
  stackFunctions,
} from './deployed-stacks.ts';
import { DeployError } from './emulator-errors.ts';
import { nodeRuntimes, runtimeMismatch } from './function-node.ts';
import { functionWorkers, stopFunctionWorkers } from './function-workers.ts';
import { withFileLock } from './lock.ts';
import { readEmulatorState } from './state.ts';

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
  options.log(`cdk deploy ${which} to ${endpointText(options.endpoint)}`);
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
  // The embedded emulator runs every Node function on the one Node it was started with.
  const node = options.lockDir ? readEmulatorState(join(options.lockDir, 'emulator.json'))?.node : undefined;
  const templates = selectStacks(assembly, options.stacks).map((s) => s.templateFile);
  const mismatch = node && runtimeMismatch(nodeRuntimes(templates), node);
  if (mismatch) options.log(mismatch);
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
    options.log(`no stack on ${endpointText(options.endpoint)}: nothing to destroy`);
    return { destroyed: [], stoppedWorkers: 0, seconds: 0 };
  }
  options.log(
    `cdk destroy ${named.length > 0 ? named.join(', ') : 'every stack of the app'} on ${endpointText(options.endpoint)}`,
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
