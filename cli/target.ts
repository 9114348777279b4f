import { lookup } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { GetQueueAttributesCommand, GetQueueUrlCommand, QueueDoesNotExist } from '@aws-sdk/client-sqs';
import type { Command } from 'commander';
import {
  type AwsClients,
  awsConfigFromEnv,
  createAwsClients,
  destroyAwsClients,
  isLocalEndpoint,
} from '../shared/aws/clients.ts';
import type { JobRegistry } from '../shared/core/model/registry.ts';
import { tableOutputKey, tablePhysicalName } from '../shared/core/model/table.ts';
import { ConfigError } from '../shared/errors.ts';
import { emulatorStatus } from '../shared/local/emulator.ts';
import { DEFAULT_LOCAL_STAGE } from '../shared/local/provision-template.ts';
import {
  defaultResourcePrefix,
  resourceNames,
  STACK_OUTPUT_KEYS,
  type StackOutputKey,
} from '../shared/resources.ts';

/** Flags every command that talks to a deployment accepts. */
export interface TargetFlags {
  readonly endpoint?: string;
  readonly prefix?: string;
  readonly outputs?: string;
  readonly region?: string;
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

export interface Target {
  /** `undefined` means real AWS. */
  readonly endpoint: string | undefined;
  readonly clients: AwsClients;
  readonly names: TargetNames;
  readonly region: string;
  close(): void;
}

/** A problem the user fixes with a flag or a command; printed as one line. */
export class TargetError extends ConfigError {
  constructor(message: string) {
    super(message);
    this.name = 'TargetError';
  }
}

/** Adds --endpoint, --prefix, --outputs and --region to a command. */
export function targetOptions(command: Command): Command {
  return command
    .option(
      '--endpoint <url>',
      'AWS endpoint (default: AWS_ENDPOINT_URL, else the embedded emulator if running, else AWS)',
    )
    .option(
      '--prefix <prefix>',
      'resource name prefix (default: LEASEQ_PREFIX, else leaseq-local locally, leaseq-dev on AWS)',
    )
    .option('--outputs <file>', 'stack outputs JSON written by `cdk deploy --outputs-file`')
    .option('--region <region>', 'AWS region (default: AWS_REGION, else us-east-1)');
}

/**
 * Where the endpoint comes from, in order: --endpoint, AWS_ENDPOINT_URL, the embedded emulator when it
 * is running, else real AWS (no endpoint).
 */
export async function resolveEndpointFlag(
  flags: TargetFlags,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string | undefined> {
  if (flags.endpoint) return validUrl(flags.endpoint);
  if (env.AWS_ENDPOINT_URL?.trim()) return validUrl(env.AWS_ENDPOINT_URL.trim());
  const status = await emulatorStatus({ env });
  return status.mode === 'embedded' && status.running ? status.endpoint : undefined;
}

/** Resolves the deployment a command works on, checking that its queues exist. */
export async function resolveTarget(
  flags: TargetFlags,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Target> {
  const endpoint = await resolveEndpointFlag(flags, env);
  if (endpoint) await assertHostResolves(endpoint);
  const base = awsConfigFromEnv({ ...env, ...(flags.region ? { AWS_REGION: flags.region } : {}) });
  // A person waits at the prompt: an endpoint that accepts but never answers is reported in seconds.
  const clients = createAwsClients({
    ...base,
    ...(endpoint ? { endpoint } : {}),
    maxAttempts: 2,
    requestTimeoutMs: 5000,
    sqsRequestTimeoutMs: 5000,
  });
  try {
    const names = await resolveNames(clients, flags, endpoint, env);
    return { endpoint, clients, names, region: base.region, close: () => destroyAwsClients(clients) };
  } catch (error) {
    destroyAwsClients(clients);
    throw error;
  }
}

async function resolveNames(
  clients: AwsClients,
  flags: TargetFlags,
  endpoint: string | undefined,
  env: NodeJS.ProcessEnv,
): Promise<TargetNames> {
  const where = endpoint ?? 'AWS';
  if (flags.outputs) {
    const outputs = readOutputs(flags.outputs);
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

async function queueUrlOf(clients: AwsClients, name: string, where: string): Promise<string> {
  try {
    const out = await clients.sqs.send(new GetQueueUrlCommand({ QueueName: name }));
    if (!out.QueueUrl) throw new TargetError(`queue ${name} has no URL at ${where}`);
    return out.QueueUrl;
  } catch (error) {
    if (
      error instanceof QueueDoesNotExist ||
      (error instanceof Error && error.name.includes('NonExistentQueue'))
    ) {
      throw new TargetError(
        `queue ${name} does not exist at ${where}: run \`npm start\` (local) or \`npx cdk deploy\`, or pass --prefix / --outputs`,
      );
    }
    throw unreachable(error, where);
  }
}

async function queueArn(clients: AwsClients, queueUrl: string, where: string): Promise<string> {
  try {
    const out = await clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
    );
    return out.Attributes?.QueueArn ?? '';
  } catch (error) {
    throw unreachable(error, where);
  }
}

/**
 * A host name that does not resolve is reported as such, before the SDK would report something else
 * first (missing credentials for a non-local endpoint).
 */
async function assertHostResolves(endpoint: string): Promise<void> {
  const host = new URL(endpoint).hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) || host === 'localhost') return;
  try {
    await lookup(host);
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? String(error.code) : '';
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME') {
      throw new TargetError(
        `cannot reach ${endpoint}: the host ${host} does not resolve; check --endpoint or AWS_ENDPOINT_URL`,
      );
    }
  }
}

function unreachable(error: unknown, where: string): Error {
  if (error instanceof TargetError) return error;
  // The SDK got an answer it could not read as SQS: a web server, a proxy, another service's port.
  const response = (error as { $response?: { statusCode?: number } } | null)?.$response;
  if (
    response?.statusCode !== undefined &&
    error instanceof Error &&
    /Deserialization|not valid JSON|Unexpected token/.test(error.message)
  ) {
    return new TargetError(
      `${where} answered, but not like SQS (HTTP ${response.statusCode}); is it the right port? (the embedded emulator: \`npx leaseq local status\`)`,
    );
  }
  const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return new TargetError(
    `cannot reach ${where} (${detail}); start it with \`npx leaseq local up\` or check --endpoint`,
  );
}

type Outputs = Record<Exclude<StackOutputKey, 'WorkerFunctionName'>, string> & Record<string, string>;

function readOutputs(file: string): Outputs {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new TargetError(
      `cannot read stack outputs from ${file}: ${error instanceof Error ? error.message : error}`,
    );
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
      `endpoint ${JSON.stringify(value)} is not a URL (expected e.g. http://127.0.0.1:4566)`,
    );
  }
}
