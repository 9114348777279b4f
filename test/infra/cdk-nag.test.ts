import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, Duration, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import { cdkJsonContext, createLeaseqApp } from '../../infra/leaseq-app.ts';
import { LeaseqPipeline } from '../../infra/leaseq-pipeline.ts';
import type { LeaseqStackProps } from '../../infra/leaseq-stack.ts';

interface Violation {
  readonly ruleName: string;
  readonly violatingConstructs: readonly { readonly constructPath: string }[];
}
interface ValidationReport {
  readonly pluginReports: readonly { readonly pluginName: string; readonly violations: Violation[] }[];
}

/**
 * Synthesizes `app` with the AWS Solutions pack registered the cdk-nag 3 way and returns the findings
 * as `rule at construct path`. CDK writes the report into the cloud assembly (validation-report.json)
 * and fails synthesis when there is a finding; the findings are read back from that report.
 */
function nagFindings(app: App): string[] {
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  let failure: unknown;
  try {
    app.synth();
  } catch (error) {
    failure = error;
  }
  const reportFile = join(app.outdir, 'validation-report.json');
  if (!existsSync(reportFile)) {
    if (failure) throw failure;
    return [];
  }
  const report = JSON.parse(readFileSync(reportFile, 'utf8')) as ValidationReport;
  const findings = report.pluginReports.flatMap((plugin) =>
    plugin.violations.flatMap((v) => v.violatingConstructs.map((c) => `${v.ruleName} at ${c.constructPath}`)),
  );
  if (failure && findings.length === 0) throw failure;
  return findings;
}

/** Every acknowledgement recorded under `scope`: rule id and reason. */
function acknowledgements(scope: IConstruct): { path: string; id: string; reason: unknown }[] {
  return scope.node.findAll().flatMap((c) =>
    c.node.metadata
      .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((m) =>
        Object.entries(m.data as Record<string, unknown>).map(([id, reason]) => ({
          path: c.node.path,
          id,
          reason,
        })),
      ),
  );
}

const variants: [string, LeaseqStackProps][] = [
  ['the default (dev) stack', {}],
  ['the prod FIFO stack', { stage: 'prod', fifo: true }],
  ['the demo stack (test hooks, a short lease)', { stage: 'demo', testHooks: true, leaseMs: 6000 }],
];

