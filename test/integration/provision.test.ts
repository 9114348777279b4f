import {
  CreateTableCommand,
  DescribeContinuousBackupsCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  type QueueAttributeName,
  SetQueueAttributesCommand,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AwsClients, destroyAwsClients } from '../../shared/aws/clients.ts';
import {
  PROBLEM_AT_ATTRIBUTE,
  PROBLEM_SHARD_ATTRIBUTE,
  PROBLEMS_INDEX,
  PROBLEMS_PROJECTION,
} from '../../shared/core/contract/job-history.ts';
import { tablePhysicalName } from '../../shared/core/model/table.ts';
import { LocalProvisionError } from '../../shared/local/emulator-errors.ts';
import { type ProvisionResult, provisionLocal } from '../../shared/local/provision.ts';
import { type StackTemplate, synthesizedTemplate } from '../../shared/local/provision-template.ts';
import { resourceNames } from '../../shared/resources.ts';
import { testClients, uniqueName } from '../support/env.ts';

// The template is read here directly (not through provision-plan.ts) so the comparison is independent
// of the code under test.
interface QueueProps {
  readonly QueueName: string;
  readonly VisibilityTimeout?: number;
  readonly MessageRetentionPeriod?: number;
  readonly FifoQueue?: boolean;
  readonly SqsManagedSseEnabled?: boolean;
  readonly RedrivePolicy?: {
    deadLetterTargetArn: { 'Fn::GetAtt': [string, string] };
    maxReceiveCount: number;
  };
}

interface TableProps {
  readonly TableName: string;
  readonly KeySchema: { AttributeName: string; KeyType: string }[];
  readonly AttributeDefinitions: { AttributeName: string; AttributeType: string }[];
  readonly BillingMode: string;
  readonly TimeToLiveSpecification?: { AttributeName: string; Enabled: boolean };
  readonly PointInTimeRecoverySpecification?: { PointInTimeRecoveryEnabled: boolean };
}

function templateResources<T>(template: StackTemplate, type: string): [string, T][] {
  return Object.entries(template.Resources)
    .filter(([, r]) => r.Type === type)
    .map(([id, r]) => [id, r.Properties as T]);
}

async function queueAttributes(
  clients: AwsClients,
  name: string,
): Promise<Partial<Record<QueueAttributeName, string>>> {
  const { QueueUrl } = await clients.sqs.send(new GetQueueUrlCommand({ QueueName: name }));
  const answer = await clients.sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['All'] }));
  return answer.Attributes ?? {};
}

