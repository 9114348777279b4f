/**
 * Local provisioning: creates the queues and tables of the CDK stack on an emulator (or any endpoint).
 *
 * One source of truth: nothing here lists queues, tables, keys or attributes. The stack is synthesized
 * in-process (bundling skipped) and its template's `AWS::SQS::Queue` and `AWS::DynamoDB::Table`
 * resources are created as the template describes them. A template property or resource type with no
 * local mapping is an error, so a change to the stack cannot silently diverge locally.
 *
 * In three steps, one file each: read the template (provision-template.ts), translate it into a plan
 * (provision-plan.ts, pure), apply the plan (provision-apply.ts). This file runs them and resolves the
 * stack outputs against what was provisioned.
 *
 * Not provisioned locally, on purpose (see SKIPPED_TYPES in provision-plan.ts): the Lambda, its event
 * source mapping, IAM and its log group (local workers run the same handler in-process, poll the queue
 * themselves and log to stdout; emulators do not enforce IAM), the TLS-only queue policies (emulators
 * listen on plain HTTP on 127.0.0.1), and the CloudWatch dashboard and alarms (monitoring only).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import type { LeaseqStackProps } from '../../infra/leaseq-stack.ts';
import { tableOutputKey } from '../core/model/table.ts';
import { defaultResourcePrefix, STACK_OUTPUT_KEYS, type StackOutputKey } from '../resources.ts';
import { LocalProvisionError } from './emulator-errors.ts';
import {
  type ProvisionedQueue,
  type ProvisionedTable,
  provisionQueues,
  provisionTable,
} from './provision-apply.ts';
import { getAttSchema, type LocalPlan, planFromTemplate } from './provision-plan.ts';
import { DEFAULT_LOCAL_STAGE, synthesizedTemplate } from './provision-template.ts';

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
 * that exists is checked (a different key schema or key attribute type is an error, since the code would not work with it)
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
