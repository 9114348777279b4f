import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Logger } from '@aws-lambda-powertools/logger';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import type { SQSRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  WORKER_TABLE_ACTIONS,
  WORKER_TABLE_KMS_ACTIONS,
  workerExternalModules,
} from '../../infra/constructs/worker-function.ts';
import { cdkJsonContext, stackPropsFromContext } from '../../infra/leaseq-app.ts';
import {
  InvalidLeaseqPropsError,
  LeaseqPipeline,
  type LeaseqPipelineProps,
} from '../../infra/leaseq-pipeline.ts';
import type { ResendOptions } from '../../shared/core/contract/job-queue.ts';
import { defineTable } from '../../shared/core/model/table.ts';
import { JobLog } from '../../shared/core/observe/job-log.ts';
import { RecordMessage } from '../../shared/core/pipeline/record-message.ts';
import { defineJob, defineJobs } from '../../shared/jobs/define-job.ts';
import { REDRIVE_MARGIN, redriveMaxReceiveCount } from '../../shared/resources.ts';

const ENTRY = fileURLToPath(new URL('../../functions/worker.ts', import.meta.url));
const emailLog = defineTable('emailLog', { partitionKey: 'id', sortKey: { name: 'at', type: 'number' } });
const audit = defineTable('audit', { partitionKey: 'key', ttlAttribute: 'expiresAt' });
const jobs = defineJobs([
  defineJob({ type: 'email.send', payload: z.object({}), tables: { emailLog }, run: async () => undefined }),
  defineJob({
    type: 'audit.write',
    payload: z.object({}),
    tables: { audit, emailLog },
    run: async () => undefined,
  }),
]);

function synth(
  props: Partial<LeaseqPipelineProps>,
  existing?: (stack: Stack) => Partial<LeaseqPipelineProps>,
  after?: (stack: Stack, pipeline: LeaseqPipeline) => void,
) {
  // No bundling: these tests read the template only.
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'UserStack');
  const pipeline = new LeaseqPipeline(stack, 'Jobs', {
    entry: ENTRY,
    resourcePrefix: 'shop',
    ...props,
    ...existing?.(stack),
  });
  after?.(stack, pipeline);
  return { pipeline, stack, template: Template.fromStack(stack) };
}

type Resource = { Type: string; Properties: Record<string, unknown> };
const tablesOf = (template: Template) =>
  Object.values(template.findResources('AWS::DynamoDB::Table') as Record<string, Resource>).map(
    (r) => r.Properties,
  );
const variables = (template: Template): Record<string, unknown> => {
  const fn = Object.values(template.findResources('AWS::Lambda::Function') as Record<string, Resource>)[0];
  return (fn?.Properties.Environment as { Variables: Record<string, unknown> } | undefined)?.Variables ?? {};
};

