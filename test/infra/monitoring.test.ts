import { fileURLToPath } from 'node:url';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as sns from 'aws-cdk-lib/aws-sns';
import { describe, expect, it } from 'vitest';
import { LEASEQ_METRICS_NAMESPACE } from '../../infra/constructs/pipeline-monitoring.ts';
import { cdkJsonContext, createLeaseqApp, stackPropsFromContext } from '../../infra/leaseq-app.ts';
import {
  InvalidLeaseqPropsError,
  LeaseqPipeline,
  type LeaseqPipelineProps,
} from '../../infra/leaseq-pipeline.ts';
import { MetricName } from '../../shared/core/observe/metric-names.ts';
import { LOCAL_DEPLOY_CONTEXT } from '../../shared/local/deploy.ts';

const ENTRY = fileURLToPath(new URL('../../functions/worker.ts', import.meta.url));

function synth(
  props: Partial<LeaseqPipelineProps> = {},
  withTopic = false,
  context: Record<string, string> = {},
) {
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [], ...context } });
  const stack = new Stack(app, 'UserStack');
  const topic = withTopic ? new sns.Topic(stack, 'Ops') : undefined;
  const pipeline = new LeaseqPipeline(stack, 'Jobs', {
    entry: ENTRY,
    resourcePrefix: 'shop',
    ...(topic ? { alarmTopic: topic } : {}),
    ...props,
  });
  return { pipeline, stack, template: Template.fromStack(stack) };
}

type Resource = { Properties: Record<string, unknown> };
function alarm(template: Template, name: string): Record<string, unknown> {
  const found = Object.values(
    template.findResources('AWS::CloudWatch::Alarm', { Properties: { AlarmName: name } }) as Record<
      string,
      Resource
    >,
  );
  expect(found, `alarm ${name}`).toHaveLength(1);
  return found[0]?.Properties ?? {};
}

/** The dashboard body with its CloudFormation joins flattened to text (tokens as `{ref}`). */
function dashboardBody(template: Template): string {
  const [dashboard] = Object.values(template.findResources('AWS::CloudWatch::Dashboard')) as Resource[];
  const body = dashboard?.Properties.DashboardBody as { 'Fn::Join': [string, unknown[]] };
  return body['Fn::Join'][1].map((part) => (typeof part === 'string' ? part : '{ref}')).join('');
}

const ref = (logicalIdPrefix: string) => ({
  'Fn::GetAtt': [expect.stringMatching(new RegExp(`^${logicalIdPrefix}`)), 'QueueName'],
});

