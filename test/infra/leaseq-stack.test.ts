import { Duration, Token } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  DEAD_LETTER_ATTRIBUTES_RESERVE_BYTES,
  RESEND_ATTRIBUTES_RESERVE_BYTES,
} from '../../infra/constructs/job-queue.ts';
import { WORKER_QUEUE_ACTIONS, WORKER_TABLE_ACTIONS } from '../../infra/constructs/worker-function.ts';
import { createLeaseqApp } from '../../infra/leaseq-app.ts';
import {
  InvalidLeaseqStackPropsError,
  type LeaseqStack,
  type LeaseqStackProps,
} from '../../infra/leaseq-stack.ts';
import { deadLetterAttributes } from '../../shared/core/adapters/sqs-job-queue.ts';
import {
  PROBLEM_AT_ATTRIBUTE,
  PROBLEM_SHARD_ATTRIBUTE,
  PROBLEMS_INDEX,
  PROBLEMS_PROJECTION,
} from '../../shared/core/contract/job-history.ts';
import { defineJob, defineJobs } from '../../shared/jobs/define-job.ts';
import { REDRIVE_MARGIN, STACK_OUTPUT_KEYS, TTL_ATTRIBUTE, WORKER_ENV } from '../../shared/resources.ts';

interface CfnResource {
  readonly Type: string;
  readonly Properties: Record<string, unknown>;
  readonly DeletionPolicy?: string;
  readonly UpdateReplacePolicy?: string;
}

interface PolicyStatement {
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: unknown;
  readonly Condition?: unknown;
}

// Synthesis without bundling: these tests read the template only (one test in cdk-synth.test.ts bundles).
const cache = new Map<string, { stack: LeaseqStack; template: Template }>();
function synth(stackProps: LeaseqStackProps = {}): { stack: LeaseqStack; template: Template } {
  const key = JSON.stringify(stackProps, (_k, v: unknown) => (v instanceof Duration ? v.toString() : v));
  let entry = cache.get(key);
  if (!entry) {
    const { stack } = createLeaseqApp({ stackProps, bundle: false });
    entry = { stack, template: Template.fromStack(stack) };
    cache.set(key, entry);
  }
  return entry;
}

function resources(template: Template, type: string): Record<string, CfnResource> {
  return template.findResources(type) as Record<string, CfnResource>;
}

function only(template: Template, type: string, props: Record<string, unknown> = {}): [string, CfnResource] {
  const found = template.findResources(type, { Properties: props }) as Record<string, CfnResource>;
  const entries = Object.entries(found);
  expect(entries, `exactly one ${type} matching ${JSON.stringify(props)}`).toHaveLength(1);
  const first = entries[0];
  if (!first) throw new Error('unreachable');
  return first;
}

function queue(template: Template, name: string): [string, CfnResource] {
  return only(template, 'AWS::SQS::Queue', { QueueName: name });
}

function table(template: Template, name: string): [string, CfnResource] {
  return only(template, 'AWS::DynamoDB::Table', { TableName: name });
}

function workerFunction(template: Template): CfnResource {
  return only(template, 'AWS::Lambda::Function')[1];
}

function envOf(template: Template): Record<string, unknown> {
  const environment = workerFunction(template).Properties.Environment as {
    Variables: Record<string, unknown>;
  };
  return environment.Variables;
}

function statements(template: Template): PolicyStatement[] {
  return Object.values(resources(template, 'AWS::IAM::Policy')).flatMap(
    (policy) => (policy.Properties.PolicyDocument as { Statement: PolicyStatement[] }).Statement,
  );
}

function actionsOf(statement: PolicyStatement): string[] {
  return Array.isArray(statement.Action) ? statement.Action : [statement.Action];
}

/** Statements whose Resource is exactly `Fn::GetAtt [logicalId, 'Arn']` (alone or in a list). */
function statementsOn(template: Template, logicalId: string): PolicyStatement[] {
  const target = JSON.stringify({ 'Fn::GetAtt': [logicalId, 'Arn'] });
  return statements(template).filter((s) => {
    const list = Array.isArray(s.Resource) ? s.Resource : [s.Resource];
    return list.some((r) => JSON.stringify(r) === target);
  });
}

