import { readFileSync } from 'node:fs';
import { GetQueueAttributesCommand, GetQueueUrlCommand } from '@aws-sdk/client-sqs';
import type { Command } from 'commander';
import { type AwsClients, destroyAwsClients, isLocalEndpoint } from '../shared/aws/clients.ts';
import { endpointText } from '../shared/aws/endpoint-text.ts';
import type { JobRegistry } from '../shared/core/model/registry.ts';
import { tableOutputKey, tablePhysicalName } from '../shared/core/model/table.ts';
import { type EmulatorStatus, emulatorStatus } from '../shared/local/emulator.ts';
import { DEFAULT_LOCAL_STAGE } from '../shared/local/provision-template.ts';
import {
  defaultResourcePrefix,
  resourceNames,
  STACK_OUTPUT_KEYS,
  type StackOutputKey,
} from '../shared/resources.ts';
import { credentialSource, remoteEndpointWarning } from './remote-endpoint.ts';
import { targetClients } from './service-endpoints.ts';
import {
  assertHostResolves,
  callerAccount,
  EMULATOR_ACCOUNTS,
  isMissingQueue,
  outputsWithoutTarget,
  type Place,
  placeFor,
  TargetError,
  unreachable,
} from './target-errors.ts';

export { TargetError } from './target-errors.ts';

/** Flags every command that talks to a deployment accepts. */
export interface TargetFlags {
  readonly endpoint?: string;
  readonly prefix?: string;
  readonly outputs?: string;
  readonly region?: string;
  /** The user chose real AWS (no endpoint). */
  readonly aws?: boolean;
}

/** Names and URLs of one leaseq deployment (embedded emulator, LocalStack or AWS). */
export interface TargetNames {
  readonly queueUrl: string;
  readonly queueArn: string;
  readonly dlqUrl: string;
  readonly jobsTable: string;
  readonly leasesTable: string;
  /** Where the application tables' names come from: the stack outputs, or the prefix. */
  readonly source: { readonly outputs: Readonly<Record<string, string>> } | { readonly prefix: string };
}

/**
 * Physical names of the application tables `registry`'s jobs declare, in this deployment: the
 * `<Name>TableName` stack outputs, or `<prefix>-<name>` as the stack names them.
 * @throws TargetError when the outputs lack a table.
 */
export function appTableNames(names: TargetNames, registry: JobRegistry): Record<string, string> {
  const tables: Record<string, string> = {};
  for (const table of registry.tables()) {
    if ('prefix' in names.source) {
      tables[table.name] = tablePhysicalName(names.source.prefix, table.name);
      continue;
    }
    const value = names.source.outputs[tableOutputKey(table.name)];
    if (!value) {
      throw new TargetError(
        `the stack outputs lack ${tableOutputKey(table.name)} (table ${table.name} of the job module): deploy the stack with these jobs`,
      );
    }
    tables[table.name] = value;
  }
  return tables;
}

/**
 * Where a command acts: the embedded emulator leaseq runs, an endpoint the user named (an emulator,
 * LocalStack), or real AWS. Real AWS only when the user chose it.
 */
export type TargetKind = 'emulator' | 'endpoint' | 'aws';

/** Which target, and why: decided before any request leaves the machine. */
export interface TargetChoice {
  readonly kind: TargetKind;
  /** `undefined` means real AWS. */
  readonly endpoint: string | undefined;
  readonly region: string;
  /** Why this target, as a person reads it: the flag, variable or running emulator that chose it. */
  readonly why: string;
}

export interface Target extends TargetChoice {
  readonly clients: AwsClients;
  readonly names: TargetNames;
  /** The account acted in: STS GetCallerIdentity on AWS, the queue ARN's account elsewhere. */
  readonly account: string;
  /** True when the endpoint is on this machine (an emulator: nothing on a real account). */
  readonly local: boolean;
  /** The one line naming the target, printed by every command (`target: ...`). */
  readonly line: string;
  close(): void;
}