describe('Function: provisionLocal', () => {
  let clients: AwsClients;
  let prefix: string;
  let template: StackTemplate;
  let first: ProvisionResult;

  beforeAll(async () => {
    clients = testClients();
    prefix = uniqueName('prov');
    template = await synthesizedTemplate({ resourcePrefix: prefix });
    first = await provisionLocal({ clients, prefix });
  });

  afterAll(() => destroyAwsClients(clients));

  it('creates every queue and table of the template, named from the prefix', () => {
    // Prepare
    const names = resourceNames(prefix);
    const ledgerName = tablePhysicalName(prefix, 'ledger');
    const templateQueues = templateResources<QueueProps>(template, 'AWS::SQS::Queue').map(
      ([, p]) => p.QueueName,
    );
    const templateTables = templateResources<TableProps>(template, 'AWS::DynamoDB::Table').map(
      ([, p]) => p.TableName,
    );

    // Assess
    expect(first.queues.map((q) => q.name).sort()).toEqual(templateQueues.sort());
    expect(first.tables.map((t) => t.name).sort()).toEqual(templateTables.sort());
    expect(templateQueues.sort()).toEqual([names.queues.dlq, names.queues.jobs].sort());
    expect(templateTables.sort()).toEqual(
      [names.tables.jobs.name, names.tables.leases.name, ledgerName].sort(),
    );
    expect([...first.queues, ...first.tables].map((r) => r.action)).toEqual(Array(5).fill('created'));
  });

  it('gives each queue the template visibility timeout, retention and encryption', async () => {
    for (const [, props] of templateResources<QueueProps>(template, 'AWS::SQS::Queue')) {
      const attributes = await queueAttributes(clients, props.QueueName);
      expect(attributes.VisibilityTimeout, props.QueueName).toBe(String(props.VisibilityTimeout ?? 30));
      expect(attributes.MessageRetentionPeriod, props.QueueName).toBe(String(props.MessageRetentionPeriod));
      expect(attributes.SqsManagedSseEnabled, props.QueueName).toBe(String(props.SqsManagedSseEnabled));
    }
  });

  it('redrives the jobs queue to the template DLQ after maxReceiveCount', async () => {
    const queues = templateResources<QueueProps>(template, 'AWS::SQS::Queue');
    const withRedrive = queues.filter(([, p]) => p.RedrivePolicy !== undefined);
    expect(withRedrive).toHaveLength(1);

    for (const [, props] of withRedrive) {
      const redrive = props.RedrivePolicy;
      if (!redrive) throw new Error('unreachable');
      const [dlqId] = redrive.deadLetterTargetArn['Fn::GetAtt'];
      const dlq = queues.find(([id]) => id === dlqId)?.[1];
      if (!dlq) throw new Error(`template DLQ ${dlqId} not found`);

      const policy = JSON.parse((await queueAttributes(clients, props.QueueName)).RedrivePolicy ?? '{}') as {
        deadLetterTargetArn?: string;
        maxReceiveCount?: number | string;
      };
      expect(policy.deadLetterTargetArn).toBe((await queueAttributes(clients, dlq.QueueName)).QueueArn);
      expect(Number(policy.maxReceiveCount)).toBe(redrive.maxReceiveCount);
    }
  });

  it('gives each table the template key schema, billing mode and TTL attribute', async () => {
    for (const [, props] of templateResources<TableProps>(template, 'AWS::DynamoDB::Table')) {
      const { Table } = await clients.ddb.send(new DescribeTableCommand({ TableName: props.TableName }));
      const ttl = await clients.ddb.send(new DescribeTimeToLiveCommand({ TableName: props.TableName }));

      expect(Table?.KeySchema, props.TableName).toEqual(props.KeySchema);
      expect(Table?.AttributeDefinitions, props.TableName).toEqual(props.AttributeDefinitions);
      expect(Table?.BillingModeSummary?.BillingMode, props.TableName).toBe(props.BillingMode);
      if (props.TimeToLiveSpecification?.Enabled) {
        expect(ttl.TimeToLiveDescription, props.TableName).toMatchObject({
          TimeToLiveStatus: 'ENABLED',
          AttributeName: props.TimeToLiveSpecification.AttributeName,
        });
      } else {
        expect(ttl.TimeToLiveDescription?.TimeToLiveStatus ?? 'DISABLED', props.TableName).toBe('DISABLED');
      }
    }
  });

  it('turns on point-in-time recovery, or notes that the endpoint cannot', async () => {
    for (const [, props] of templateResources<TableProps>(template, 'AWS::DynamoDB::Table')) {
      expect(props.PointInTimeRecoverySpecification?.PointInTimeRecoveryEnabled).toBe(true);
      const noted = first.notes.some((note) => note.includes(props.TableName));
      if (!noted) {
        const answer = await clients.ddb.send(
          new DescribeContinuousBackupsCommand({ TableName: props.TableName }),
        );
        expect(
          answer.ContinuousBackupsDescription?.PointInTimeRecoveryDescription?.PointInTimeRecoveryStatus,
          props.TableName,
        ).toBe('ENABLED');
      }
    }
  });

  it('resolves the stack outputs to the provisioned queues and tables', async () => {
    const names = resourceNames(prefix);
    const ledgerName = tablePhysicalName(prefix, 'ledger');
    const jobsUrl = (await clients.sqs.send(new GetQueueUrlCommand({ QueueName: names.queues.jobs })))
      .QueueUrl;
    const dlqUrl = (await clients.sqs.send(new GetQueueUrlCommand({ QueueName: names.queues.dlq }))).QueueUrl;

    expect(first.outputs).toEqual({
      JobsQueueUrl: jobsUrl,
      JobsQueueName: names.queues.jobs,
      DlqUrl: dlqUrl,
      DlqName: names.queues.dlq,
      JobsTableName: names.tables.jobs.name,
      LeasesTableName: names.tables.leases.name,
      LedgerTableName: ledgerName,
    });
    expect(first.skipped.map((s) => s.type)).toContain('AWS::Lambda::Function');
  });

  it('is idempotent: a second run finds everything as the template wants it', async () => {
    // Prepare
    const before = await queueAttributes(clients, resourceNames(prefix).queues.jobs);

    // Act
    const second = await provisionLocal({ clients, prefix });

    // Assess
    expect([...second.queues, ...second.tables].map((r) => r.action)).toEqual(Array(5).fill('existing'));
    expect(second.outputs).toEqual(first.outputs);
    const after = await queueAttributes(clients, resourceNames(prefix).queues.jobs);
    expect(after.RedrivePolicy && JSON.parse(after.RedrivePolicy)).toEqual(
      before.RedrivePolicy && JSON.parse(before.RedrivePolicy),
    );
    expect(after.VisibilityTimeout).toBe(before.VisibilityTimeout);
  });

  it('puts a drifted queue attribute back to the template value', async () => {
    // Prepare
    const jobs = resourceNames(prefix).queues.jobs;
    const wanted = (await queueAttributes(clients, jobs)).VisibilityTimeout;
    await clients.sqs.send(
      new SetQueueAttributesCommand({
        QueueUrl: first.outputs.JobsQueueUrl,
        Attributes: { VisibilityTimeout: '7' },
      }),
    );

    // Act
    const again = await provisionLocal({ clients, prefix });

    // Assess
    expect(again.queues.find((q) => q.name === jobs)?.action).toBe('updated');
    expect((await queueAttributes(clients, jobs)).VisibilityTimeout).toBe(wanted);
  });

  it('provisions FIFO queues from a FIFO stack', async () => {
    const fifoPrefix = uniqueName('prov-fifo');
    const result = await provisionLocal({ clients, prefix: fifoPrefix, stackProps: { fifo: true } });
    const names = resourceNames(fifoPrefix, { fifo: true });

    expect(result.outputs.JobsQueueName).toBe(names.queues.jobs);
    for (const name of [names.queues.jobs, names.queues.dlq]) {
      expect((await queueAttributes(clients, name)).FifoQueue, name).toBe('true');
    }
  });

  it('gives the jobs table the sparse problems index with the contract key and projection', async () => {
    const { Table } = await clients.ddb.send(
      new DescribeTableCommand({ TableName: resourceNames(prefix).tables.jobs.name }),
    );
    const index = Table?.GlobalSecondaryIndexes?.find((i) => i.IndexName === PROBLEMS_INDEX);

    expect(index?.KeySchema).toEqual([
      { AttributeName: PROBLEM_SHARD_ATTRIBUTE, KeyType: 'HASH' },
      { AttributeName: PROBLEM_AT_ATTRIBUTE, KeyType: 'RANGE' },
    ]);
    expect(index?.Projection?.ProjectionType).toBe('INCLUDE');
    expect([...(index?.Projection?.NonKeyAttributes ?? [])].sort()).toEqual([...PROBLEMS_PROJECTION].sort());
    expect(index?.IndexStatus).toBe('ACTIVE');
  });

  it('adds the problems index to a jobs table made before it, and keeps the items', async () => {
    // Prepare: the jobs table as provisioning made it before the index existed, with an item in it.
    const oldPrefix = uniqueName('prov-gsi');
    const table = resourceNames(oldPrefix).tables.jobs.name;
    await clients.ddb.send(
      new CreateTableCommand({
        TableName: table,
        KeySchema: [{ AttributeName: 'dedupKey', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'dedupKey', AttributeType: 'S' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    await clients.ddb.send(
      new PutItemCommand({ TableName: table, Item: { dedupKey: { S: 'kept' }, status: { S: 'COMPLETED' } } }),
    );

    // Act
    const result = await provisionLocal({ clients, prefix: oldPrefix });

    // Assess
    expect(result.tables.find((t) => t.name === table)?.action).toBe('updated');
    const { Table } = await clients.ddb.send(new DescribeTableCommand({ TableName: table }));
    expect(Table?.GlobalSecondaryIndexes?.map((i) => [i.IndexName, i.IndexStatus])).toEqual([
      [PROBLEMS_INDEX, 'ACTIVE'],
    ]);
    const kept = await clients.ddb.send(
      new GetItemCommand({ TableName: table, Key: { dedupKey: { S: 'kept' } } }),
    );
    expect(kept.Item?.status?.S).toBe('COMPLETED');
    // A second run finds the index and changes nothing.
    const again = await provisionLocal({ clients, prefix: oldPrefix });
    expect(again.tables.find((t) => t.name === table)?.action).toBe('existing');
  });

  it('refuses an existing table whose key differs from the template', async () => {
    // Prepare
    const clashPrefix = uniqueName('prov-clash');
    await clients.ddb.send(
      new CreateTableCommand({
        TableName: resourceNames(clashPrefix).tables.jobs.name,
        KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );

    // Act + Assess
    await expect(provisionLocal({ clients, prefix: clashPrefix })).rejects.toThrow(LocalProvisionError);
    await expect(provisionLocal({ clients, prefix: clashPrefix })).rejects.toThrow(
      /exists with key id:HASH; the template wants dedupKey:HASH/,
    );
  });

  it('refuses an existing table whose key attribute has the name the template wants but another type', async () => {
    // Prepare: the jobs table's key named as leaseq names it, but a number where leaseq writes a string;
    // every claim against it would fail `key element does not match`.
    const clashPrefix = uniqueName('prov-type');
    const table = resourceNames(clashPrefix).tables.jobs.name;
    await clients.ddb.send(
      new CreateTableCommand({
        TableName: table,
        KeySchema: [{ AttributeName: 'dedupKey', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'dedupKey', AttributeType: 'N' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );

    // Act
    const outcome = await provisionLocal({ clients, prefix: clashPrefix }).then(
      (result) => result.tables.map((t) => `${t.name}: ${t.action}`),
      (error: unknown) => error,
    );

    // Assess
    expect(outcome, String(outcome)).toBeInstanceOf(LocalProvisionError);
    const message = (outcome as Error).message;
    expect(message).toContain(`table ${table}`);
    expect(message).toMatch(/key attribute dedupKey has type N; leaseq needs S/);
    expect(message).toMatch(/delete the table or use another prefix/);
    expect(message).not.toContain('\n');
  });
});
