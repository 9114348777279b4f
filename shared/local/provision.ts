/**
 * Local provisioning: creates the queues and tables of the CDK stack on an emulator (or any endpoint).
 *
 * One source of truth: nothing here lists queues, tables, keys or attributes. The stack is synthesized
 * in-process (bundling skipped) and its template's `AWS::SQS::Queue` and `AWS::DynamoDB::Table`
 * resources are created as the template describes them. A template property or resource type this
 * module has no mapping for is an error, so a change to the stack cannot silently diverge locally.
 *
 * Not provisioned locally, on purpose (see SKIPPED_TYPES): the Lambda, its event source mapping, IAM
 * and its log group (local workers run the same handler in-process, poll the queue themselves and log
 * to stdout; emulators do not enforce IAM), the TLS-only queue policies (emulators listen on plain
 * HTTP on 127.0.0.1), and the CloudWatch dashboard and alarms (monitoring only).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeContinuousBackupsCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
  ResourceInUseException,
  ResourceNotFoundException,
  UpdateContinuousBackupsCommand,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  type QueueAttributeName,
  QueueDoesNotExist,
  SetQueueAttributesCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { z } from 'zod';
import type { LeaseqStackProps } from '../../infra/leaseq-stack.ts';
import { tableOutputKey } from '../core/model/table.ts';
import { defaultResourcePrefix, STACK_OUTPUT_KEYS, type StackOutputKey } from '../resources.ts';
import { EmulatorError } from './emulator-errors.ts';

// ---------------------------------------------------------------------------------------------------
// Template

/** The parts of a synthesized CloudFormation template local provisioning reads. */
export interface StackTemplate {
  readonly Resources: Readonly<Record<string, TemplateResource>>;
  readonly Outputs?: Readonly<Record<string, { readonly Value: unknown; readonly Description?: string }>>;
}

export interface TemplateResource {
  readonly Type: string;
  readonly Properties?: Readonly<Record<string, unknown>>;
}

/** The stage local provisioning synthesizes when none is given. */
export const DEFAULT_LOCAL_STAGE = 'local';

const templateCache = new Map<string, Promise<StackTemplate>>();

/**
 * The CloudFormation template of `LeaseqStack` for these props, as `cdk synth` would produce it
 * (same cdk.json feature flags) but without bundling the worker. Cached per distinct props for the life
 * of the process; treat the result as read-only.
 *
 * @param stackProps stack props; `stage` defaults to {@link DEFAULT_LOCAL_STAGE}.
 */
export async function synthesizedTemplate(stackProps: LeaseqStackProps = {}): Promise<StackTemplate> {
  // aws-cdk-lib is loaded only when a template is needed (it takes a few hundred ms to import).
  const [{ resolveLeaseqStackProps, stackJobs }, { createLeaseqApp }] = await Promise.all([
    import('../../infra/leaseq-stack.ts'),
    import('../../infra/leaseq-app.ts'),
  ]).catch((error: unknown) => {
    // aws-cdk-lib is an optional peer dependency: a producer-only install does not have it.
    if (
      error instanceof Error &&
      /Cannot find (package|module) '(aws-cdk-lib|constructs)/.test(error.message)
    ) {
      throw new LocalProvisionError(
        'local provisioning synthesizes the CDK stack: install aws-cdk-lib and constructs (npm install aws-cdk-lib constructs)',
        { cause: error },
      );
    }
    throw error;
  });
  const props: LeaseqStackProps = { ...stackProps, stage: stackProps.stage ?? DEFAULT_LOCAL_STAGE };
  const settings = resolveLeaseqStackProps(props);
  const key = JSON.stringify({
    ...settings,
    // Jobs with the same types and tables give the same template (the entry is not part of it locally).
    jobs: stackJobs(props)
      .tables()
      .map((t) => JSON.stringify(t))
      .sort(),
    workerTimeout: settings.workerTimeout.toSeconds({ integral: false }),
    description: props.description,
  });
  let cached = templateCache.get(key);
  if (!cached) {
    cached = Promise.resolve().then(() => {
      const outdir = mkdtempSync(join(tmpdir(), 'leaseq-synth-'));
      try {
        const { app, stack } = createLeaseqApp({ stackProps: props, bundle: false, outdir });
        const template: unknown = app.synth().getStackByName(stack.stackName).template;
        return parseTemplate(template);
      } finally {
        rmSync(outdir, { recursive: true, force: true });
      }
    });
    templateCache.set(key, cached);
    cached.catch(() => templateCache.delete(key));
  }
  return cached;
}