describe('Construct: LeaseqPipeline', () => {
  it('creates every table the jobs declare once, with its keys and TTL, and names it from the prefix', () => {
    const { template } = synth({ jobs });
    const tables = tablesOf(template);
    expect(tables.map((t) => t.TableName).sort()).toEqual([
      'shop-audit',
      'shop-email-log',
      'shop-jobs',
      'shop-leases',
    ]);
    expect(tables.find((t) => t.TableName === 'shop-email-log')).toMatchObject({
      KeySchema: [
        { AttributeName: 'id', KeyType: 'HASH' },
        { AttributeName: 'at', KeyType: 'RANGE' },
      ],
      AttributeDefinitions: expect.arrayContaining([{ AttributeName: 'at', AttributeType: 'N' }]),
      BillingMode: 'PAY_PER_REQUEST',
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      SSESpecification: { SSEEnabled: true },
    });
    expect(tables.find((t) => t.TableName === 'shop-audit')).toMatchObject({
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
    });
  });

  it('passes each table to the worker as LEASEQ_TABLE_<NAME>, test hooks off, and grants item access only', () => {
    const { template, pipeline } = synth({ jobs });
    const env = variables(template);
    expect(Object.keys(env)).toEqual(
      expect.arrayContaining(['LEASEQ_TABLE_EMAIL_LOG', 'LEASEQ_TABLE_AUDIT']),
    );
    expect(env).not.toHaveProperty('LEASEQ_TEST_HOOKS');
    expect(Object.keys(pipeline.effectTables).sort()).toEqual(['audit', 'emailLog']);
    const policies = JSON.stringify(template.findResources('AWS::IAM::Policy'));
    for (const action of WORKER_TABLE_ACTIONS.effects) expect(policies).toContain(action);
    expect(policies).not.toMatch(/dynamodb:Scan|dynamodb:\*|DeleteTable/);
  });

  it('uses a table you pass instead of creating one, and grantEffects gives the worker item access to it', () => {
    const { template } = synth(
      { jobs },
      (scope) => ({ tables: { audit: dynamodb.Table.fromTableName(scope, 'Existing', 'existing-audit') } }),
      (scope, pipeline) => pipeline.grantEffects(dynamodb.Table.fromTableName(scope, 'Other', 'other-table')),
    );
    expect(tablesOf(template).map((t) => t.TableName)).not.toContain('shop-audit');
    expect(variables(template).LEASEQ_TABLE_AUDIT).toBe('existing-audit');
    const policies = JSON.stringify(template.findResources('AWS::IAM::Policy'));
    expect(policies).toContain('table/existing-audit');
    expect(policies).toContain('table/other-table');
  });

  it('grants the worker the KMS actions on the key of an application table you pass encrypted with one', () => {
    const keyArn = 'arn:aws:kms:us-east-1:111122223333:key/33333333-12ab-34cd-56ef-1234567890ab';
    const { template } = synth({ jobs }, (scope) => ({
      tables: {
        audit: dynamodb.Table.fromTableAttributes(scope, 'Existing', {
          tableName: 'existing-audit',
          encryptionKey: kms.Key.fromKeyArn(scope, 'AuditKey', keyArn),
        }),
      },
    }));
    const statements = Object.values(template.findResources('AWS::IAM::Policy')).flatMap(
      (p) =>
        (p as { Properties: { PolicyDocument: { Statement: { Action: unknown; Resource: unknown }[] } } })
          .Properties.PolicyDocument.Statement,
    );
    expect(statements.filter((st) => JSON.stringify(st.Action).includes('kms:'))).toEqual([
      expect.objectContaining({ Action: [...WORKER_TABLE_KMS_ACTIONS], Resource: keyArn }),
    ]);
  });

  it('turns test hooks on only when asked', () => {
    expect(variables(synth({ jobs, testHooks: true }).template).LEASEQ_TEST_HOOKS).toBe('1');
  });

  it('makes no application table and no LEASEQ_TABLE_* when the jobs declare none', () => {
    const { template } = synth({});
    expect(
      tablesOf(template)
        .map((t) => t.TableName)
        .sort(),
    ).toEqual(['shop-jobs', 'shop-leases']);
    expect(Object.keys(variables(template)).filter((k) => k.startsWith('LEASEQ_TABLE_'))).toEqual([]);
  });

  it.each<[Partial<LeaseqPipelineProps>, RegExp]>([
    [{ entry: '' }, /^LeaseqPipeline prop entry is ""; expected the path of your handler file$/],
    [{ maxAttempts: 0 }, /^LeaseqPipeline prop maxAttempts is 0; expected an integer from 1 to 990$/],
    [{ resourcePrefix: 'no spaces' }, /^LeaseqPipeline prop resourcePrefix is "no spaces"; expected letters/],
    [
      { jobs, tables: {} as never, batchSize: 11 },
      /^LeaseqPipeline prop batchSize is 11; expected an integer from 1 to 10$/,
    ],
  ])('rejects %j with the value received and expected', (props, message) => {
    expect(() => synth(props)).toThrow(InvalidLeaseqPropsError);
    expect(() => synth(props)).toThrow(message);
  });

  it('rejects a table for a name the jobs do not declare', () => {
    expect(() =>
      synth({ jobs }, (scope) => ({
        tables: { ledger: dynamodb.Table.fromTableName(scope, 'L', 'ledger') },
      })),
    ).toThrow('LeaseqPipeline prop tables is "ledger"; expected a table the jobs declare (emailLog, audit)');
  });
});

