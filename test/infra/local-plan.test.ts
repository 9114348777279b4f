import { describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import {
  PROBLEM_AT_ATTRIBUTE,
  PROBLEM_SHARD_ATTRIBUTE,
  PROBLEMS_INDEX,
  PROBLEMS_PROJECTION,
} from '../../shared/core/contract/job-history.ts';
import { tablePhysicalName } from '../../shared/core/model/table.ts';
import { defineJob, defineJobs } from '../../shared/jobs/define-job.ts';
import { LocalProvisionError } from '../../shared/local/emulator-errors.ts';
import { driftedQueueAttributes } from '../../shared/local/provision-apply.ts';
import { planFromTemplate } from '../../shared/local/provision-plan.ts';
import { type StackTemplate, synthesizedTemplate } from '../../shared/local/provision-template.ts';
import { REDRIVE_MARGIN, resourceNames, TTL_ATTRIBUTE } from '../../shared/resources.ts';

function withResource(template: StackTemplate, id: string, resource: StackTemplate['Resources'][string]) {
  return { ...template, Resources: { ...template.Resources, [id]: resource } };
}

describe('Function: synthesizedTemplate', () => {
  it('synthesizes the stack for the local stage by default, and caches it', async () => {
    // Act
    const template = await synthesizedTemplate();
    const again = await synthesizedTemplate({});

    // Assess
    const names = Object.values(template.Resources)
      .filter((r) => r.Type === 'AWS::SQS::Queue')
      .map((r) => r.Properties?.QueueName);
    expect(names.sort()).toEqual(
      [resourceNames('leaseq-local').queues.jobs, resourceNames('leaseq-local').queues.dlq].sort(),
    );
    expect(again).toBe(template);
  });

  it('synthesizes a separate template per prefix and props', async () => {
    const a = await synthesizedTemplate({ resourcePrefix: 'plan-a' });
    const b = await synthesizedTemplate({ resourcePrefix: 'plan-a', maxAttempts: 9 });
    expect(a).not.toBe(b);
    expect(JSON.stringify(b)).toContain(`"maxReceiveCount":${9 + REDRIVE_MARGIN}`);
  });

  it('synthesizes apart jobs with the same tables and different limits (the worker role differs)', async () => {
    // Without the disk store, so the in-process cache alone decides.
    vi.stubEnv('LEASEQ_SYNTH_CACHE', '0');
    try {
      const jobs = (limited: boolean) =>
        defineJobs([
          defineJob({
            type: 'limits.probe',
            payload: z.object({ tenant: z.string() }),
            ...(limited ? { concurrency: { limit: 2, key: (p: { tenant: string }) => p.tenant } } : {}),
            run: async () => ({}),
          }),
        ]);
      const open = await synthesizedTemplate({ resourcePrefix: 'plan-limits', jobs: jobs(false) });
      const limited = await synthesizedTemplate({ resourcePrefix: 'plan-limits', jobs: jobs(true) });
      expect(JSON.stringify(open)).not.toContain('dynamodb:BatchGetItem');
      expect(JSON.stringify(limited)).toContain('dynamodb:BatchGetItem');
    } finally {
      vi.unstubAllEnvs();
    }
  });
});

describe('Function: planFromTemplate', () => {
  it('plans the template queues (DLQ first) and tables with their attributes', async () => {
    // Prepare
    const template = await synthesizedTemplate({ resourcePrefix: 'plan' });
    const names = resourceNames('plan');
    const ledgerName = tablePhysicalName('plan', 'ledger');

    // Act
    const plan = planFromTemplate(template);

    // Assess
    expect(plan.queues.map((q) => q.name)).toEqual([names.queues.dlq, names.queues.jobs]);
    const [dlq, jobs] = plan.queues;
    expect(dlq?.attributes).toEqual({
      MessageRetentionPeriod: '1209600',
      MaximumMessageSize: '1048576',
      SqsManagedSseEnabled: 'true',
    });
    expect(jobs?.attributes).toMatchObject({
      VisibilityTimeout: '360',
      MessageRetentionPeriod: '345600',
      MaximumMessageSize: '1016064',
    });
    // The default maxAttempts (5) plus the safety margin.
    expect(jobs?.redrive).toEqual({
      deadLetterLogicalId: dlq?.logicalId,
      maxReceiveCount: 5 + REDRIVE_MARGIN,
    });

    const tables = Object.fromEntries(plan.tables.map((t) => [t.name, t]));
    expect(Object.keys(tables).sort()).toEqual(
      [names.tables.jobs.name, names.tables.leases.name, ledgerName].sort(),
    );
    expect(tables[names.tables.jobs.name]?.create).toMatchObject({
      KeySchema: [{ AttributeName: 'dedupKey', KeyType: 'HASH' }],
      AttributeDefinitions: [
        { AttributeName: 'dedupKey', AttributeType: 'S' },
        { AttributeName: PROBLEM_SHARD_ATTRIBUTE, AttributeType: 'S' },
        { AttributeName: PROBLEM_AT_ATTRIBUTE, AttributeType: 'N' },
      ],
      GlobalSecondaryIndexes: [
        {
          IndexName: PROBLEMS_INDEX,
          KeySchema: [
            { AttributeName: PROBLEM_SHARD_ATTRIBUTE, KeyType: 'HASH' },
            { AttributeName: PROBLEM_AT_ATTRIBUTE, KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...PROBLEMS_PROJECTION] },
        },
      ],
      BillingMode: 'PAY_PER_REQUEST',
      SSESpecification: { Enabled: true },
    });
    expect(tables[names.tables.leases.name]?.create.GlobalSecondaryIndexes).toBeUndefined();
    expect(tables[names.tables.jobs.name]?.ttlAttribute).toBe(TTL_ATTRIBUTE);
    expect(tables[names.tables.leases.name]?.ttlAttribute).toBe(TTL_ATTRIBUTE);
    expect(tables[ledgerName]?.ttlAttribute).toBeUndefined();
    expect(plan.tables.every((t) => t.pointInTimeRecovery)).toBe(true);
    expect(plan.skipped.map((s) => s.type)).toEqual(
      expect.arrayContaining([
        'AWS::Lambda::Function',
        'AWS::SQS::QueuePolicy',
        'AWS::IAM::Policy',
        'AWS::CloudWatch::Dashboard',
        'AWS::CloudWatch::Alarm',
      ]),
    );
  });

  it('plans FIFO queues', async () => {
    const plan = planFromTemplate(await synthesizedTemplate({ resourcePrefix: 'plan', fifo: true }));
    expect(plan.queues.map((q) => q.attributes.FifoQueue)).toEqual(['true', 'true']);
  });

  it('refuses a resource type it neither creates nor knowingly skips', async () => {
    const template = withResource(await synthesizedTemplate(), 'Topic', { Type: 'AWS::SNS::Topic' });
    expect(() => planFromTemplate(template)).toThrow(LocalProvisionError);
    expect(() => planFromTemplate(template)).toThrow(/Topic has type AWS::SNS::Topic/);
  });

  it('refuses a queue or table property it has no mapping for', async () => {
    const base = await synthesizedTemplate();
    const queue = withResource(base, 'Extra', {
      Type: 'AWS::SQS::Queue',
      Properties: { QueueName: 'x', KmsMasterKeyId: 'alias/custom' },
    });
    const table = withResource(base, 'Extra', {
      Type: 'AWS::DynamoDB::Table',
      Properties: {
        TableName: 'x',
        KeySchema: [{ AttributeName: 'k', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'k', AttributeType: 'S' }],
        LocalSecondaryIndexes: [],
      },
    });
    expect(() => planFromTemplate(queue)).toThrow(/Extra \(AWS::SQS::Queue\).*KmsMasterKeyId/s);
    expect(() => planFromTemplate(table)).toThrow(/Extra \(AWS::DynamoDB::Table\).*LocalSecondaryIndexes/s);
  });

  it('refuses a redrive target that is not a queue of the template', async () => {
    const template = withResource(await synthesizedTemplate(), 'Orphan', {
      Type: 'AWS::SQS::Queue',
      Properties: {
        QueueName: 'orphan',
        RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': ['Missing', 'Arn'] }, maxReceiveCount: 3 },
      },
    });
    expect(() => planFromTemplate(template)).toThrow(/Orphan redrives to Missing, which is not a queue/);
  });
});

describe('Function: driftedQueueAttributes', () => {
  it('compares redrive policies as JSON and treats a missing boolean as false', () => {
    const wanted = {
      RedrivePolicy: '{"deadLetterTargetArn":"arn:q","maxReceiveCount":8}',
      ContentBasedDeduplication: 'false',
      VisibilityTimeout: '360',
    };
    expect(
      driftedQueueAttributes(wanted, {
        RedrivePolicy: '{"deadLetterTargetArn": "arn:q", "maxReceiveCount": "8"}',
        VisibilityTimeout: '360',
      }),
    ).toEqual([]);
    expect(
      driftedQueueAttributes(wanted, {
        RedrivePolicy: '{"deadLetterTargetArn":"arn:q","maxReceiveCount":5}',
        VisibilityTimeout: '30',
      }),
    ).toEqual(['RedrivePolicy', 'VisibilityTimeout']);
  });
});