const templateSchema = z.object({
  Resources: z.record(
    z.string(),
    z.object({ Type: z.string(), Properties: z.record(z.string(), z.unknown()).optional() }),
  ),
  Outputs: z
    .record(z.string(), z.object({ Value: z.unknown(), Description: z.string().optional() }))
    .optional(),
});

function parseTemplate(template: unknown): StackTemplate {
  const parsed = templateSchema.safeParse(template);
  if (!parsed.success) {
    throw new LocalProvisionError(
      `synthesized template is not a CloudFormation template: ${z.prettifyError(parsed.error)}`,
    );
  }
  return parsed.data;
}

// ---------------------------------------------------------------------------------------------------
// Plan: what the template asks for, in SDK terms (pure)

/** Resource types of the stack that are deliberately not created locally, with the reason. */
export const SKIPPED_TYPES: Readonly<Record<string, string>> = {
  'AWS::SQS::QueuePolicy':
    'TLS-only policy; emulators serve plain HTTP on 127.0.0.1 and do not enforce policies',
  'AWS::Lambda::Function': 'local workers run the same handler in-process',
  'AWS::Lambda::EventSourceMapping': 'local workers poll the queue themselves',
  'AWS::IAM::Role': 'emulators do not enforce IAM',
  'AWS::IAM::Policy': 'emulators do not enforce IAM',
  'AWS::Logs::LogGroup': 'local workers log to stdout',
  'AWS::CloudWatch::Dashboard': 'monitoring only; local workers report their metrics in-process',
  'AWS::CloudWatch::Alarm': 'monitoring only; nothing in the local loop reads alarms',
  'AWS::CDK::Metadata': 'CDK bookkeeping',
};

/** One queue to create: its attributes as SQS takes them, and the DLQ it redrives to (by logical id). */
export interface QueuePlan {
  readonly logicalId: string;
  readonly name: string;
  /** Attributes except RedrivePolicy (which needs the DLQ's ARN, known once the DLQ exists). */
  readonly attributes: Readonly<Partial<Record<QueueAttributeName, string>>>;
  readonly redrive?: { readonly deadLetterLogicalId: string; readonly maxReceiveCount: number };
}

/** One table to create, then configure (TTL, point-in-time recovery). */
export interface TablePlan {
  readonly logicalId: string;
  readonly name: string;
  readonly create: CreateTableCommandInput;
  readonly ttlAttribute?: string;
  readonly pointInTimeRecovery: boolean;
}

export interface LocalPlan {
  /** Queues in creation order: every dead-letter queue before the queues that redrive to it. */
  readonly queues: readonly QueuePlan[];
  readonly tables: readonly TablePlan[];
  /** Template outputs by key, as CloudFormation expressions (`Ref`, `Fn::GetAtt`) or literals. */
  readonly outputs: Readonly<Record<string, unknown>>;
  /** Resources not created locally, with the reason. */
  readonly skipped: readonly { readonly logicalId: string; readonly type: string; readonly reason: string }[];
}

const getAttSchema = z.strictObject({ 'Fn::GetAtt': z.tuple([z.string(), z.string()]) });
const int = z.number().int();

// Every property the stack may give a queue, mapped 1:1 to an SQS attribute (RedrivePolicy aside).
const queuePropsSchema = z.strictObject({
  QueueName: z.string(),
  VisibilityTimeout: int.optional(),
  MessageRetentionPeriod: int.optional(),
  DelaySeconds: int.optional(),
  MaximumMessageSize: int.optional(),
  ReceiveMessageWaitTimeSeconds: int.optional(),
  FifoQueue: z.boolean().optional(),
  ContentBasedDeduplication: z.boolean().optional(),
  DeduplicationScope: z.string().optional(),
  FifoThroughputLimit: z.string().optional(),
  SqsManagedSseEnabled: z.boolean().optional(),
  RedrivePolicy: z.strictObject({ deadLetterTargetArn: getAttSchema, maxReceiveCount: int }).optional(),
});