describe('Function: stackPropsFromContext', () => {
  const propsFrom = (context: Record<string, string>) => stackPropsFromContext(new App({ context }));

  it('reads numbers and booleans given as -c key=value', () => {
    expect(propsFrom({ maxAttempts: '8', fifo: 'true', workerTimeoutSeconds: '30' })).toMatchObject({
      maxAttempts: 8,
      fifo: true,
    });
  });

  it.each([
    [
      { maxAttempts: 'abc' },
      'LeaseqStack prop maxAttempts is "abc"; expected an integer (-c maxAttempts=<n>)',
    ],
    [{ fifo: 'yes' }, 'LeaseqStack prop fifo is "yes"; expected true or false (-c fifo=true)'],
  ])('names a value it cannot read, %j, as received', (context, message) => {
    expect(() => propsFrom(context)).toThrow(message);
  });
});

describe('Function: redriveMaxReceiveCount (the safety net)', () => {
  it('is attempts + margin on a standard queue, attempts x batch size + margin on FIFO', () => {
    expect(redriveMaxReceiveCount({ maxAttempts: 3, batchSize: 10, fifo: false })).toBe(3 + REDRIVE_MARGIN);
    expect(redriveMaxReceiveCount({ maxAttempts: 3, batchSize: 10, fifo: true })).toBe(30 + REDRIVE_MARGIN);
  });

  it('sets the FIFO queue redrive from it, and refuses a FIFO setting that would exceed 1000 receives', () => {
    const { template } = synth({ fifo: true, maxAttempts: 3, batchSize: 8, resourcePrefix: 'fifo' });
    const queue = Object.values(
      template.findResources('AWS::SQS::Queue', { Properties: { QueueName: 'fifo-jobs.fifo' } }) as Record<
        string,
        Resource
      >,
    )[0];
    expect(
      (queue?.Properties.RedrivePolicy as { maxReceiveCount: number } | undefined)?.maxReceiveCount,
    ).toBe(24 + REDRIVE_MARGIN);
    expect(() => synth({ fifo: true, maxAttempts: 200, batchSize: 10 })).toThrow(
      /prop maxAttempts is 200; expected at most 99 on a FIFO queue with batchSize 10/,
    );
  });
});

describe('Function: redriveMaxReceiveCount with batch concurrency (issue 23 item 3)', () => {
  it('counts the hand-backs when fewer records run at once than a batch holds, as on FIFO', () => {
    const count = (concurrency: number) =>
      redriveMaxReceiveCount({ maxAttempts: 3, batchSize: 10, fifo: false, batchConcurrency: concurrency });
    expect(count(2)).toBe(30 + REDRIVE_MARGIN);
    expect(count(9)).toBe(30 + REDRIVE_MARGIN);
    expect(count(10)).toBe(3 + REDRIVE_MARGIN);
    expect(count(20)).toBe(3 + REDRIVE_MARGIN);
  });

  it('refuses attempts whose safety net would exceed 1000 receives, naming the fix', () => {
    expect(() => synth({ maxAttempts: 100, environment: { LEASEQ_BATCH_CONCURRENCY: '2' } })).toThrow(
      /prop maxAttempts is 100; expected at most 99 with batchSize 10 and LEASEQ_BATCH_CONCURRENCY 2 .*or set LEASEQ_BATCH_CONCURRENCY to at least 10/,
    );
    expect(() => synth({ maxAttempts: 100 })).not.toThrow();
  });
});