describe('cdk-nag AwsSolutions checks', () => {
  it.each(variants)('find nothing unacknowledged on %s', (_name, stackProps) => {
    const { app } = createLeaseqApp({ stackProps, bundle: false });
    expect(nagFindings(app)).toEqual([]);
  });

  it('acknowledge only the Node 22 runtime (AwsSolutions-L1) on the worker, with its reason', () => {
    const { app } = createLeaseqApp({ bundle: false });
    expect(acknowledgements(app)).toEqual([
      {
        path: 'leaseq-dev/Pipeline/Worker/Function',
        id: 'Annotation::AwsSolutions-L1',
        reason: expect.stringMatching(/^Node\.js 22 on purpose: the bundle targets node22/),
      },
    ]);
  });

  it('report what the reference stack avoids when it is added unfixed (the pack really runs)', () => {
    const { app, stack } = createLeaseqApp({ bundle: false });
    // A queue without the construct's TLS policy and DLQ, and a Node 22 function without the acknowledgement.
    new sqs.Queue(stack, 'Bare', { encryption: sqs.QueueEncryption.SQS_MANAGED });
    new lambda.Function(stack, 'BareFunction', {
      runtime: lambda.Runtime.NODEJS_22_X,
      handler: 'index.handler',
      code: lambda.Code.fromInline('exports.handler = async () => {};'),
    });
    const findings = nagFindings(app);
    expect(findings).toEqual(
      expect.arrayContaining([
        'AwsSolutions-SQS3 at leaseq-dev/Bare/Resource',
        'AwsSolutions-SQS4 at leaseq-dev/Bare/Resource',
        'AwsSolutions-L1 at leaseq-dev/BareFunction/Resource',
      ]),
    );
    expect(findings.filter((f) => f.includes('/Pipeline/'))).toEqual([]);
  });

  it('find nothing on the construct with an alarm topic of the user (the topic is the user’s to secure)', () => {
    const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'UserStack');
    const topic = new sns.Topic(stack, 'Ops', { enforceSSL: true });
    new LeaseqPipeline(stack, 'Jobs', {
      entry: fileURLToPath(new URL('../../functions/worker.ts', import.meta.url)),
      resourcePrefix: 'shop',
      alarmTopic: topic,
    });
    expect(nagFindings(app)).toEqual([]);
  });

  it('find nothing on the construct over an imported queue, DLQ, KMS key and state tables, with a producer', () => {
    const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'OrdersStack', { env: { account: '111122223333', region: 'eu-west-1' } });
    const arn = (name: string) => `arn:aws:sqs:eu-west-1:111122223333:${name}`;
    const pipeline = new LeaseqPipeline(stack, 'Jobs', {
      entry: fileURLToPath(new URL('../../functions/worker.ts', import.meta.url)),
      resourcePrefix: 'orders',
      existingQueue: {
        queue: sqs.Queue.fromQueueAttributes(stack, 'Orders', {
          queueArn: arn('orders'),
          keyArn: 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab',
        }),
        deadLetterQueue: sqs.Queue.fromQueueArn(stack, 'OrdersDlq', arn('orders-dlq')),
        visibilityTimeout: Duration.seconds(360),
        maxReceiveCount: 15,
      },
      existingStateTables: {
        jobs: dynamodb.Table.fromTableName(stack, 'JobsTable', 'orders-leaseq-jobs'),
        leases: dynamodb.Table.fromTableName(stack, 'LeasesTable', 'orders-leaseq-leases'),
      },
    });
    pipeline.addStackOutputs();
    pipeline.grantProducer(new iam.Role(stack, 'Producer', { assumedBy: new iam.AccountRootPrincipal() }));
    expect(nagFindings(app)).toEqual([]);
  });

  it('find nothing unacknowledged with large payloads on, acknowledging only the bucket access logs and its object grants', () => {
    const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'BigStack');
    const pipeline = new LeaseqPipeline(stack, 'Jobs', {
      entry: fileURLToPath(new URL('../../functions/worker.ts', import.meta.url)),
      resourcePrefix: 'big',
      largePayloads: true,
    });
    const producer = new iam.Role(stack, 'Producer', { assumedBy: new iam.AccountRootPrincipal() });
    pipeline.grantProducer(producer);

    expect(nagFindings(app)).toEqual([]);
    expect(
      acknowledgements(stack)
        .map((a) => `${a.id} at ${a.path}`)
        .sort(),
    ).toEqual([
      'Annotation::AwsSolutions-IAM5[Resource::<JobsPayloadBucketC08E9CAC.Arn>/payloads/*] at BigStack/Jobs/PayloadReads',
      'Annotation::AwsSolutions-IAM5[Resource::<JobsPayloadBucketC08E9CAC.Arn>/payloads/*] at BigStack/Producer',
      'Annotation::AwsSolutions-L1 at BigStack/Jobs/Worker/Function',
      'Annotation::AwsSolutions-S1 at BigStack/Jobs/PayloadBucket',
    ]);
  });

  it('find nothing unacknowledged with X-Ray on, and acknowledge its wildcard only on the X-Ray policy', () => {
    const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'TracedStack');
    const pipeline = new LeaseqPipeline(stack, 'Jobs', {
      entry: fileURLToPath(new URL('../../functions/worker.ts', import.meta.url)),
      resourcePrefix: 'traced',
      tracing: { xray: true },
    });

    expect(nagFindings(app)).toEqual([]);
    expect(acknowledgements(pipeline).filter((a) => a.id.includes('IAM5'))).toEqual([
      {
        path: 'TracedStack/Jobs/XRayWrites',
        id: 'Annotation::AwsSolutions-IAM5[Resource::*]',
        reason: expect.stringMatching(
          /^X-Ray PutTraceSegments and PutTelemetryRecords support no resource-level/,
        ),
      },
    ]);
    // The wildcard policy holds the two X-Ray write actions and nothing else.
    const template = Template.fromStack(stack);
    const wildcard = Object.values(
      template.findResources('AWS::IAM::Policy') as Record<
        string,
        { Properties: { PolicyDocument: { Statement: { Action: unknown; Resource: unknown }[] } } }
      >,
    )
      .flatMap((p) => p.Properties.PolicyDocument.Statement)
      .filter((st) => JSON.stringify(st.Resource).includes('"*"'));
    expect(wildcard.map((st) => (st.Action as string[]).length)).toEqual([2]);
    expect(wildcard).toEqual([
      expect.objectContaining({
        Action: expect.arrayContaining(['xray:PutTraceSegments', 'xray:PutTelemetryRecords']),
        Resource: '*',
      }),
    ]);
  });
});