describe('LeaseqPipeline dashboard and alarms', () => {
  it('creates one dashboard with the queue, DLQ, worker and leaseq widgets', () => {
    const { template, pipeline } = synth();
    template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    template.hasResourceProperties('AWS::CloudWatch::Dashboard', { DashboardName: 'shop-leaseq' });
    expect(pipeline.dashboard).toBeDefined();
    const body = dashboardBody(template);
    for (const title of [
      'Jobs queue depth',
      'Age of oldest message',
      'DLQ depth',
      'Worker duration p50 / p99',
      'Worker errors',
      'Alarms',
      'leaseq outcomes',
      'leaseq leases',
      'leaseq duplicates and store',
      'Ping-pong: receives per attempt',
      'Store latency p99 per call (ms)',
      'Store calls abandoned at their bound',
    ]) {
      expect(body).toContain(`"title":"${title}"`);
    }
    // The store-latency smell per call kind, as the instrumented store reports it.
    expect(body).toContain('"leaseq","StoreLatency","operation","renew","service","leaseq"');
    for (const sqsMetric of [
      'ApproximateNumberOfMessagesVisible',
      'ApproximateNumberOfMessagesNotVisible',
      'ApproximateAgeOfOldestMessage',
    ]) {
      expect(body).toContain(`"AWS/SQS","${sqsMetric}","QueueName"`);
    }
    expect(body).toContain('"AWS/Lambda","Duration","FunctionName"');
    expect(body).toContain('"stat":"p50"');
    expect(body).toContain('"stat":"p99"');
    expect(body).toContain('"AWS/Lambda","Errors","FunctionName"');
    for (const name of [
      MetricName.JobSucceeded,
      MetricName.JobRetried,
      MetricName.JobDeadLettered,
      MetricName.DuplicateSkipped,
      MetricName.LeaseExpired,
      MetricName.LeaseLost,
      MetricName.OptimisticConflict,
      MetricName.StoreUnavailable,
    ]) {
      // Namespace leaseq, dimension service (the EMF totals the worker writes).
      expect(body).toMatch(new RegExp(`\\["${LEASEQ_METRICS_NAMESPACE}","${name}","service","leaseq",\\{`));
    }
  });

  it('creates the four alarms with their default thresholds and no action without a topic', () => {
    const { template, pipeline } = synth();
    template.resourceCountIs('AWS::CloudWatch::Alarm', 4);
    expect(Object.keys(pipeline.alarms ?? {}).sort()).toEqual([
      'deadLetters',
      'errorRate',
      'leaseLossRate',
      'oldestMessage',
    ]);
    const dlq = alarm(template, 'shop-leaseq-dlq-not-empty');
    expect(dlq).toMatchObject({
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
      DatapointsToAlarm: 1,
      TreatMissingData: 'notBreaching',
    });
    expect(dlq.AlarmActions).toBeUndefined();
    expect(dlq).toMatchObject({
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: ref('JobsJobQueueDeadLetterQueue') }],
      Period: 300,
      Statistic: 'Maximum',
    });
    // A plain metric alarm (no metric math), the form every CloudFormation implementation takes.
    expect(dlq.Metrics).toBeUndefined();
    const oldest = alarm(template, 'shop-leaseq-oldest-message-age');
    expect(oldest).toMatchObject({ Threshold: 1800, ComparisonOperator: 'GreaterThanThreshold' });
    expect(oldest).toMatchObject({
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateAgeOfOldestMessage',
      Dimensions: [{ Name: 'QueueName', Value: ref('JobsJobQueueE2EA5B4E') }],
      Period: 300,
      Statistic: 'Maximum',
    });
    const errors = alarm(template, 'shop-leaseq-worker-error-rate');
    expect(errors.Threshold).toBe(5);
    expect(errors.Metrics).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ Expression: 'IF(invocations > 0, 100 * errors / invocations, 0)' }),
        expect.objectContaining({
          Id: 'errors',
          MetricStat: expect.objectContaining({
            Metric: expect.objectContaining({ Namespace: 'AWS/Lambda', MetricName: 'Errors' }),
          }),
        }),
      ]),
    );
    const leases = alarm(template, 'shop-leaseq-lease-loss-rate');
    expect(leases.Threshold).toBe(1);
    const metrics = leases.Metrics as { Id: string; MetricStat?: { Metric: Record<string, unknown> } }[];
    const lost = metrics.find((m) => m.Id === 'lost');
    expect(lost?.MetricStat?.Metric).toEqual({
      Namespace: 'leaseq',
      MetricName: 'LeaseLost',
      Dimensions: [{ Name: 'service', Value: 'leaseq' }],
    });
    expect(metrics.map((m) => m.MetricStat?.Metric.MetricName).filter(Boolean)).toEqual(
      expect.arrayContaining(['JobSucceeded', 'JobRetried', 'JobDeadLettered', 'LeaseLost']),
    );
  });

  it('takes thresholds from alarmThresholds', () => {
    const { template } = synth({
      alarmThresholds: {
        deadLetters: 3,
        oldestMessageAge: Duration.hours(2),
        errorRatePercent: 10,
        leaseLossRatePercent: 2.5,
        period: Duration.minutes(1),
      },
    });
    const dlq = alarm(template, 'shop-leaseq-dlq-not-empty');
    expect(dlq.Threshold).toBe(3);
    expect(dlq.Period).toBe(60);
    const oldest = alarm(template, 'shop-leaseq-oldest-message-age');
    expect(oldest.Threshold).toBe(7200);
    expect(oldest.Period).toBe(60);
    expect(alarm(template, 'shop-leaseq-worker-error-rate').Threshold).toBe(10);
    expect(alarm(template, 'shop-leaseq-lease-loss-rate').Threshold).toBe(2.5);
  });

  it('refuses a threshold outside its range, naming it', () => {
    expect(() => synth({ alarmThresholds: { errorRatePercent: 0 } })).toThrow(InvalidLeaseqPropsError);
    expect(() => synth({ alarmThresholds: { errorRatePercent: 150 } })).toThrow(
      'LeaseqPipeline prop alarmThresholds.errorRatePercent is 150; expected a percentage above 0 and at most 100',
    );
    expect(() => synth({ alarmThresholds: { deadLetters: 0 } })).toThrow(/alarmThresholds.deadLetters is 0/);
    expect(() => synth({ alarmThresholds: { period: Duration.seconds(90) } })).toThrow(
      /alarmThresholds.period is "90 s"; expected a whole number of minutes/,
    );
  });

  it('sends every alarm to alarmTopic when given', () => {
    const { template } = synth({}, true);
    const alarms = Object.values(
      template.findResources('AWS::CloudWatch::Alarm') as Record<string, Resource>,
    );
    expect(alarms).toHaveLength(4);
    for (const a of alarms) {
      expect(a.Properties.AlarmActions).toEqual([{ Ref: expect.stringMatching(/^Ops/) }]);
    }
  });

  it('creates neither dashboard nor alarms with monitoring: false (-c monitoring=false on the app)', () => {
    const { template, pipeline } = synth({ monitoring: false });
    template.resourceCountIs('AWS::CloudWatch::Dashboard', 0);
    template.resourceCountIs('AWS::CloudWatch::Alarm', 0);
    expect(pipeline.dashboard).toBeUndefined();
    expect(pipeline.alarms).toBeUndefined();
    const app = new App({ context: { ...cdkJsonContext(), monitoring: 'false' } });
    expect(stackPropsFromContext(app).monitoring).toBe(false);
    const { stack } = createLeaseqApp({ bundle: false, stackProps: { monitoring: false } });
    Template.fromStack(stack).resourceCountIs('AWS::CloudWatch::Alarm', 0);
    const { stack: monitored } = createLeaseqApp({ bundle: false });
    Template.fromStack(monitored).resourceCountIs('AWS::CloudWatch::Alarm', 4);
  });

  it('uses count alarms in the local deploy loop, whose emulator refuses metric-math alarms', () => {
    expect(LOCAL_DEPLOY_CONTEXT).toEqual({ rateAlarms: 'counts' });
  });
});

