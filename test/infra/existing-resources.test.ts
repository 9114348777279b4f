import { fileURLToPath } from 'node:url';
import { App, Duration, Fn, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { describe, expect, it } from 'vitest';
import { cdkJsonContext } from '../../infra/leaseq-app.ts';
import { LeaseqPipeline, type LeaseqPipelineProps } from '../../infra/leaseq-pipeline.ts';

const ENTRY = fileURLToPath(new URL('../../functions/worker.ts', import.meta.url));
const QUEUE_ARN = 'arn:aws:sqs:eu-west-1:111122223333:orders';
const DLQ_ARN = 'arn:aws:sqs:eu-west-1:111122223333:orders-dlq';

function stack(): Stack {
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
  return new Stack(app, 'Orders', { env: { account: '111122223333', region: 'eu-west-1' } });
}

/** A pipeline on resources made elsewhere; `props` sees the stack to import them into. */
function synth(props: (s: Stack) => Partial<LeaseqPipelineProps>) {
  const s = stack();
  const pipeline = new LeaseqPipeline(s, 'Jobs', { entry: ENTRY, resourcePrefix: 'orders', ...props(s) });
  pipeline.addStackOutputs();
  return { pipeline, template: Template.fromStack(s) };
}

const imported = (s: Stack, more: Record<string, unknown> = {}): Partial<LeaseqPipelineProps> => ({
  existingQueue: {
    queue: sqs.Queue.fromQueueArn(s, 'Orders', QUEUE_ARN),
    deadLetterQueue: sqs.Queue.fromQueueArn(s, 'OrdersDlq', DLQ_ARN),
    visibilityTimeout: Duration.seconds(360),
    maxReceiveCount: 15,
    ...more,
  },
});

type Statement = { Action: string | string[]; Resource: unknown };
const statements = (template: Template): Statement[] =>
  Object.values(template.findResources('AWS::IAM::Policy')).flatMap(
    (p) =>
      (p as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument
        .Statement,
  );

describe('LeaseqPipeline on an existing queue and tables', () => {
  it('consumes the imported queue: its ARN is the event source and no queue is created', () => {
    const { template } = synth((s) => imported(s));
    template.resourceCountIs('AWS::SQS::Queue', 0);
    template.resourceCountIs('AWS::SQS::QueuePolicy', 0);
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { EventSourceArn: QUEUE_ARN });
    const url = (name: string) => ({
      'Fn::Join': ['', ['https://sqs.eu-west-1.', { Ref: 'AWS::URLSuffix' }, `/111122223333/${name}`]],
    });
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectLike({
          LEASEQ_JOBS_QUEUE_URL: url('orders'),
          LEASEQ_DLQ_URL: url('orders-dlq'),
        }),
      },
    });
    template.hasOutput('JobsQueueUrl', { Value: url('orders') });
    template.hasOutput('DlqUrl', { Value: url('orders-dlq') });
    template.hasOutput('JobsQueueName', { Value: 'orders' });
    template.hasOutput('DlqName', { Value: 'orders-dlq' });
  });

  it('grants the worker its queue actions on the imported ARNs only, the DLQ only SendMessage', () => {
    const { template } = synth((s) => imported(s));
    const sqsStatements = statements(template).filter((st) =>
      [st.Action].flat().some((a) => a.startsWith('sqs:')),
    );
    expect(sqsStatements.map((st) => st.Resource).sort()).toEqual([DLQ_ARN, QUEUE_ARN].sort());
    const onQueue = sqsStatements
      .filter((st) => st.Resource === QUEUE_ARN)
      .flatMap((st) => [st.Action].flat());
    expect(onQueue.sort()).toEqual([
      'sqs:ChangeMessageVisibility',
      'sqs:DeleteMessage',
      'sqs:GetQueueAttributes',
      'sqs:ReceiveMessage',
      'sqs:SendMessage',
    ]);
    const onDlq = sqsStatements.filter((st) => st.Resource === DLQ_ARN).flatMap((st) => [st.Action].flat());
    expect(onDlq).toEqual(['sqs:SendMessage']);
  });

  it('uses existing jobs and leases tables: none is created, the grants and outputs name them', () => {
    const { template } = synth((s) => ({
      ...imported(s),
      existingStateTables: {
        jobs: dynamodb.Table.fromTableName(s, 'JobsT', 'legacy-jobs'),
        leases: dynamodb.Table.fromTableName(s, 'LeasesT', 'legacy-leases'),
      },
    }));
    template.resourceCountIs('AWS::DynamoDB::Table', 0);
    template.hasOutput('JobsTableName', { Value: 'legacy-jobs' });
    template.hasOutput('LeasesTableName', { Value: 'legacy-leases' });
    const tableArn = (name: string) => `arn:aws:dynamodb:eu-west-1:111122223333:table/${name}`;
    const dynamo = statements(template).filter((st) =>
      [st.Action].flat().some((a) => a.startsWith('dynamodb:')),
    );
    expect(dynamo).toContainEqual({
      Action: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
      Effect: 'Allow',
      Resource: tableArn('legacy-jobs'),
    });
    expect(dynamo.map((st) => st.Resource).sort()).toEqual(
      [tableArn('legacy-jobs'), tableArn('legacy-leases'), tableArn('legacy-leases')].sort(),
    );
  });

  it('refuses an imported queue whose visibility timeout is below 6x the worker timeout, saying what to change', () => {
    expect(() => synth((s) => imported(s, { visibilityTimeout: Duration.seconds(30) }))).toThrow(
      /visibility-covers-timeout: jobs queue visibility timeout is 30 s; required at least 360 s \(6 x the worker timeout of 60 s\): raise the queue's VisibilityTimeout to at least 360 s or lower workerTimeout/,
    );
  });

  it('refuses an imported queue whose redrive count is below the attempts it must let through', () => {
    expect(() => synth((s) => imported(s, { maxReceiveCount: 3 }))).toThrow(
      /redrive-above-attempts: jobs queue redrive maxReceiveCount is 3; required at least 15/,
    );
  });

  it('refuses an imported queue whose visibility and redrive count it is not told, naming the props', () => {
    expect(() =>
      synth((s) => imported(s, { visibilityTimeout: undefined, maxReceiveCount: undefined })),
    ).toThrow(
      "LeaseqPipeline prop existingQueue.visibilityTimeout is undefined; expected the imported queue's visibility timeout (at least 360 s, 6 x workerTimeout): it cannot be read at synth",
    );
  });

  it('tells how to mark a queue imported from an ARN token as FIFO, instead of turning the pipeline standard', () => {
    // Fn.importValue: synth cannot read `.fifo` off the name, so CDK takes the queue as standard.
    expect(() =>
      synth((s) => ({
        fifo: true,
        existingQueue: {
          queue: sqs.Queue.fromQueueAttributes(s, 'F', { queueArn: Fn.importValue('OrdersQueueArn') }),
          deadLetterQueue: sqs.Queue.fromQueueAttributes(s, 'FD', {
            queueArn: Fn.importValue('OrdersDlqArn'),
            fifo: true,
          }),
          visibilityTimeout: Duration.seconds(360),
          maxReceiveCount: 100,
        },
      })),
    ).toThrow(
      'LeaseqPipeline prop existingQueue.queue is "Orders/F"; expected a FIFO queue as fifo is true (its ARN is a token: import it with Queue.fromQueueAttributes({ queueArn, fifo: true }), or set fifo: false for a standard queue)',
    );
  });

  it("refuses an imported queue in another region than the stack's: Lambda's event source takes only its own", () => {
    expect(() =>
      synth((s) => ({
        existingQueue: {
          queue: sqs.Queue.fromQueueArn(s, 'Far', 'arn:aws:sqs:us-east-1:111122223333:orders'),
          deadLetterQueue: sqs.Queue.fromQueueArn(s, 'FarDlq', DLQ_ARN),
          visibilityTimeout: Duration.seconds(360),
          maxReceiveCount: 15,
        },
      })),
    ).toThrow(
      'LeaseqPipeline prop existingQueue.queue is "orders"; expected a queue in the stack\'s region eu-west-1, not us-east-1 (a Lambda event source reads a queue of its own region): deploy the pipeline in us-east-1',
    );
  });

  it('refuses a FIFO queue under a standard pipeline and the reverse, in one line', () => {
    expect(() =>
      synth((s) => ({
        existingQueue: {
          queue: sqs.Queue.fromQueueArn(s, 'F', `${QUEUE_ARN}.fifo`),
          deadLetterQueue: sqs.Queue.fromQueueArn(s, 'FD', `${DLQ_ARN}.fifo`),
          visibilityTimeout: Duration.seconds(360),
          maxReceiveCount: 100,
        },
      })),
    ).toThrow(
      'LeaseqPipeline prop existingQueue.queue is "orders.fifo"; expected a standard queue as fifo is false (set fifo: true for a FIFO queue)',
    );
    expect(() =>
      synth((s) => ({
        fifo: true,
        existingQueue: {
          queue: sqs.Queue.fromQueueArn(s, 'F', `${QUEUE_ARN}.fifo`),
          deadLetterQueue: sqs.Queue.fromQueueArn(s, 'FD', DLQ_ARN),
          visibilityTimeout: Duration.seconds(360),
          maxReceiveCount: 100,
        },
      })),
    ).toThrow(
      'LeaseqPipeline prop existingQueue.deadLetterQueue is "orders-dlq"; expected a FIFO queue as fifo is true (a FIFO queue\'s DLQ is FIFO)',
    );
  });

  it('reads a queue made in the same stack itself: its redrive must name the DLQ given', () => {
    const s = stack();
    const dlq = new sqs.Queue(s, 'Dlq', { retentionPeriod: Duration.days(14) });
    const other = new sqs.Queue(s, 'Other');
    const queue = new sqs.Queue(s, 'Q', {
      visibilityTimeout: Duration.seconds(360),
      deadLetterQueue: { queue: other, maxReceiveCount: 20 },
    });
    new LeaseqPipeline(s, 'Jobs', { entry: ENTRY, existingQueue: { queue, deadLetterQueue: dlq } });
    expect(() => Template.fromStack(s)).toThrow(
      /jobs queue RedrivePolicy.deadLetterTargetArn names another queue than existingQueue.deadLetterQueue: set the queue's deadLetterQueue to it/,
    );
  });

  it('reads a jobs table made in the same stack: without the problems index it is refused', () => {
    const s = stack();
    const jobsTable = new dynamodb.Table(s, 'J', {
      partitionKey: { name: 'dedupKey', type: dynamodb.AttributeType.STRING },
    });
    const leases = new dynamodb.Table(s, 'L', {
      partitionKey: { name: 'leaseKey', type: dynamodb.AttributeType.STRING },
    });
    new LeaseqPipeline(s, 'Jobs', { entry: ENTRY, existingStateTables: { jobs: jobsTable, leases } });
    expect(() => Template.fromStack(s)).toThrow(
      /existingStateTables.jobs has no global secondary index "problems": add it with addProblemsIndex\(table\) from leaseq\/cdk/,
    );
  });

  it("grants Decrypt and GenerateDataKey on an imported queue's KMS key, and nothing on keys it has none of", () => {
    const keyArn = 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
    const { template } = synth((s) => ({
      existingQueue: {
        queue: sqs.Queue.fromQueueAttributes(s, 'K', { queueArn: QUEUE_ARN, keyArn }),
        deadLetterQueue: sqs.Queue.fromQueueArn(s, 'KD', DLQ_ARN),
        visibilityTimeout: Duration.seconds(360),
        maxReceiveCount: 15,
      },
    }));
    const kms = statements(template).filter((st) => [st.Action].flat().some((a) => a.startsWith('kms:')));
    expect(kms).toEqual([
      { Action: ['kms:Decrypt', 'kms:GenerateDataKey'], Effect: 'Allow', Resource: keyArn },
    ]);
  });

  it('lets a producer send to an imported queue encrypted with a KMS key: GenerateDataKey and Decrypt on that key', () => {
    const keyArn = 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
    const s = stack();
    const pipeline = new LeaseqPipeline(s, 'Jobs', {
      entry: ENTRY,
      resourcePrefix: 'orders',
      existingQueue: {
        queue: sqs.Queue.fromQueueAttributes(s, 'K', { queueArn: QUEUE_ARN, keyArn }),
        deadLetterQueue: sqs.Queue.fromQueueArn(s, 'KD', DLQ_ARN),
        visibilityTimeout: Duration.seconds(360),
        maxReceiveCount: 15,
      },
    });
    const producer = new iam.Role(s, 'Producer', { assumedBy: new iam.AccountRootPrincipal() });
    pipeline.grantProducer(producer);
    const policies = Template.fromStack(s).findResources('AWS::IAM::Policy', {
      Properties: { Roles: [{ Ref: Match.stringLikeRegexp('^Producer') }] },
    });
    const producerKms = Object.values(policies)
      .flatMap(
        (p) =>
          (p as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument
            .Statement,
      )
      .filter((st) => [st.Action].flat().some((a) => a.startsWith('kms:')));
    expect(producerKms).toEqual([
      { Action: ['kms:Decrypt', 'kms:GenerateDataKey'], Effect: 'Allow', Resource: keyArn },
    ]);
  });

  it('grants the worker its KMS actions on the key of imported state tables encrypted with one', () => {
    const jobsKey = 'arn:aws:kms:eu-west-1:111122223333:key/11111111-12ab-34cd-56ef-1234567890ab';
    const leasesKey = 'arn:aws:kms:eu-west-1:111122223333:key/22222222-12ab-34cd-56ef-1234567890ab';
    const { template } = synth((s) => ({
      existingStateTables: {
        jobs: dynamodb.Table.fromTableAttributes(s, 'J', {
          tableName: 'orders-leaseq-jobs',
          encryptionKey: kms.Key.fromKeyArn(s, 'JK', jobsKey),
        }),
        leases: dynamodb.Table.fromTableAttributes(s, 'L', {
          tableName: 'orders-leaseq-leases',
          encryptionKey: kms.Key.fromKeyArn(s, 'LK', leasesKey),
        }),
      },
    }));
    const keys = statements(template)
      .filter((st) => [st.Action].flat().some((a) => a.startsWith('kms:')))
      .flatMap((st) => [st.Resource].flat());
    expect(keys.sort()).toEqual([jobsKey, leasesKey].sort());
  });

  it("reads a queue of the same app from its own resource: a short visibility fails synth on the queue's value", () => {
    const s = stack();
    const dlq = new sqs.Queue(s, 'Dlq');
    const queue = new sqs.Queue(s, 'Q', {
      visibilityTimeout: Duration.seconds(100),
      deadLetterQueue: { queue: dlq, maxReceiveCount: 20 },
    });
    // The described values are for imported queues: the queue's own 100 s is what is checked.
    const existingQueue = { queue, deadLetterQueue: dlq, visibilityTimeout: Duration.seconds(360) };
    new LeaseqPipeline(s, 'Jobs', { entry: ENTRY, existingQueue });
    expect(() => Template.fromStack(s)).toThrow(
      /visibility-covers-timeout: jobs queue visibility timeout is 100 s; required at least 360 s/,
    );
  });

  it('refuses state tables of the same app keyed otherwise than leaseq reads them', () => {
    const s = stack();
    const key = (name: string) => ({ partitionKey: { name, type: dynamodb.AttributeType.STRING } });
    const jobsTable = new dynamodb.Table(s, 'J', {
      ...key('id'),
      sortKey: { name: 'at', type: dynamodb.AttributeType.NUMBER },
    });
    const leases = new dynamodb.Table(s, 'L', key('leaseKey'));
    new LeaseqPipeline(s, 'Jobs', { entry: ENTRY, existingStateTables: { jobs: jobsTable, leases } });
    expect(() => Template.fromStack(s)).toThrow(
      /existingStateTables.jobs has the key id \(HASH\), at \(RANGE\); required the partition key dedupKey \(string\) alone: make the table with partitionKey dedupKey/,
    );
  });
});