describe('Prop: tracing', () => {
  it('sets the OTLP variables, adds the collector layer and grants X-Ray writes only when asked', async () => {
    const { App, Stack } = await import('aws-cdk-lib');
    const { Match, Template } = await import('aws-cdk-lib/assertions');
    const lambda = await import('aws-cdk-lib/aws-lambda');
    const { LeaseqPipeline } = await import('../../infra/leaseq-pipeline.ts');
    const { default: ledgerJobs } = await import('../../examples/ledger/jobs.ts');
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'Traced');
    const layer = lambda.LayerVersion.fromLayerVersionArn(
      stack,
      'Adot',
      'arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-nodejs-amd64-ver-1-30-1:1',
    );
    new LeaseqPipeline(stack, 'Pipeline', {
      jobs: ledgerJobs,
      entry: 'functions/worker.ts',
      tracing: { layers: [layer], xray: true, serviceName: 'orders-worker' },
    });
    const template = Template.fromStack(stack);
    template.hasResourceProperties('AWS::Lambda::Function', {
      Layers: ['arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-nodejs-amd64-ver-1-30-1:1'],
      Environment: {
        Variables: Match.objectLike({
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
          OTEL_SERVICE_NAME: 'orders-worker',
        }),
      },
    });
    const policies = JSON.stringify(template.findResources('AWS::IAM::Policy'));
    expect(policies).toContain('xray:PutTraceSegments');
  });
});

describe('Prop: maxBodyBytes (issue 20 item 5)', () => {
  const sizes = (template: Template) => {
    const queues = Object.values(template.findResources('AWS::SQS::Queue') as Record<string, Resource>);
    const size = (name: string) =>
      queues.find((q) => q.Properties.QueueName === name)?.Properties.MaximumMessageSize;
    return { jobs: size('shop-jobs'), dlq: size('shop-jobs-dlq') };
  };

  it('gives the worker 1 MiB less the letter reserve unless told, the jobs queue that and the re-send reserve', () => {
    const { template } = synth({});
    expect(sizes(template)).toEqual({ jobs: 1_015_808 + 256, dlq: 1_048_576 });
    expect(variables(template).LEASEQ_MAX_BODY_BYTES).toBe('1015808');
  });

  it("leaves room on the jobs queue for a limit's re-send of the largest body (its attributes count toward the size on AWS)", async () => {
    for (const maxBodyBytes of [undefined, 200_000]) {
      // Prepare: the largest body the worker runs, in a record as Lambda hands it over.
      const { template } = synth(maxBodyBytes === undefined ? {} : { maxBodyBytes });
      const limit = Number(variables(template).LEASEQ_MAX_BODY_BYTES);
      const sent: { body: string; attributes: Record<string, { dataType: string; stringValue?: string }> }[] =
        [];
      const queue = {
        changeVisibility: async () => undefined,
        delete: async () => undefined,
        sendToDeadLetter: async () => undefined,
        resend: async (body: string, options: ResendOptions) => {
          sent.push({ body, attributes: { ...options.attributes } });
        },
      };
      const record = {
        messageId: randomUUID(),
        receiptHandle: 'r',
        body: 'x'.repeat(limit),
        attributes: { ApproximateReceiveCount: '5' },
        messageAttributes: {},
      } as unknown as SQSRecord;
      const log = new JobLog(new Logger({ logLevel: 'SILENT' }), {});

      // Act
      expect(await new RecordMessage(queue, record, log).resend(5)).toBe(true);

      // Assess: body and attributes (name, data type and value, as SQS counts them) fit the queue.
      const [copy] = sent;
      const size =
        Buffer.byteLength(copy?.body ?? '') +
        Object.entries(copy?.attributes ?? {}).reduce(
          (n, [name, v]) =>
            n +
            Buffer.byteLength(name) +
            Buffer.byteLength(v.dataType) +
            Buffer.byteLength(v.stringValue ?? ''),
          0,
        );
      expect(size).toBeLessThanOrEqual(Number(sizes(template).jobs));
    }
  });

  it('sets both from the prop, the DLQ staying at the SQS maximum', () => {
    const { template } = synth({ maxBodyBytes: 200_000 });
    expect(sizes(template)).toEqual({ jobs: 200_256, dlq: 1_048_576 });
    expect(variables(template).LEASEQ_MAX_BODY_BYTES).toBe('200000');
  });

  it.each([1000, 1_015_809, 1_048_576, 2.5])(
    'refuses %s (a letter of that body must fit into the DLQ)',
    (bad) => {
      expect(() => synth({ maxBodyBytes: bad })).toThrow(
        /LeaseqPipeline prop maxBodyBytes is .*; expected an integer from 1024 to 1015808/,
      );
    },
  );
});