const keySchema = z.array(z.strictObject({ AttributeName: z.string(), KeyType: z.enum(['HASH', 'RANGE']) }));
const tablePropsSchema = z.strictObject({
  TableName: z.string(),
  KeySchema: keySchema,
  AttributeDefinitions: z.array(
    z.strictObject({ AttributeName: z.string(), AttributeType: z.enum(['S', 'N', 'B']) }),
  ),
  BillingMode: z.enum(['PAY_PER_REQUEST', 'PROVISIONED']).optional(),
  ProvisionedThroughput: z.strictObject({ ReadCapacityUnits: int, WriteCapacityUnits: int }).optional(),
  SSESpecification: z
    .strictObject({
      SSEEnabled: z.boolean(),
      SSEType: z.enum(['AES256', 'KMS']).optional(),
      KMSMasterKeyId: z.string().optional(),
    })
    .optional(),
  PointInTimeRecoverySpecification: z
    .strictObject({ PointInTimeRecoveryEnabled: z.boolean().optional() })
    .optional(),
  TimeToLiveSpecification: z.strictObject({ AttributeName: z.string(), Enabled: z.boolean() }).optional(),
  DeletionProtectionEnabled: z.boolean().optional(),
});

/**
 * Translates a stack template into the SQS and DynamoDB calls that recreate its queues and tables.
 * Pure. Throws {@link LocalProvisionError} for a resource type with no local decision, a property with
 * no local mapping, or a redrive target that is not a queue of the template.
 */
export function planFromTemplate(template: StackTemplate): LocalPlan {
  const queues: QueuePlan[] = [];
  const tables: TablePlan[] = [];
  const skipped: { logicalId: string; type: string; reason: string }[] = [];

  for (const [logicalId, resource] of Object.entries(template.Resources)) {
    if (resource.Type === 'AWS::SQS::Queue') {
      queues.push(planQueue(logicalId, parseProps(queuePropsSchema, logicalId, resource)));
    } else if (resource.Type === 'AWS::DynamoDB::Table') {
      tables.push(planTable(logicalId, parseProps(tablePropsSchema, logicalId, resource)));
    } else {
      const reason = SKIPPED_TYPES[resource.Type];
      if (reason === undefined) {
        throw new LocalProvisionError(
          `template resource ${logicalId} has type ${resource.Type}, which local provisioning neither ` +
            'creates nor knowingly skips; add it to shared/local/provision.ts',
        );
      }
      skipped.push({ logicalId, type: resource.Type, reason });
    }
  }

  const outputs: Record<string, unknown> = {};
  for (const [key, output] of Object.entries(template.Outputs ?? {})) outputs[key] = output.Value;
  return { queues: orderByRedrive(queues), tables, outputs, skipped };
}

function parseProps<T>(schema: z.ZodType<T>, logicalId: string, resource: TemplateResource): T {
  const parsed = schema.safeParse(resource.Properties ?? {});
  if (!parsed.success) {
    throw new LocalProvisionError(
      `template resource ${logicalId} (${resource.Type}) has properties local provisioning cannot map; ` +
        `extend shared/local/provision.ts: ${z.prettifyError(parsed.error)}`,
    );
  }
  return parsed.data;
}

function planQueue(logicalId: string, props: z.infer<typeof queuePropsSchema>): QueuePlan {
  const attributes: Partial<Record<QueueAttributeName, string>> = {};
  const set = (name: QueueAttributeName, value: number | boolean | string | undefined) => {
    if (value !== undefined) attributes[name] = String(value);
  };
  set('VisibilityTimeout', props.VisibilityTimeout);
  set('MessageRetentionPeriod', props.MessageRetentionPeriod);
  set('DelaySeconds', props.DelaySeconds);
  set('MaximumMessageSize', props.MaximumMessageSize);
  set('ReceiveMessageWaitTimeSeconds', props.ReceiveMessageWaitTimeSeconds);
  set('FifoQueue', props.FifoQueue);
  set('ContentBasedDeduplication', props.ContentBasedDeduplication);
  set('DeduplicationScope', props.DeduplicationScope);
  set('FifoThroughputLimit', props.FifoThroughputLimit);
  set('SqsManagedSseEnabled', props.SqsManagedSseEnabled);

  const redrive = props.RedrivePolicy;
  if (redrive) {
    const [target, attribute] = redrive.deadLetterTargetArn['Fn::GetAtt'];
    if (attribute !== 'Arn') {
      throw new LocalProvisionError(
        `queue ${logicalId} redrives to Fn::GetAtt ${target}.${attribute}; expected ${target}.Arn`,
      );
    }
    return {
      logicalId,
      name: props.QueueName,
      attributes,
      redrive: { deadLetterLogicalId: target, maxReceiveCount: redrive.maxReceiveCount },
    };
  }
  return { logicalId, name: props.QueueName, attributes };
}

