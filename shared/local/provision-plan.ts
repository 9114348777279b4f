/**
 * The plan of local provisioning: the stack template translated into the SQS and DynamoDB calls that
 * recreate its queues and tables (pure, no I/O). A template property or resource type with no mapping
 * here is an error, so a change to the stack cannot silently diverge locally.
 */
import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import type { QueueAttributeName } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import { LocalProvisionError } from './emulator-errors.ts';
import type { StackTemplate, TemplateResource } from './provision-template.ts';

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

/** A CloudFormation `Fn::GetAtt` [logicalId, attribute]; outputs use it too. */
export const getAttSchema = z.strictObject({ 'Fn::GetAtt': z.tuple([z.string(), z.string()]) });
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
  // Which queues may use this one as their DLQ (AWS enforces it). Not applied locally: its source ARNs are
  // joins of pseudo parameters this plan does not resolve, and the emulator does not enforce the policy.
  RedriveAllowPolicy: z.unknown().optional(),
});

const keySchema = z.array(z.strictObject({ AttributeName: z.string(), KeyType: z.enum(['HASH', 'RANGE']) }));
const indexSchema = z.strictObject({
  IndexName: z.string(),
  KeySchema: keySchema,
  Projection: z.strictObject({
    ProjectionType: z.enum(['ALL', 'KEYS_ONLY', 'INCLUDE']),
    NonKeyAttributes: z.array(z.string()).optional(),
  }),
});
const tablePropsSchema = z.strictObject({
  TableName: z.string(),
  KeySchema: keySchema,
  GlobalSecondaryIndexes: z.array(indexSchema).optional(),
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
            'creates nor knowingly skips; add it to shared/local/provision-plan.ts',
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
        `extend shared/local/provision-plan.ts: ${z.prettifyError(parsed.error)}`,
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
    ...(props.GlobalSecondaryIndexes ? { GlobalSecondaryIndexes: props.GlobalSecondaryIndexes } : {}),
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