describe('Prop: largePayloads (the claim check, issue 20 item 5)', () => {
  type Statement = { Action: string | string[]; Resource: unknown; Effect: string; Condition?: unknown };
  const statements = (template: Template) =>
    Object.entries(
      template.findResources('AWS::IAM::Policy') as Record<
        string,
        { Properties: { PolicyDocument: { Statement: Statement[] }; Roles?: unknown[] } }
      >,
    ).flatMap(([id, p]) =>
      p.Properties.PolicyDocument.Statement.map((st) => ({ id, ...st, roles: p.Properties.Roles })),
    );
  const s3Actions = (template: Template, role: string) =>
    statements(template)
      .filter((st) => JSON.stringify(st.roles).includes(role))
      .flatMap((st) => [st.Action].flat())
      .filter((a) => a.startsWith('s3:'));

  it('makes no bucket unless asked', () => {
    const { template } = synth({});
    template.resourceCountIs('AWS::S3::Bucket', 0);
    expect(variables(template).LEASEQ_PAYLOAD_BUCKET).toBeUndefined();
  });

  it('owns an encrypted, private, TLS-only bucket whose objects expire, the worker reading only', () => {
    const { template } = synth({ largePayloads: true });
    template.resourceCountIs('AWS::S3::Bucket', 1);
    template.hasResourceProperties('AWS::S3::Bucket', {
      BucketEncryption: {
        ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
      },
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
      // Longer than a message lives: 4 days in the jobs queue, then 14 in the DLQ, and a redrive's run.
      LifecycleConfiguration: { Rules: [{ ExpirationInDays: 21, Status: 'Enabled' }] },
    });
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
    expect(variables(template).LEASEQ_PAYLOAD_BUCKET).toEqual({
      Ref: expect.stringMatching(/^JobsPayloadBucket/),
    });
    expect(s3Actions(template, 'JobsWorkerRole')).toContain('s3:GetObject');
  });

  it('takes the expiration, and grantProducer gives SendMessage on the queue and PutObject on the bucket only', () => {
    const { template } = synth(
      { largePayloads: { expiration: Duration.days(30) } },
      undefined,
      (stack, pipeline) => {
        pipeline.grantProducer(
          new iam.Role(stack, 'Producer', { assumedBy: new iam.AccountRootPrincipal() }),
        );
      },
    );
    template.hasResourceProperties('AWS::S3::Bucket', {
      LifecycleConfiguration: { Rules: [{ ExpirationInDays: 30, Status: 'Enabled' }] },
    });
    const producer = statements(template).filter((st) => JSON.stringify(st.roles).includes('Producer'));
    expect(producer.flatMap((st) => [st.Action].flat()).sort()).toEqual(['s3:PutObject', 'sqs:SendMessage']);
  });

  it('lets the worker list the payload prefix only, so an expired object answers 404 NoSuchKey, not 403', () => {
    // Without s3:ListBucket, S3 answers GetObject of a missing key 403 AccessDenied (it will not say
    // whether a key exists to a role that may not list): the expired payload would look like a missing
    // permission and be retried until the redrive policy moved it, with no reason.
    const { template } = synth({ largePayloads: true });
    const worker = statements(template).filter((st) => JSON.stringify(st.roles).includes('JobsWorkerRole'));
    const list = worker.filter((st) => [st.Action].flat().includes('s3:ListBucket'));
    expect(list).toHaveLength(1);
    expect(list[0]?.Resource).toEqual({ 'Fn::GetAtt': [expect.stringMatching(/^JobsPayloadBucket/), 'Arn'] });
    expect(list[0]?.Condition).toEqual({ StringLike: { 's3:prefix': 'payloads/*' } });
    expect(s3Actions(template, 'JobsWorkerRole').sort()).toEqual(['s3:GetObject', 's3:ListBucket']);
  });

  it('bundles @aws-sdk/client-s3 into the worker only with largePayloads', () => {
    expect(workerExternalModules(false)).toEqual(['@aws-sdk/client-s3']);
    expect(workerExternalModules(true)).toEqual([]);
  });

  it('gives the worker the key prefix and the size cap', () => {
    const { template } = synth({ largePayloads: { keyPrefix: 'big/', maxBytes: 1_000_000 } });
    expect(variables(template).LEASEQ_PAYLOAD_PREFIX).toBe('big/');
    expect(variables(template).LEASEQ_PAYLOAD_MAX_BYTES).toBe('1000000');
  });

  it("grants the worker's GetObject and the producer's PutObject on the key prefix only, not the whole bucket", () => {
    // A worker role that reads every object of the bucket, or a producer that writes anywhere in it, reaches
    // objects leaseq never put there (another prefix of a bucket shared by keyPrefix).
    for (const [props, prefix] of [
      [true, 'payloads/'],
      [{ keyPrefix: 'big/' }, 'big/'],
    ] as const) {
      const { template } = synth({ largePayloads: props }, undefined, (stack, pipeline) => {
        pipeline.grantProducer(
          new iam.Role(stack, 'Producer', { assumedBy: new iam.AccountRootPrincipal() }),
        );
      });
      const objectsOf = (role: string, action: string) =>
        statements(template)
          .filter((st) => JSON.stringify(st.roles).includes(role) && [st.Action].flat().includes(action))
          .map((st) => st.Resource);
      const scoped = {
        'Fn::Join': [
          '',
          [{ 'Fn::GetAtt': [expect.stringMatching(/^JobsPayloadBucket/), 'Arn'] }, `/${prefix}*`],
        ],
      };
      expect(objectsOf('JobsWorkerRole', 's3:GetObject')).toEqual([scoped]);
      expect(objectsOf('Producer', 's3:PutObject')).toEqual([scoped]);
    }
  });

  it('refuses a key prefix with a wildcard (the grants would name more than the prefix)', () => {
    expect(() => synth({ largePayloads: { keyPrefix: 'pay*' } })).toThrow(
      /LeaseqPipeline prop largePayloads.keyPrefix is "pay\*"; expected/,
    );
  });

  it("refuses a key prefix that names no folder of its own: '' grants every object, 'payloads' also 'payloads-old/'", () => {
    // The grants are on `<bucket>/<prefix>*`: only a prefix ending in `/` keeps them under it.
    for (const keyPrefix of ['', 'payloads', 'tenant-a/payloads']) {
      expect(() => synth({ largePayloads: { keyPrefix } }), JSON.stringify(keyPrefix)).toThrow(
        /LeaseqPipeline prop largePayloads.keyPrefix is ".*"; expected a key prefix ending in \//,
      );
    }
    expect(() => synth({ largePayloads: { keyPrefix: 'tenant-a/payloads/' } })).not.toThrow();
  });

  it('refuses an expiration shorter than a message can live (4 + 14 days)', () => {
    expect(() => synth({ largePayloads: { expiration: Duration.days(7) } })).toThrow(
      /LeaseqPipeline prop largePayloads.expiration is "7 days"; expected at least 19 days/,
    );
  });
});
