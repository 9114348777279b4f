/**
 * Applying a local plan: creates each planned queue and table at an endpoint, or brings an existing one
 * back to what the template says (queue attributes, TTL, point-in-time recovery). Where SQS or DynamoDB
 * cannot change a property in place (FIFO-ness, a key schema), it refuses rather than half-provisioning.
 */
import {
  CreateTableCommand,
  DescribeContinuousBackupsCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
  ResourceInUseException,
  ResourceNotFoundException,
  UpdateContinuousBackupsCommand,
  UpdateTableCommand,
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
import { LocalProvisionError } from './emulator-errors.ts';
import { sleep } from './process.ts';
import type { QueuePlan, TablePlan } from './provision-plan.ts';

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

/** Creates or corrects the planned queues in order, so each DLQ's ARN is known before its redrive policy. */
export async function provisionQueues(
  sqs: SQSClient,
  plans: readonly QueuePlan[],
): Promise<ProvisionedQueue[]> {
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

/** Creates the planned table or checks the existing one, then turns on TTL and point-in-time recovery. */
export async function provisionTable(
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
  if (action === 'existing') {
    assertSameKeys(plan, description);
    if (await ensureIndexes(ddb, plan, description, notes, waitSeconds)) action = 'updated';
  }

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

/**
 * Refuses a table whose key differs from the template's: in names and roles, and in each key attribute's
 * type (a `dedupKey` of type N fails every claim with `key element does not match`). DynamoDB cannot
 * change a key in place, so the only fixes are a new table or another name.
 */
function assertSameKeys(plan: TablePlan, table: TableDescription): void {
  const key = (schema: readonly { AttributeName?: string; KeyType?: string }[] | undefined) =>
    (schema ?? []).map((k) => `${k.AttributeName}:${k.KeyType}`).join(',');
  const wanted = key(plan.create.KeySchema);
  const have = key(table.KeySchema);
  const fix = 'delete the table or use another prefix';
  if (wanted !== have) {
    throw new LocalProvisionError(
      `table ${plan.name} exists with key ${have}; the template wants ${wanted}: ${fix}`,
    );
  }
  const typeOf = (
    definitions: readonly { AttributeName?: string; AttributeType?: string }[] | undefined,
    name: string | undefined,
  ) => definitions?.find((d) => d.AttributeName === name)?.AttributeType ?? 'unknown';
  for (const { AttributeName: name } of plan.create.KeySchema ?? []) {
    const needed = typeOf(plan.create.AttributeDefinitions, name);
    const found = typeOf(table.AttributeDefinitions, name);
    if (needed !== found) {
      throw new LocalProvisionError(
        `table ${plan.name} exists, but its key attribute ${name} has type ${found}; leaseq needs ${needed}: ${fix}`,
      );
    }
  }
}

/**
 * Adds each global secondary index of the template that an existing table lacks (a table made before the
 * index was), one at a time as DynamoDB requires, and waits until it is ACTIVE (its backfill done). An
 * index of the same name with another key is refused: DynamoDB cannot change an index's key in place.
 * Returns true if it added one.
 */
async function ensureIndexes(
  ddb: DynamoDBClient,
  plan: TablePlan,
  table: TableDescription,
  notes: string[],
  waitSeconds: number,
): Promise<boolean> {
  let added = false;
  const key = (schema: readonly { AttributeName?: string; KeyType?: string }[] | undefined) =>
    (schema ?? []).map((k) => `${k.AttributeName}:${k.KeyType}`).join(',');
  for (const index of plan.create.GlobalSecondaryIndexes ?? []) {
    const found = table.GlobalSecondaryIndexes?.find((i) => i.IndexName === index.IndexName);
    if (found) {
      if (key(found.KeySchema) !== key(index.KeySchema)) {
        throw new LocalProvisionError(
          `table ${plan.name} has index ${index.IndexName} with key ${key(found.KeySchema)}; the template wants ` +
            `${key(index.KeySchema)}: delete the index or the table`,
        );
      }
      continue;
    }
    const names = new Set((index.KeySchema ?? []).map((k) => k.AttributeName));
    await ddb.send(
      new UpdateTableCommand({
        TableName: plan.name,
        AttributeDefinitions: (plan.create.AttributeDefinitions ?? []).filter((d) =>
          names.has(d.AttributeName),
        ),
        GlobalSecondaryIndexUpdates: [
          {
            Create: {
              IndexName: index.IndexName,
              KeySchema: index.KeySchema,
              Projection: index.Projection,
              ...(index.ProvisionedThroughput ? { ProvisionedThroughput: index.ProvisionedThroughput } : {}),
            },
          },
        ],
      }),
    );
    await waitForIndex(ddb, plan.name, index.IndexName ?? '', waitSeconds);
    notes.push(`table ${plan.name}: added index ${index.IndexName} (the table predates it)`);
    added = true;
  }
  return added;
}

async function waitForIndex(ddb: DynamoDBClient, table: string, index: string, waitSeconds: number) {
  const deadline = Date.now() + waitSeconds * 1000;
  for (;;) {
    const found = (await describeTable(ddb, table))?.GlobalSecondaryIndexes?.find(
      (i) => i.IndexName === index,
    );
    if (found?.IndexStatus === 'ACTIVE') return;
    if (Date.now() > deadline) {
      throw new LocalProvisionError(
        `index ${index} of table ${table} is not ACTIVE after ${waitSeconds} s (status ${found?.IndexStatus ?? 'absent'})`,
      );
    }
    await sleep(1000);
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

function requireValue<T>(value: T | undefined, message: string): T {
  if (value === undefined) throw new LocalProvisionError(message);
  return value;
}