/** Adds --endpoint, --aws, --prefix, --outputs and --region to a command. */
export function targetOptions(command: Command): Command {
  return command
    .option(
      '--endpoint <url>',
      'AWS endpoint (default: AWS_ENDPOINT_URL, else the embedded emulator if running; never AWS unless --aws)',
    )
    .option('--aws', 'act on real AWS (needs --region or AWS_REGION; credentials from the usual chain)')
    .option(
      '--prefix <prefix>',
      'resource name prefix (default: LEASEQ_PREFIX, else leaseq-local locally, leaseq-dev on AWS)',
    )
    .option('--outputs <file>', 'stack outputs JSON written by `cdk deploy --outputs-file`')
    .option('--region <region>', 'AWS region (default: AWS_REGION, else us-east-1)');
}

/** How a command that found no target tells the user to choose one (one line). */
export const NO_TARGET_MESSAGE =
  'no target chosen: no --endpoint, no AWS_ENDPOINT_URL and no running emulator, and leaseq never falls back to AWS by itself; ' +
  'start the emulator (`npx leaseq local up`), pass --endpoint <url>, or pass --aws --region <region> to act on real AWS';

/** The region and account of an SQS queue URL on AWS (`https://sqs.<region>.amazonaws.com/<account>/<name>`). */
export function awsQueueUrl(url: string): { region: string; account: string } | undefined {
  try {
    const { hostname, pathname } = new URL(url);
    const host = /^sqs\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/.exec(hostname);
    const account = /^\/(\d{12})\//.exec(pathname);
    // The accounts emulators use are no AWS account (moto names AWS hosts in some of its URLs).
    if (!host?.[1] || !account?.[1] || EMULATOR_ACCOUNTS.has(account[1])) return undefined;
    return { region: host[1], account: account[1] };
  } catch {
    return undefined;
  }
}

/** The region the user gave: --region, else AWS_REGION, else AWS_DEFAULT_REGION. */
function explicitRegion(
  flags: TargetFlags,
  env: NodeJS.ProcessEnv,
): { region: string; from: string } | undefined {
  if (flags.region) return { region: flags.region, from: '--region' };
  if (env.AWS_REGION?.trim()) return { region: env.AWS_REGION.trim(), from: 'AWS_REGION' };
  if (env.AWS_DEFAULT_REGION?.trim())
    return { region: env.AWS_DEFAULT_REGION.trim(), from: 'AWS_DEFAULT_REGION' };
  return undefined;
}

/** The variables that would send the SDK's requests elsewhere than AWS (the SDK reads them itself). */
function endpointVariables(env: NodeJS.ProcessEnv): string[] {
  return Object.keys(env)
    .filter((k) => /^AWS_ENDPOINT_URL(_|$)/.test(k) && env[k]?.trim())
    .sort();
}

/**
 * Chooses the target, in order: --endpoint; --aws; AWS_ENDPOINT_URL; stack outputs (--outputs) that name
 * queues on AWS; the embedded emulator when it is running. Nothing else: with none of these the command
 * refuses (NO_TARGET_MESSAGE) instead of calling AWS. Sends no request anywhere (the emulator check
 * probes 127.0.0.1 only, and only when nothing before it chose).
 * @throws TargetError when nothing chose a target, or the choices contradict each other.
 */