function planTable(logicalId: string, props: z.infer<typeof tablePropsSchema>): TablePlan {
  const sse = props.SSESpecification;
  const create: CreateTableCommandInput = {
    TableName: props.TableName,
    KeySchema: props.KeySchema,
    AttributeDefinitions: props.AttributeDefinitions,
    BillingMode: props.BillingMode ?? 'PROVISIONED',
    ...(props.ProvisionedThroughput ? { ProvisionedThroughput: props.ProvisionedThroughput } : {}),
    ...(sse
      ? {
          SSESpecification: {
            Enabled: sse.SSEEnabled,
            ...(sse.SSEType ? { SSEType: sse.SSEType } : {}),
            ...(sse.KMSMasterKeyId ? { KMSMasterKeyId: sse.KMSMasterKeyId } : {}),
          },
        }
      : {}),
    ...(props.DeletionProtectionEnabled ? { DeletionProtectionEnabled: true } : {}),
  };
  const ttl = props.TimeToLiveSpecification;
  return {
    logicalId,
    name: props.TableName,
    create,
    ...(ttl?.Enabled ? { ttlAttribute: ttl.AttributeName } : {}),
    pointInTimeRecovery: props.PointInTimeRecoverySpecification?.PointInTimeRecoveryEnabled === true,
  };
}

function orderByRedrive(queues: QueuePlan[]): QueuePlan[] {
  const byId = new Map(queues.map((q) => [q.logicalId, q]));
  const ordered: QueuePlan[] = [];
  const visiting = new Set<string>();
  const visit = (queue: QueuePlan) => {
    if (ordered.includes(queue)) return;
    if (visiting.has(queue.logicalId)) {
      throw new LocalProvisionError(`queue ${queue.logicalId} is part of a redrive cycle`);
    }
    visiting.add(queue.logicalId);
    if (queue.redrive) {
      const target = byId.get(queue.redrive.deadLetterLogicalId);
      if (!target) {
        throw new LocalProvisionError(
          `queue ${queue.logicalId} redrives to ${queue.redrive.deadLetterLogicalId}, which is not a queue of the template`,
        );
      }
      visit(target);
    }
    ordered.push(queue);
  };
  for (const queue of queues) visit(queue);
  return ordered;
}

// ---------------------------------------------------------------------------------------------------
// Provision

/**
 * Error of local provisioning; the one-line message says what is wrong and what to do. An
 * {@link EmulatorError}, so the CLI reports it like the emulator manager's own errors.
 */
export class LocalProvisionError extends EmulatorError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { cause: options?.cause, retryable: false });
    this.name = 'LocalProvisionError';
  }
}

/** What provisioning did to a resource: made it, found it as the template wants it, or corrected it. */
export type ProvisionAction = 'created' | 'existing' | 'updated';

export interface ProvisionedQueue {
  readonly logicalId: string;
  readonly name: string;
  readonly url: string;
  readonly arn: string;
  readonly action: ProvisionAction;
}

export interface ProvisionedTable {
  readonly logicalId: string;
  readonly name: string;
  readonly arn: string;
  readonly action: ProvisionAction;
}

/**
 * The stack outputs that exist locally (there is no Lambda, so no `WorkerFunctionName`), plus one
 * `<Name>TableName` per application table.
 */
export type LocalOutputs = Readonly<Record<Exclude<StackOutputKey, 'WorkerFunctionName'>, string>> &
  Readonly<Record<string, string | undefined>>;

export interface ProvisionResult {
  readonly prefix: string;
  readonly queues: readonly ProvisionedQueue[];
  readonly tables: readonly ProvisionedTable[];
  readonly outputs: LocalOutputs;
  /** Physical names of the application tables of the stack's jobs, by logical table name. */
  readonly appTables: Readonly<Record<string, string>>;
  /** Things the endpoint did not support (e.g. point-in-time recovery on an emulator). */
  readonly notes: readonly string[];
  readonly skipped: LocalPlan['skipped'];
  readonly elapsedMs: number;
}