const getAtt = (logicalId: string, attribute: string) => ({ 'Fn::GetAtt': [logicalId, attribute] });

describe('Class: LeaseqStack', () => {
  describe('Queues', () => {
    it('encrypts both queues with SQS-managed SSE', () => {
      // Prepare
      const { template } = synth();

      // Act
      const [, jobs] = queue(template, 'leaseq-dev-jobs');
      const [, dlq] = queue(template, 'leaseq-dev-jobs-dlq');

      // Assess
      expect(jobs.Properties.SqsManagedSseEnabled).toBe(true);
      expect(dlq.Properties.SqsManagedSseEnabled).toBe(true);
      expect(jobs.Properties.KmsMasterKeyId).toBeUndefined();
    });

    it('denies non-TLS access to each queue with a queue policy', () => {
      const { template } = synth();
      for (const name of ['leaseq-dev-jobs', 'leaseq-dev-jobs-dlq']) {
        const [id] = queue(template, name);
        template.hasResourceProperties('AWS::SQS::QueuePolicy', {
          Queues: [{ Ref: id }],
          PolicyDocument: {
            Statement: Match.arrayWith([
              Match.objectLike({
                Effect: 'Deny',
                Action: 'sqs:*',
                Principal: { AWS: '*' },
                Condition: { Bool: { 'aws:SecureTransport': 'false' } },
                Resource: getAtt(id, 'Arn'),
              }),
            ]),
          },
        });
      }
    });

    it.each([
      { workerTimeout: undefined, expectedTimeout: 60 },
      { workerTimeout: Duration.seconds(120), expectedTimeout: 120 },
      { workerTimeout: Duration.minutes(15), expectedTimeout: 900 },
    ])(
      'sets visibility >= 6x the worker timeout ($expectedTimeout s)',
      ({ workerTimeout, expectedTimeout }) => {
        const { template } = synth(workerTimeout ? { workerTimeout } : {});
        const timeout = workerFunction(template).Properties.Timeout;
        const [, jobs] = queue(template, 'leaseq-dev-jobs');

        expect(timeout).toBe(expectedTimeout);
        expect(jobs.Properties.VisibilityTimeout).toBeGreaterThanOrEqual(6 * expectedTimeout);
      },
    );

    it('keeps dead letters 14 days, longer than the jobs queue keeps messages', () => {
      const { template } = synth();
      const [, jobs] = queue(template, 'leaseq-dev-jobs');
      const [, dlq] = queue(template, 'leaseq-dev-jobs-dlq');

      expect(dlq.Properties.MessageRetentionPeriod).toBe(14 * 24 * 3600);
      expect(Number(jobs.Properties.MessageRetentionPeriod)).toBeLessThan(14 * 24 * 3600);
      expect(dlq.Properties.RedrivePolicy).toBeUndefined();
    });

    it.each([false, true])(
      'sizes the queues so that any job message fits into the DLQ with its reason attributes (fifo: %s)',
      (fifo) => {
        const { template } = synth(fifo ? { fifo } : {});
        const [, jobs] = queue(template, fifo ? 'leaseq-dev-jobs.fifo' : 'leaseq-dev-jobs');
        const [, dlq] = queue(template, fifo ? 'leaseq-dev-jobs-dlq.fifo' : 'leaseq-dev-jobs-dlq');

        // The DLQ takes the SQS maximum (1 MiB); the jobs queue that less the attributes' reserve, plus
        // room for a limit's re-send of the largest body (its origin attribute).
        expect(dlq.Properties.MaximumMessageSize).toBe(1_048_576);
        expect(jobs.Properties.MaximumMessageSize).toBe(
          1_048_576 - DEAD_LETTER_ATTRIBUTES_RESERVE_BYTES + RESEND_ATTRIBUTES_RESERVE_BYTES,
        );
      },
    );

    it.each([false, true])(
      'lets only the jobs queue use the DLQ as dead-letter target (fifo: %s)',
      (fifo) => {
        const { template } = synth(fifo ? { fifo } : {});
        const name = fifo ? 'leaseq-dev-jobs.fifo' : 'leaseq-dev-jobs';
        const [, dlq] = queue(template, fifo ? 'leaseq-dev-jobs-dlq.fifo' : 'leaseq-dev-jobs-dlq');

        expect(dlq.Properties.RedriveAllowPolicy).toEqual({
          redrivePermission: 'byQueue',
          sourceQueueArns: [
            {
              'Fn::Join': [
                '',
                [
                  'arn:',
                  { Ref: 'AWS::Partition' },
                  ':sqs:',
                  { Ref: 'AWS::Region' },
                  ':',
                  { Ref: 'AWS::AccountId' },
                  `:${name}`,
                ],
              ],
            },
          ],
        });
      },
    );

    it('keeps a reserve that holds the largest reason attributes a dead letter can carry', () => {
      // SQS counts each attribute's name, data type and value (UTF-8). The worst case: every string at
      // the 1024-character cut, each character 3 bytes of UTF-8.
      const long = '\u20ac'.repeat(5000);
      const attributes = deadLetterAttributes({
        reason: long,
        errorClass: long,
        errorMessage: long,
        attempts: Number.MAX_SAFE_INTEGER,
        dedupKey: long,
        worker: long,
        messageId: long,
        type: long,
      });
      const bytes = Object.entries(attributes).reduce(
        (sum, [name, value]) =>
          sum +
          Buffer.byteLength(name) +
          Buffer.byteLength(value.DataType ?? '') +
          Buffer.byteLength(value.StringValue ?? ''),
        0,
      );

      expect(Object.keys(attributes)).toHaveLength(9);
      expect(bytes).toBeGreaterThan(20 * 1024);
      expect(bytes).toBeLessThanOrEqual(DEAD_LETTER_ATTRIBUTES_RESERVE_BYTES);
    });

    it.each([undefined, 1, 8])('redrives to the DLQ above maxAttempts=%s, as a safety net', (maxAttempts) => {
      const { template } = synth(maxAttempts ? { maxAttempts } : {});
      const [dlqId] = queue(template, 'leaseq-dev-jobs-dlq');
      const [, jobs] = queue(template, 'leaseq-dev-jobs');
      const attempts = Number(envOf(template)[WORKER_ENV.maxAttempts]);

      expect(attempts).toBe(maxAttempts ?? 5);
      expect(jobs.Properties.RedrivePolicy).toEqual({
        deadLetterTargetArn: getAtt(dlqId, 'Arn'),
        maxReceiveCount: attempts + REDRIVE_MARGIN,
      });
      expect(attempts + REDRIVE_MARGIN).toBeGreaterThan(attempts);
    });

    it('makes both queues FIFO with .fifo names when fifo is set', () => {
      const { template } = synth({ fifo: true });
      const [dlqId, dlq] = queue(template, 'leaseq-dev-jobs-dlq.fifo');
      const [, jobs] = queue(template, 'leaseq-dev-jobs.fifo');

      expect(jobs.Properties.FifoQueue).toBe(true);
      expect(dlq.Properties.FifoQueue).toBe(true);
      expect(jobs.Properties.RedrivePolicy).toMatchObject({ deadLetterTargetArn: getAtt(dlqId, 'Arn') });
      expect(Object.keys(resources(template, 'AWS::SQS::Queue'))).toHaveLength(2);
    });

    it('names the queues from resourcePrefix', () => {
      const { template } = synth({ resourcePrefix: 'acme-test' });
      queue(template, 'acme-test-jobs');
      queue(template, 'acme-test-jobs-dlq');
    });
  });

  describe('Tables', () => {
    const tables = [
      { name: 'leaseq-dev-jobs', key: 'dedupKey', ttl: true },
      { name: 'leaseq-dev-leases', key: 'leaseKey', ttl: true },
      { name: 'leaseq-dev-ledger', key: 'account', ttl: false },
    ];

    it('creates exactly the three tables as AWS::DynamoDB::Table (no GlobalTable)', () => {
      const { template } = synth();
      const names = Object.values(resources(template, 'AWS::DynamoDB::Table')).map(
        (t) => t.Properties.TableName,
      );
      expect(names.sort()).toEqual(tables.map((t) => t.name).sort());
      template.resourceCountIs('AWS::DynamoDB::GlobalTable', 0);
    });

    it.each(tables)('$name: string partition key $key, no sort key', ({ name, key }) => {
      const [, t] = table(synth().template, name);
      expect(t.Properties.KeySchema).toEqual([{ AttributeName: key, KeyType: 'HASH' }]);
      expect(t.Properties.AttributeDefinitions).toContainEqual({ AttributeName: key, AttributeType: 'S' });
    });

    it('leaseq-dev-jobs: the sparse problems index, keyed by shard and last problem, with the contract projection', () => {
      const [, t] = table(synth().template, 'leaseq-dev-jobs');
      expect(t.Properties.AttributeDefinitions).toEqual(
        expect.arrayContaining([
          { AttributeName: PROBLEM_SHARD_ATTRIBUTE, AttributeType: 'S' },
          { AttributeName: PROBLEM_AT_ATTRIBUTE, AttributeType: 'N' },
        ]),
      );
      expect(t.Properties.GlobalSecondaryIndexes).toEqual([
        {
          IndexName: PROBLEMS_INDEX,
          KeySchema: [
            { AttributeName: PROBLEM_SHARD_ATTRIBUTE, KeyType: 'HASH' },
            { AttributeName: PROBLEM_AT_ATTRIBUTE, KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...PROBLEMS_PROJECTION] },
        },
      ]);
      for (const other of ['leaseq-dev-leases', 'leaseq-dev-ledger']) {
        expect(table(synth().template, other)[1].Properties.GlobalSecondaryIndexes).toBeUndefined();
      }
    });

    it.each(tables)('$name: on demand, PITR, AWS-managed encryption', ({ name }) => {
      const [, t] = table(synth().template, name);
      expect(t.Properties.BillingMode).toBe('PAY_PER_REQUEST');
      expect(t.Properties.ProvisionedThroughput).toBeUndefined();
      expect(t.Properties.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
      // SSEEnabled without a key id = KMS with the AWS-managed key (alias/aws/dynamodb).
      expect(t.Properties.SSESpecification).toEqual({ SSEEnabled: true });
    });

    it.each(tables)('$name: TTL attribute only where the table needs one', ({ name, ttl }) => {
      const [, t] = table(synth().template, name);
      if (ttl) {
        expect(t.Properties.TimeToLiveSpecification).toEqual({ AttributeName: TTL_ATTRIBUTE, Enabled: true });
      } else {
        expect(t.Properties.TimeToLiveSpecification).toBeUndefined();
      }
    });
  });

  describe('Removal policy per stage', () => {
    const stateful = ['AWS::SQS::Queue', 'AWS::DynamoDB::Table', 'AWS::Logs::LogGroup'];

    it('destroys queues, tables and logs with a non-prod stack', () => {
      const { template } = synth({ stage: 'dev' });
      for (const type of stateful) {
        for (const r of Object.values(resources(template, type))) {
          expect(r.DeletionPolicy, type).toBe('Delete');
          expect(r.UpdateReplacePolicy, type).toBe('Delete');
        }
      }
      for (const t of Object.values(resources(template, 'AWS::DynamoDB::Table'))) {
        expect(t.Properties.DeletionProtectionEnabled).toBe(false);
      }
    });

    it('retains them in prod and protects the tables from deletion', () => {
      const { template } = synth({ stage: 'prod' });
      for (const type of stateful) {
        const found = Object.values(resources(template, type));
        expect(found.length, type).toBeGreaterThan(0);
        for (const r of found) {
          expect(r.DeletionPolicy, type).toBe('Retain');
          expect(r.UpdateReplacePolicy, type).toBe('Retain');
        }
      }
      for (const t of Object.values(resources(template, 'AWS::DynamoDB::Table'))) {
        expect(t.Properties.DeletionProtectionEnabled).toBe(true);
      }
      queue(template, 'leaseq-prod-jobs');
      table(template, 'leaseq-prod-ledger');
    });
  });

  describe('Worker function', () => {
    it('runs Node 22 on arm64 with the worker timeout', () => {
      const fn = workerFunction(synth({ workerTimeout: Duration.seconds(45) }).template);
      expect(fn.Properties.Runtime).toBe('nodejs22.x');
      expect(fn.Properties.Architectures).toEqual(['arm64']);
      expect(fn.Properties.Timeout).toBe(45);
      expect(fn.Properties.Handler).toBe('index.handler');
    });

    it('passes queue URLs, table names, max attempts and Powertools settings as env vars', () => {
      const { template } = synth({ maxAttempts: 7 });
      const [jobsQueueId] = queue(template, 'leaseq-dev-jobs');
      const [dlqId] = queue(template, 'leaseq-dev-jobs-dlq');
      const [jobsId] = table(template, 'leaseq-dev-jobs');
      const [leasesId] = table(template, 'leaseq-dev-leases');
      const [ledgerId] = table(template, 'leaseq-dev-ledger');

      expect(envOf(template)).toMatchObject({
        POWERTOOLS_SERVICE_NAME: 'leaseq',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        [WORKER_ENV.maxAttempts]: '7',
        [WORKER_ENV.jobsQueueUrl]: { Ref: jobsQueueId },
        [WORKER_ENV.dlqUrl]: { Ref: dlqId },
        [WORKER_ENV.jobsTable]: { Ref: jobsId },
        [WORKER_ENV.leasesTable]: { Ref: leasesId },
        LEASEQ_TABLE_LEDGER: { Ref: ledgerId },
      });
    });

    it('is fed by the jobs queue with partial batch failures, batch size and maximum concurrency', () => {
      const { template } = synth();
      const [jobsQueueId] = queue(template, 'leaseq-dev-jobs');
      template.resourceCountIs('AWS::Lambda::EventSourceMapping', 1);
      template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        EventSourceArn: getAtt(jobsQueueId, 'Arn'),
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        BatchSize: 10,
        ScalingConfig: { MaximumConcurrency: 5 },
      });
    });

    it('takes batch size and maximum concurrency from the props', () => {
      synth({ batchSize: 3, maxConcurrency: 20 }).template.hasResourceProperties(
        'AWS::Lambda::EventSourceMapping',
        { BatchSize: 3, ScalingConfig: { MaximumConcurrency: 20 } },
      );
    });

    it('writes to its own log group with a retention', () => {
      const { template } = synth();
      const [logGroupId, logGroup] = only(template, 'AWS::Logs::LogGroup');
      expect(logGroup.Properties.RetentionInDays).toBe(30);
      expect(workerFunction(template).Properties.LoggingConfig).toEqual({ LogGroup: { Ref: logGroupId } });
    });
  });

  describe('Least privilege', () => {
    it('grants no wildcard resource and no wildcard or table-level action', () => {
      const all = statements(synth().template);
      expect(all.length).toBeGreaterThan(0);
      for (const s of all) {
        expect(s.Effect).toBe('Allow');
        expect(JSON.stringify(s.Resource)).not.toContain('*');
        for (const action of actionsOf(s)) {
          expect(action).not.toContain('*');
          // BatchGetItem stays item-level (it reads the keys it names, as GetItem): a busy concurrency scope.
          expect(action).not.toMatch(
            /^dynamodb:(Scan|Query|BatchWriteItem|\w*Table\w*|DescribeStream|GetRecords)$/,
          );
        }
      }
    });

    it('attaches no managed policy (AWSLambdaBasicExecutionRole would allow logs on every group)', () => {
      const roles = Object.values(resources(synth().template, 'AWS::IAM::Role'));
      expect(roles).toHaveLength(1);
      expect(roles[0]?.Properties.ManagedPolicyArns).toBeUndefined();
    });

    it('may write only to its own log group', () => {
      const { template } = synth();
      const [logGroupId] = only(template, 'AWS::Logs::LogGroup');
      const logActions = statements(template).filter((s) => actionsOf(s).some((a) => a.startsWith('logs:')));
      expect(logActions).toHaveLength(1);
      expect(logActions[0]?.Resource).toEqual(getAtt(logGroupId, 'Arn'));
      expect(actionsOf(logActions[0] as PolicyStatement).sort()).toEqual([
        'logs:CreateLogStream',
        'logs:PutLogEvents',
      ]);
    });

    it('grants exactly the SQS actions the event source and the worker call (no GetQueueUrl)', () => {
      const { template } = synth();
      const [jobsQueueId] = queue(template, 'leaseq-dev-jobs');
      const [dlqId] = queue(template, 'leaseq-dev-jobs-dlq');
      const onJobs = statementsOn(template, jobsQueueId).flatMap(actionsOf);
      const onDlq = statementsOn(template, dlqId).flatMap(actionsOf);

      // The mapping polls (Receive, Delete, GetQueueAttributes); the worker heartbeats and deletes. Both
      // URLs come from the environment: never GetQueueUrl. The DLQ is only ever sent to. The ledger's
      // jobs declare no limit, so no SendMessage on the jobs queue (a limit's re-send, below).
      expect([...new Set(onJobs)].sort()).toEqual([
        'sqs:ChangeMessageVisibility',
        'sqs:DeleteMessage',
        'sqs:GetQueueAttributes',
        'sqs:ReceiveMessage',
      ]);
      expect([...new Set(onDlq)].sort()).toEqual(['sqs:SendMessage']);
      expect(statements(template).flatMap(actionsOf)).not.toContain('sqs:GetQueueUrl');
    });

    it.each([
      // Claims and completions are conditional UpdateItems (in a transaction or alone) and reads.
      ['leaseq-dev-jobs', 'jobs', ['dynamodb:GetItem', 'dynamodb:UpdateItem']],
      // Named leases: conditional updates, reads, and the fence ConditionCheck a fenced commit carries.
      [
        'leaseq-dev-leases',
        'leases',
        ['dynamodb:ConditionCheckItem', 'dynamodb:GetItem', 'dynamodb:UpdateItem'],
      ],
      // Application tables: ctx.tables.<name>.get and the effect builders' Put, Update and Delete.
      [
        'leaseq-dev-ledger',
        'effects',
        ['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
      ],
    ] as const)(
      '%s: exactly the item-level actions the worker uses (WORKER_TABLE_ACTIONS.%s)',
      (name, key, expected) => {
        const { template } = synth();
        const [id] = table(template, name);
        const granted = statementsOn(template, id).flatMap(actionsOf);

        expect([...new Set(granted)].sort()).toEqual(expected);
        expect([...WORKER_TABLE_ACTIONS[key]].sort()).toEqual(expected);
      },
    );

    // A limit's bounce re-sends a message received often (SendMessage on the jobs queue); a concurrency
    // scope's busy acquire reads its slots (BatchGetItem on the leases table). Only jobs that declare one
    // give the role these.
    const limitedJobs = (option: 'concurrency' | 'rateLimit') =>
      defineJobs([
        defineJob({
          type: 'limits.probe',
          payload: z.object({ tenant: z.string() }),
          ...(option === 'concurrency'
            ? { concurrency: { limit: 2, key: (p: { tenant: string }) => p.tenant } }
            : { rateLimit: { limit: 5, perSeconds: 1 } }),
          run: async () => ({}),
        }),
      ]);
    it.each([
      ['a concurrency limit', 'concurrency', ['sqs:SendMessage'], ['dynamodb:BatchGetItem']],
      ['a rate limit', 'rateLimit', ['sqs:SendMessage'], []],
    ] as const)(
      'with %s the role gets %j on the jobs queue and %j on the leases table',
      (_, option, onQueue, onLeases) => {
        const { template } = synth({ jobs: limitedJobs(option), resourcePrefix: `lim-${option}` });
        const [jobsQueueId] = queue(template, `lim-${option}-jobs`);
        const [leasesId] = table(template, `lim-${option}-leases`);
        const queueActions = new Set(statementsOn(template, jobsQueueId).flatMap(actionsOf));
        const leaseActions = new Set(statementsOn(template, leasesId).flatMap(actionsOf));
        expect(queueActions.has('sqs:SendMessage')).toBe(onQueue.length > 0);
        expect(leaseActions.has('dynamodb:BatchGetItem')).toBe(onLeases.length > 0);
        expect([...queueActions].filter((a) => !WORKER_QUEUE_ACTIONS.jobs.includes(a as never))).toEqual(
          onQueue,
        );
        expect([...leaseActions].filter((a) => !WORKER_TABLE_ACTIONS.leases.includes(a as never))).toEqual(
          onLeases,
        );
      },
    );
  });

  describe('Outputs', () => {
    it('exports every documented output, pointing at the right resource', () => {
      const { template } = synth();
      const [jobsQueueId] = queue(template, 'leaseq-dev-jobs');
      const [dlqId] = queue(template, 'leaseq-dev-jobs-dlq');
      const [functionId] = only(template, 'AWS::Lambda::Function');
      const expected = {
        JobsQueueUrl: { Ref: jobsQueueId },
        JobsQueueName: getAtt(jobsQueueId, 'QueueName'),
        DlqUrl: { Ref: dlqId },
        DlqName: getAtt(dlqId, 'QueueName'),
        JobsTableName: { Ref: table(template, 'leaseq-dev-jobs')[0] },
        LeasesTableName: { Ref: table(template, 'leaseq-dev-leases')[0] },
        LedgerTableName: { Ref: table(template, 'leaseq-dev-ledger')[0] },
        WorkerFunctionName: { Ref: functionId },
      };

      // leaseq's own outputs, plus one per application table of the job module.
      expect(Object.keys(template.findOutputs('*')).sort()).toEqual(
        [...STACK_OUTPUT_KEYS, 'LedgerTableName'].sort(),
      );
      for (const [key, value] of Object.entries(expected)) {
        template.hasOutput(key, { Value: value });
      }
    });
  });

  describe('Environment', () => {
    it('is environment-agnostic (no account or region), so synth needs no credentials', () => {
      const { stack } = synth();
      expect(Token.isUnresolved(stack.account)).toBe(true);
      expect(Token.isUnresolved(stack.region)).toBe(true);
      expect(stack.stackName).toBe('leaseq-dev');
    });
  });

  describe('Prop validation', () => {
    it.each<[LeaseqStackProps, string, RegExp]>([
      [
        { maxAttempts: 0 },
        'maxAttempts',
        new RegExp(`is 0; expected an integer from 1 to ${1000 - REDRIVE_MARGIN}$`),
      ],
      [{ maxAttempts: 2.5 }, 'maxAttempts', /is 2.5; expected an integer/],
      [{ batchSize: 11 }, 'batchSize', /is 11; expected an integer from 1 to 10/],
      [{ batchSize: 0 }, 'batchSize', /is 0; expected an integer from 1 to 10/],
      [{ maxConcurrency: 1 }, 'maxConcurrency', /is 1; expected an integer from 2 to 1000/],
      [
        { workerTimeout: Duration.minutes(16) },
        'workerTimeout',
        /is "960 s"; expected whole seconds from 1 s to 900 s/,
      ],
      [{ workerTimeout: Duration.millis(1500) }, 'workerTimeout', /is "1.5 s"; expected whole seconds/],
      [{ stage: 'Prod!' }, 'stage', /is "Prod!"; expected a lower-case name/],
      [{ resourcePrefix: 'has space' }, 'resourcePrefix', /is "has space"; expected letters, digits/],
      [{ resourcePrefix: 'x'.repeat(70) }, 'resourcePrefix', /expected letters, digits/],
    ])('rejects %j with the value received and expected', (props, prop, message) => {
      let error: unknown;
      try {
        createLeaseqApp({ stackProps: props, bundle: false });
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(InvalidLeaseqStackPropsError);
      expect((error as InvalidLeaseqStackPropsError).prop).toBe(prop);
      expect((error as Error).message).toMatch(message);
    });
  });
});