describe('Prop: rateAlarms', () => {
  it("'counts' makes the two rate alarms plain count alarms (no metric math), the others unchanged", () => {
    const { template } = synth({ rateAlarms: 'counts' });
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')) as Resource[];
    expect(alarms).toHaveLength(4);
    for (const alarm of alarms) expect(alarm.Properties.Metrics).toBeUndefined();
    const byName = (suffix: string) =>
      alarms.find((a) => String(a.Properties.AlarmName).endsWith(suffix))?.Properties as Record<
        string,
        unknown
      >;
    expect(byName('worker-error-rate')).toMatchObject({
      MetricName: 'Errors',
      Namespace: 'AWS/Lambda',
      Threshold: 5,
    });
    expect(byName('lease-loss-rate')).toMatchObject({
      MetricName: 'LeaseLost',
      Namespace: 'leaseq',
      Threshold: 1,
    });
  });

  it("is read from the app's context (-c rateAlarms=counts, what leaseq local deploy passes) in a user's own stack", () => {
    const { template } = synth({}, false, { rateAlarms: 'counts' });
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')) as Resource[];
    expect(alarms).toHaveLength(4);
    for (const alarm of alarms) expect(alarm.Properties.Metrics).toBeUndefined();
  });

  it('the prop wins over the context; without either the rate alarms use metric math', () => {
    const withMath = (template: Template) =>
      (Object.values(template.findResources('AWS::CloudWatch::Alarm')) as Resource[]).filter(
        (a) => a.Properties.Metrics !== undefined,
      ).length;
    expect(withMath(synth({ rateAlarms: 'math' }, false, { rateAlarms: 'counts' }).template)).toBe(2);
    expect(withMath(synth().template)).toBe(2);
  });

  it('refuses a context value other than math or counts, naming the key', () => {
    expect(() => synth({}, false, { rateAlarms: 'count' })).toThrow(
      /LeaseqPipeline prop rateAlarms is "count"; expected math or counts \(context -c rateAlarms=counts/,
    );
  });
});