export interface ProvisionOptions {
  /** Clients pointed at the target endpoint (built by the caller, e.g. `createAwsClients`). */
  readonly clients: { readonly sqs: SQSClient; readonly ddb: DynamoDBClient };
  /**
   * Resource name prefix; overrides `stackProps.resourcePrefix`. Tests pass a unique one to get an
   * isolated copy. @default `leaseq-${stage}` (stage defaults to 'local')
   */
  readonly prefix?: string;
  /** Props of the stack whose template is provisioned. @default { stage: 'local' } */
  readonly stackProps?: LeaseqStackProps;
  /** Longest wait for a new table to become ACTIVE. @default 60 */
  readonly tableWaitSeconds?: number;
}

/**
 * Creates the stack's queues and tables at the clients' endpoint, as the synthesized template describes
 * them. Idempotent: a queue that exists gets its attributes set back to the template's values; a table
 * that exists is checked (a different key schema is an error, since the code would not work with it)
 * and gets TTL / point-in-time recovery turned on if they are off.
 */
export async function provisionLocal(options: ProvisionOptions): Promise<ProvisionResult> {
  const started = performance.now();
  const stackProps: LeaseqStackProps = {
    ...options.stackProps,
    ...(options.prefix !== undefined ? { resourcePrefix: options.prefix } : {}),
  };
  const template = await synthesizedTemplate(stackProps);
  const plan = planFromTemplate(template);
  const notes: string[] = [];

  const [queues, tables] = await Promise.all([
    provisionQueues(options.clients.sqs, plan.queues),
    Promise.all(
      plan.tables.map((table) =>
        provisionTable(options.clients.ddb, table, notes, options.tableWaitSeconds ?? 60),
      ),
    ),
  ]);

  const outputs = resolveOutputs(plan, queues, tables);
  const { stackJobs } = await import('../../infra/leaseq-stack.ts');
  const appTables: Record<string, string> = {};
  for (const table of stackJobs(stackProps).tables()) {
    const name = outputs[tableOutputKey(table.name)];
    if (!name) throw new LocalProvisionError(`stack output ${tableOutputKey(table.name)} is missing`);
    appTables[table.name] = name;
  }
  return {
    appTables,
    prefix: stackProps.resourcePrefix ?? defaultResourcePrefix(stackProps.stage ?? DEFAULT_LOCAL_STAGE),
    queues,
    tables,
    outputs,
    notes,
    skipped: plan.skipped,
    elapsedMs: Math.round(performance.now() - started),
  };
}

async function provisionQueues(sqs: SQSClient, plans: readonly QueuePlan[]): Promise<ProvisionedQueue[]> {
  const done = new Map<string, ProvisionedQueue>();
  for (const plan of plans) {
    const attributes: Partial<Record<QueueAttributeName, string>> = { ...plan.attributes };
    if (plan.redrive) {
      const target = done.get(plan.redrive.deadLetterLogicalId);
      if (!target)
        throw new LocalProvisionError(`dead-letter queue of ${plan.logicalId} was not provisioned first`);
      attributes.RedrivePolicy = JSON.stringify({
        deadLetterTargetArn: target.arn,
        maxReceiveCount: plan.redrive.maxReceiveCount,
      });
    }
    done.set(plan.logicalId, await provisionQueue(sqs, plan, attributes));
  }
  return [...done.values()];
}

async function provisionQueue(
  sqs: SQSClient,
  plan: QueuePlan,
  attributes: Partial<Record<QueueAttributeName, string>>,
): Promise<ProvisionedQueue> {
  let url = await existingQueueUrl(sqs, plan.name);
  let action: ProvisionAction = 'existing';
  if (url === undefined) {
    const created = await sqs.send(new CreateQueueCommand({ QueueName: plan.name, Attributes: attributes }));
    url = requireValue(created.QueueUrl, `CreateQueue ${plan.name} returned no QueueUrl`);
    action = 'created';
  } else {
    const current = await queueAttributes(sqs, url);
    const drift = driftedQueueAttributes(attributes, current);
    if (drift.includes('FifoQueue')) {
      throw new LocalProvisionError(
        `queue ${plan.name} exists with FifoQueue=${current.FifoQueue ?? 'false'}; the template wants ` +
          `${attributes.FifoQueue ?? 'false'} and SQS cannot change it: delete the queue or use another prefix`,
      );
    }
    if (drift.length > 0) {
      const update: Partial<Record<QueueAttributeName, string>> = {};
      for (const name of drift) update[name] = attributes[name] ?? '';
      await sqs.send(new SetQueueAttributesCommand({ QueueUrl: url, Attributes: update }));
      action = 'updated';
    }
  }
  const arn = requireValue((await queueAttributes(sqs, url)).QueueArn, `queue ${plan.name} has no QueueArn`);
  return { logicalId: plan.logicalId, name: plan.name, url, arn, action };
}