export async function chooseTarget(
  flags: TargetFlags,
  env: NodeJS.ProcessEnv,
  facts: {
    /** The stack outputs' jobs queue URL, when --outputs was given. */
    readonly outputsQueueUrl?: string;
    readonly emulator: () => Promise<Pick<EmulatorStatus, 'mode' | 'running' | 'endpoint' | 'pid'>>;
  },
): Promise<TargetChoice> {
  const region = explicitRegion(flags, env);
  const localRegion = region?.region ?? 'us-east-1';
  if (flags.aws && flags.endpoint) throw new TargetError('both --aws and --endpoint given: choose one');
  if (flags.endpoint) {
    const endpoint = validUrl(flags.endpoint);
    return { kind: 'endpoint', endpoint, region: localRegion, why: '--endpoint' };
  }
  const onAws = facts.outputsQueueUrl === undefined ? undefined : awsQueueUrl(facts.outputsQueueUrl);
  if (flags.aws || onAws) {
    const variables = endpointVariables(env);
    if (variables.length > 0) {
      const why = flags.aws ? '--aws' : `--outputs ${flags.outputs} names queues on AWS`;
      throw new TargetError(
        `${why}, but ${variables.join(', ')} would send the requests to ${env[variables[0] ?? ''] ?? ''}: unset ${variables.length === 1 ? 'it' : 'them'} to act on AWS, or drop ${flags.aws ? '--aws' : '--outputs'}`,
      );
    }
  }
  if (flags.aws) {
    const chosen =
      region ?? (onAws ? { region: onAws.region, from: `--outputs ${flags.outputs}` } : undefined);
    if (!chosen) {
      throw new TargetError('--aws needs a region: pass --region <region> or set AWS_REGION');
    }
    return {
      kind: 'aws',
      endpoint: undefined,
      region: chosen.region,
      why: `--aws, region from ${chosen.from}; credentials: ${credentialSource(env)}`,
    };
  }
  const fromEnv = env.AWS_ENDPOINT_URL?.trim();
  if (fromEnv)
    return { kind: 'endpoint', endpoint: validUrl(fromEnv), region: localRegion, why: 'AWS_ENDPOINT_URL' };
  if (onAws) {
    if (flags.region && flags.region !== onAws.region) {
      throw new TargetError(
        `--outputs ${flags.outputs} names queues in ${onAws.region}, but --region is ${flags.region}: drop one`,
      );
    }
    return {
      kind: 'aws',
      endpoint: undefined,
      region: onAws.region,
      why: `--outputs ${flags.outputs} names queues of AWS account ${onAws.account}; credentials: ${credentialSource(env)}`,
    };
  }
  const status = await facts.emulator();
  const running = status.mode === 'embedded' && status.running;
  const refused =
    facts.outputsQueueUrl && outputsWithoutTarget(flags.outputs ?? '', facts.outputsQueueUrl, running);
  if (refused) throw new TargetError(refused);
  if (running) {
    return {
      kind: 'emulator',
      endpoint: status.endpoint,
      region: localRegion,
      why: `running${status.pid === undefined ? '' : `, pid ${status.pid}`}, started by leaseq; no --endpoint, AWS_ENDPOINT_URL or --aws`,
    };
  }
  throw new TargetError(NO_TARGET_MESSAGE);
}

/** The line every command prints first: which target, in which account and region, and why. */
export function describeTarget(target: Omit<Target, 'line' | 'close' | 'clients' | 'names'>): string {
  if (target.kind === 'aws') {
    return `target: AWS account ${target.account}, region ${target.region} (${target.why})`;
  }
  const what = target.kind === 'emulator' ? 'local emulator' : target.local ? 'local endpoint' : 'endpoint';
  return `target: ${what} ${endpointText(target.endpoint ?? '')}, account ${target.account}, region ${target.region} (${target.why})`;
}

/** Writes a line to stderr the way the CLI's notes look. */
function stderrNote(line: string): void {
  process.stderr.write(`leaseq: ${line}\n`);
}

/**
 * Resolves the deployment a command works on, checking that its queues exist, and prints the target
 * line (`log`). Refuses, before any request, when the user chose no target.
 */
export async function resolveTarget(
  flags: TargetFlags,
  env: NodeJS.ProcessEnv = process.env,
  log: (line: string) => void = stderrNote,
): Promise<Target> {
  const outputs = flags.outputs ? readOutputs(flags.outputs) : undefined;
  const choice = await chooseTarget(flags, env, {
    ...(outputs ? { outputsQueueUrl: outputs.JobsQueueUrl } : {}),
    emulator: () => emulatorStatus({ env }),
  });
  const { endpoint, region } = choice;
  if (endpoint) await assertHostResolves(endpoint);
  const warning = remoteEndpointWarning(endpoint, env); // before the first request
  if (warning) stderrNote(warning);
  const clients = targetClients(choice, env);
  try {
    // On AWS, who we are first: missing or expired credentials are reported as such.
    const caller = choice.kind === 'aws' ? await callerAccount(region, env) : undefined;
    const where = placeFor(endpoint ?? `AWS (${region})`, choice.why);
    const names = await resolveNames(clients, flags, outputs, endpoint, env, where);
    const queueAccount = /^arn:[^:]+:sqs:[^:]*:(\d+):/.exec(names.queueArn)?.[1];
    const account =
      caller === undefined
        ? (queueAccount ?? 'unknown')
        : caller === queueAccount || queueAccount === undefined
          ? caller
          : `${caller} (queues in account ${queueAccount})`;
    const resolved = { ...choice, account, local: isLocalEndpoint(endpoint) };
    const line = describeTarget(resolved);
    log(line);
    return { ...resolved, line, clients, names, close: () => destroyAwsClients(clients) };
  } catch (error) {
    destroyAwsClients(clients);
    throw error;
  }
}