async function existingQueueUrl(sqs: SQSClient, name: string): Promise<string | undefined> {
  try {
    return (await sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl;
  } catch (error) {
    // Emulators answering the query protocol report the legacy error code.
    if (
      error instanceof QueueDoesNotExist ||
      (error instanceof Error && error.name === 'AWS.SimpleQueueService.NonExistentQueue')
    ) {
      return undefined;
    }
    throw error;
  }
}

async function queueAttributes(
  sqs: SQSClient,
  url: string,
): Promise<Partial<Record<QueueAttributeName, string>>> {
  const answer = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
  return answer.Attributes ?? {};
}

/** Names of the wanted attributes whose current value differs (RedrivePolicy compared as JSON). */
export function driftedQueueAttributes(
  wanted: Partial<Record<QueueAttributeName, string>>,
  current: Partial<Record<QueueAttributeName, string>>,
): QueueAttributeName[] {
  const drift: QueueAttributeName[] = [];
  for (const [name, value] of Object.entries(wanted) as [QueueAttributeName, string][]) {
    const have = current[name];
    const same =
      name === 'RedrivePolicy'
        ? have !== undefined && sameRedrivePolicy(value, have)
        : have === value || (have === undefined && value === 'false');
    if (!same) drift.push(name);
  }
  return drift;
}

function sameRedrivePolicy(wanted: string, current: string): boolean {
  const parse = (text: string) => {
    const policy = z
      .object({ deadLetterTargetArn: z.string(), maxReceiveCount: z.union([z.number(), z.string()]) })
      .safeParse(JSON.parse(text));
    return policy.success
      ? `${policy.data.deadLetterTargetArn}|${Number(policy.data.maxReceiveCount)}`
      : text;
  };
  return parse(wanted) === parse(current);
}

async function provisionTable(
  ddb: DynamoDBClient,
  plan: TablePlan,
  notes: string[],
  waitSeconds: number,
): Promise<ProvisionedTable> {
  let action: ProvisionAction = 'existing';
  let description = await describeTable(ddb, plan.name);
  if (description === undefined) {
    try {
      await ddb.send(new CreateTableCommand(plan.create));
      action = 'created';
    } catch (error) {
      // Someone else (a concurrent provisioning) created it between our describe and create.
      if (!(error instanceof ResourceInUseException)) throw error;
    }
    await waitUntilTableExists(
      { client: ddb, minDelay: 1, maxDelay: 2, maxWaitTime: waitSeconds },
      {
        TableName: plan.name,
      },
    );
    description = await describeTable(ddb, plan.name);
  }
  if (description === undefined)
    throw new LocalProvisionError(`table ${plan.name} vanished while provisioning`);
  if (action === 'existing') assertSameKeys(plan, description);

  if (
    plan.ttlAttribute !== undefined &&
    (await ensureTtl(ddb, plan.name, plan.ttlAttribute)) &&
    action === 'existing'
  ) {
    action = 'updated';
  }
  if (plan.pointInTimeRecovery) {
    const changed = await ensurePointInTimeRecovery(ddb, plan.name, notes);
    if (changed && action === 'existing') action = 'updated';
  }
  const arn = requireValue(description.TableArn, `table ${plan.name} has no TableArn`);
  return { logicalId: plan.logicalId, name: plan.name, arn, action };
}

type TableDescription = NonNullable<Awaited<ReturnType<typeof describeTableRaw>>['Table']>;

function describeTableRaw(ddb: DynamoDBClient, name: string) {
  return ddb.send(new DescribeTableCommand({ TableName: name }));
}

async function describeTable(ddb: DynamoDBClient, name: string): Promise<TableDescription | undefined> {
  try {
    return (await describeTableRaw(ddb, name)).Table;
  } catch (error) {
    if (error instanceof ResourceNotFoundException) return undefined;
    throw error;
  }
}

function assertSameKeys(plan: TablePlan, table: TableDescription): void {
  const key = (schema: readonly { AttributeName?: string; KeyType?: string }[] | undefined) =>
    (schema ?? []).map((k) => `${k.AttributeName}:${k.KeyType}`).join(',');
  const wanted = key(plan.create.KeySchema);
  const have = key(table.KeySchema);
  if (wanted !== have) {
    throw new LocalProvisionError(
      `table ${plan.name} exists with key ${have}; the template wants ${wanted}: delete the table or use another prefix`,
    );
  }
}

/** Turns TTL on with the template's attribute; returns true if it had to change something. */
async function ensureTtl(ddb: DynamoDBClient, table: string, attribute: string): Promise<boolean> {
  const current = (await ddb.send(new DescribeTimeToLiveCommand({ TableName: table }))).TimeToLiveDescription;
  const on = current?.TimeToLiveStatus === 'ENABLED' || current?.TimeToLiveStatus === 'ENABLING';
  if (on && current?.AttributeName === attribute) return false;
  if (on) {
    throw new LocalProvisionError(
      `table ${table} has TTL on attribute ${current?.AttributeName}; the template wants ${attribute}: delete the table or use another prefix`,
    );
  }
  await ddb.send(
    new UpdateTimeToLiveCommand({
      TableName: table,
      TimeToLiveSpecification: { AttributeName: attribute, Enabled: true },
    }),
  );
  return true;
}

/**
 * Turns point-in-time recovery on. Emulators may not implement it; that is recorded as a note rather
 * than failing, because nothing in leaseq's behaviour depends on backups.
 */
async function ensurePointInTimeRecovery(
  ddb: DynamoDBClient,
  table: string,
  notes: string[],
): Promise<boolean> {
  try {
    const current = await ddb.send(new DescribeContinuousBackupsCommand({ TableName: table }));
    const status =
      current.ContinuousBackupsDescription?.PointInTimeRecoveryDescription?.PointInTimeRecoveryStatus;
    if (status === 'ENABLED') return false;
    await ddb.send(
      new UpdateContinuousBackupsCommand({
        TableName: table,
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      }),
    );
    return true;
  } catch (error) {
    const name = error instanceof Error ? error.name : String(error);
    notes.push(`point-in-time recovery not enabled on ${table}: the endpoint answered ${name}`);
    return false;
  }
}

function resolveOutputs(
  plan: LocalPlan,
  queues: readonly ProvisionedQueue[],
  tables: readonly ProvisionedTable[],
): LocalOutputs {
  const queueById = new Map(queues.map((q) => [q.logicalId, q]));
  const tableById = new Map(tables.map((t) => [t.logicalId, t]));
  const resolve = (value: unknown): string | undefined => {
    if (typeof value === 'string') return value;
    const ref = z.strictObject({ Ref: z.string() }).safeParse(value);
    if (ref.success) return queueById.get(ref.data.Ref)?.url ?? tableById.get(ref.data.Ref)?.name;
    const getAtt = getAttSchema.safeParse(value);
    if (getAtt.success) {
      const [id, attribute] = getAtt.data['Fn::GetAtt'];
      const queue = queueById.get(id);
      const table = tableById.get(id);
      if (queue) return { Arn: queue.arn, QueueName: queue.name, QueueUrl: queue.url }[attribute];
      if (table) return { Arn: table.arn }[attribute];
    }
    return undefined; // refers to something not provisioned locally (the Lambda)
  };

  const resolved: Record<string, string> = {};
  for (const [key, value] of Object.entries(plan.outputs)) {
    const text = resolve(value);
    if (text !== undefined) resolved[key] = text;
  }
  const required = STACK_OUTPUT_KEYS.filter(
    (key): key is Exclude<StackOutputKey, 'WorkerFunctionName'> => key !== 'WorkerFunctionName',
  );
  const missing = required.filter((key) => resolved[key] === undefined);
  if (missing.length > 0) {
    throw new LocalProvisionError(
      `stack outputs ${missing.join(', ')} do not resolve to a local queue or table`,
    );
  }
  return resolved as LocalOutputs;
}

function requireValue<T>(value: T | undefined, message: string): T {
  if (value === undefined) throw new LocalProvisionError(message);
  return value;
}