async function resolveNames(
  clients: AwsClients,
  flags: TargetFlags,
  outputs: Outputs | undefined,
  endpoint: string | undefined,
  env: NodeJS.ProcessEnv,
  where: Place,
): Promise<TargetNames> {
  if (outputs) {
    const queueUrl = outputs.JobsQueueUrl;
    return {
      queueUrl,
      queueArn: await queueArn(clients, queueUrl, where),
      dlqUrl: outputs.DlqUrl,
      jobsTable: outputs.JobsTableName,
      leasesTable: outputs.LeasesTableName,
      source: { outputs },
    };
  }
  const prefix =
    flags.prefix ??
    env.LEASEQ_PREFIX ??
    defaultResourcePrefix(endpoint === undefined || !isLocalEndpoint(endpoint) ? 'dev' : DEFAULT_LOCAL_STAGE);
  const names = resourceNames(prefix, { fifo: env.LEASEQ_FIFO === 'true' });
  const queueUrl = await queueUrlOf(clients, names.queues.jobs, where);
  return {
    queueUrl,
    queueArn: await queueArn(clients, queueUrl, where),
    dlqUrl: await queueUrlOf(clients, names.queues.dlq, where),
    jobsTable: names.tables.jobs.name,
    leasesTable: names.tables.leases.name,
    source: { prefix },
  };
}

async function queueUrlOf(clients: AwsClients, name: string, where: Place): Promise<string> {
  try {
    const out = await clients.sqs.send(new GetQueueUrlCommand({ QueueName: name }));
    if (!out.QueueUrl) throw new TargetError(`queue ${name} has no URL at ${where.name}`);
    return out.QueueUrl;
  } catch (error) {
    if (isMissingQueue(error)) {
      throw new TargetError(
        `queue ${name} does not exist at ${where.name}: run \`npm start\` (local) or \`npx cdk deploy\`, or pass --prefix / --outputs`,
      );
    }
    throw unreachable(error, where);
  }
}

async function queueArn(clients: AwsClients, queueUrl: string, where: Place): Promise<string> {
  try {
    const out = await clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
    );
    return out.Attributes?.QueueArn ?? '';
  } catch (error) {
    if (isMissingQueue(error)) {
      throw new TargetError(
        `queue ${endpointText(queueUrl)} does not exist at ${where.name}: deploy it again, or pass the outputs of the deployment that has it`,
      );
    }
    throw unreachable(error, where);
  }
}

type Outputs = Record<Exclude<StackOutputKey, 'WorkerFunctionName'>, string> & Record<string, string>;

function readOutputs(file: string): Outputs {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    // JSON.parse quotes the start of the text: a key file given by mistake would be printed in part.
    const why =
      error instanceof SyntaxError
        ? `not valid JSON; write them with \`npx cdk deploy --outputs-file ${file}\``
        : error instanceof Error
          ? error.message
          : String(error);
    throw new TargetError(`cannot read stack outputs from ${file}: ${why}`);
  }
  // `cdk deploy --outputs-file` writes { "<StackName>": { "<OutputKey>": value } }; accept either level.
  const candidates = typeof raw === 'object' && raw !== null ? [raw, ...Object.values(raw)] : [];
  const found = candidates.find(
    (c): c is Record<string, string> => typeof c === 'object' && c !== null && 'JobsQueueUrl' in c,
  );
  const missing = STACK_OUTPUT_KEYS.filter((k) => k !== 'WorkerFunctionName' && !found?.[k]);
  if (!found || missing.length > 0) {
    throw new TargetError(
      `stack outputs in ${file} lack ${missing.join(', ')}; write them with \`npx cdk deploy --outputs-file ${file}\``,
    );
  }
  return found as Outputs;
}

function validUrl(value: string): string {
  try {
    new URL(value);
    return value;
  } catch {
    throw new TargetError(
      `endpoint ${JSON.stringify(endpointText(value))} is not a URL (expected e.g. http://127.0.0.1:4566)`,
    );
  }
}
