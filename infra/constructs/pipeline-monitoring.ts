import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { MetricName } from '../../shared/core/observe/metric-names.ts';
import { type LeaseqAlarmThresholds, resolveAlarmThresholds } from './alarm-thresholds.ts';

/**
 * CloudWatch namespace of leaseq's own metrics (the `MetricName`s). The worker's Lambda sets
 * `POWERTOOLS_METRICS_NAMESPACE` to it. The metrics carry no dimension: `shared/core` counts them without
 * one (only `JobsPerWorker` has a `worker` dimension, not used here). A sink that publishes them (EMF)
 * must therefore not add any, e.g. Powertools' default `service` dimension, or these widgets and the
 * lease-loss alarm see nothing.
 */
export const LEASEQ_METRICS_NAMESPACE = 'leaseq';

/** The job-store call kinds the worker measures (the `operation` dimension of StoreLatency/StoreTimeout). */
const STORE_OPERATIONS = [
  'claim',
  'renew',
  'checkpoint',
  'complete',
  'release',
  'markDead',
  'claimAndComplete',
] as const;

export interface PipelineMonitoringProps {
  /** Physical name of the dashboard and prefix of the alarm names. */
  readonly name: string;
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
  readonly function: lambda.IFunction;
  /** @default the defaults of {@link LeaseqAlarmThresholds} */
  readonly thresholds?: LeaseqAlarmThresholds;
  /** Topic every alarm notifies when it goes into ALARM. @default no action */
  readonly alarmTopic?: sns.ITopic;
  /**
   * The worker's `POWERTOOLS_SERVICE_NAME`: its EMF metrics carry it as the `service` dimension (the
   * totals; a `service` + `jobType` set holds the breakdown). @default 'leaseq'
   */
  readonly serviceName?: string;
  /**
   * How the error-rate and lease-loss alarms are computed: `math` (rates in percent, metric math, as on
   * AWS), or `counts` (plain alarms on the error and LeaseLost counts, their thresholds read as counts
   * per period: for CloudFormation implementations without metric-math alarms, like the local emulator).
   * @default 'math'
   */
  readonly rateAlarms?: 'math' | 'counts';
}

/** The pipeline's alarms. */
export interface LeaseqAlarms {
  /** The DLQ is not empty. */
  readonly deadLetters: cloudwatch.Alarm;
  /** The jobs queue's oldest message is too old. */
  readonly oldestMessage: cloudwatch.Alarm;
  /** Too many worker invocations fail. */
  readonly errorRate: cloudwatch.Alarm;
  /** Too many attempts lose their job lease. */
  readonly leaseLossRate: cloudwatch.Alarm;
}

/**
 * A CloudWatch dashboard of the pipeline (queue, DLQ, worker, leaseq's own metrics) and its alarms: DLQ
 * not empty, oldest message too old, worker error rate, lease-loss rate.
 */
export class PipelineMonitoring extends Construct {
  readonly dashboard: cloudwatch.Dashboard;
  readonly alarms: LeaseqAlarms;

  constructor(scope: Construct, id: string, props: PipelineMonitoringProps) {
    super(scope, id);
    const thresholds = resolveAlarmThresholds(props.thresholds);
    if ('prop' in thresholds) {
      throw new Error(
        `PipelineMonitoring threshold ${thresholds.prop} is ${JSON.stringify(thresholds.received)}; expected ${thresholds.expected}`,
      );
    }
    const period = thresholds.period;
    const leaseq = (metricName: MetricName, label: string = metricName) =>
      new cloudwatch.Metric({
        namespace: LEASEQ_METRICS_NAMESPACE,
        metricName,
        dimensionsMap: { service: props.serviceName ?? 'leaseq' },
        statistic: cloudwatch.Stats.SUM,
        period,
        label,
      });

    const visible = props.queue.metricApproximateNumberOfMessagesVisible({ period, label: 'Visible' });
    const inFlight = props.queue.metricApproximateNumberOfMessagesNotVisible({ period, label: 'In flight' });
    // No labels on the metrics the plain alarms use: a labelled metric is rendered as a `Metrics` list,
    // and a plain MetricName/Namespace alarm is the simplest form (every CloudFormation implementation
    // takes it). The widgets add the labels.
    const oldest = props.queue.metricApproximateAgeOfOldestMessage({
      period,
      statistic: cloudwatch.Stats.MAXIMUM,
    });
    const dlqDepth = props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
      period,
      statistic: cloudwatch.Stats.MAXIMUM,
    });
    const invocations = props.function.metricInvocations({ period, label: 'Invocations' });
    const errors = props.function.metricErrors({ period, label: 'Errors' });
    const throttles = props.function.metricThrottles({ period, label: 'Throttles' });
    const p50 = props.function.metricDuration({ period, statistic: cloudwatch.Stats.p(50), label: 'p50' });
    const p99 = props.function.metricDuration({ period, statistic: cloudwatch.Stats.p(99), label: 'p99' });

    const errorRate = new cloudwatch.MathExpression({
      expression: 'IF(invocations > 0, 100 * errors / invocations, 0)',
      usingMetrics: { errors, invocations },
      period,
      label: 'Worker error rate (%)',
    });
    // One flat expression: FILL turns periods without a count into 0 (the worker emits nothing when idle).
    const attempts = 'FILL(ok, 0) + FILL(retried, 0) + FILL(dead, 0) + FILL(lost, 0)';
    const leaseLossRate = new cloudwatch.MathExpression({
      expression: `IF((${attempts}) > 0, 100 * FILL(lost, 0) / (${attempts}), 0)`,
      usingMetrics: {
        ok: leaseq(MetricName.JobSucceeded),
        retried: leaseq(MetricName.JobRetried),
        dead: leaseq(MetricName.JobDeadLettered),
        lost: leaseq(MetricName.LeaseLost),
      },
      period,
      label: 'Lease-loss rate (%)',
    });

    const alarm = (
      alarmId: string,
      suffix: string,
      description: string,
      metric: cloudwatch.IMetric,
      threshold: number,
      comparisonOperator: cloudwatch.ComparisonOperator,
    ) => {
      const created = new cloudwatch.Alarm(this, alarmId, {
        alarmName: `${props.name}-${suffix}`,
        alarmDescription: description,
        metric,
        threshold,
        comparisonOperator,
        evaluationPeriods: 1,
        datapointsToAlarm: 1,
        // No data means no messages or no invocations: nothing is wrong.
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      if (props.alarmTopic) created.addAlarmAction(new SnsAction(props.alarmTopic));
      return created;
    };
    const atLeast = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD;
    const above = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD;
    this.alarms = {
      deadLetters: alarm(
        'DeadLettersAlarm',
        'dlq-not-empty',
        `The DLQ holds at least ${thresholds.deadLetters} dead letter(s): inspect with \`leaseq dlq\` and redrive or discard`,
        dlqDepth,
        thresholds.deadLetters,
        atLeast,
      ),
      oldestMessage: alarm(
        'OldestMessageAlarm',
        'oldest-message-age',
        `The jobs queue's oldest message is older than ${thresholds.oldestMessageAge.toSeconds()} s: workers are behind or stuck`,
        oldest,
        thresholds.oldestMessageAge.toSeconds(),
        above,
      ),
      errorRate:
        props.rateAlarms === 'counts'
          ? alarm(
              'ErrorRateAlarm',
              'worker-error-rate',
              `More than ${thresholds.errorRatePercent} worker invocations failed in a period (crashes, timeouts, configuration)`,
              props.function.metricErrors({ period }),
              thresholds.errorRatePercent,
              above,
            )
          : alarm(
              'ErrorRateAlarm',
              'worker-error-rate',
              `More than ${thresholds.errorRatePercent}% of worker invocations failed (crashes, timeouts, configuration)`,
              errorRate,
              thresholds.errorRatePercent,
              above,
            ),
      leaseLossRate:
        props.rateAlarms === 'counts'
          ? alarm(
              'LeaseLossRateAlarm',
              'lease-loss-rate',
              `More than ${thresholds.leaseLossRatePercent} attempts lost their job lease in a period (leaseq LeaseLost)`,
              new cloudwatch.Metric({
                namespace: LEASEQ_METRICS_NAMESPACE,
                metricName: MetricName.LeaseLost,
                dimensionsMap: { service: props.serviceName ?? 'leaseq' },
                statistic: cloudwatch.Stats.SUM,
                period,
              }),
              thresholds.leaseLossRatePercent,
              above,
            )
          : alarm(
              'LeaseLossRateAlarm',
              'lease-loss-rate',
              `More than ${thresholds.leaseLossRatePercent}% of attempts lost their job lease (leaseq LeaseLost)`,
              leaseLossRate,
              thresholds.leaseLossRatePercent,
              above,
            ),
    };

    const wide = { width: 8, height: 6 };
    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: props.name,
      defaultInterval: Duration.hours(3),
      widgets: [
        [
          new cloudwatch.GraphWidget({ ...wide, title: 'Jobs queue depth', left: [visible, inFlight] }),
          new cloudwatch.GraphWidget({
            ...wide,
            title: 'Age of oldest message',
            left: [oldest.with({ label: 'Age of oldest message (s)' })],
            leftAnnotations: [this.alarms.oldestMessage.toAnnotation()],
          }),
          new cloudwatch.GraphWidget({
            ...wide,
            title: 'DLQ depth',
            left: [dlqDepth.with({ label: 'Dead letters' })],
            leftAnnotations: [this.alarms.deadLetters.toAnnotation()],
          }),
        ],
        [
          new cloudwatch.GraphWidget({ ...wide, title: 'Worker duration p50 / p99', left: [p50, p99] }),
          new cloudwatch.GraphWidget({
            ...wide,
            title: 'Worker errors',
            left: [errors, throttles, invocations],
            right: [errorRate],
          }),
          new cloudwatch.AlarmStatusWidget({
            ...wide,
            title: 'Alarms',
            alarms: Object.values(this.alarms),
          }),
        ],
        [
          new cloudwatch.GraphWidget({
            ...wide,
            title: 'leaseq outcomes',
            left: [
              leaseq(MetricName.JobSucceeded),
              leaseq(MetricName.JobRetried),
              leaseq(MetricName.JobDeadLettered),
            ],
          }),
          new cloudwatch.GraphWidget({
            ...wide,
            title: 'leaseq leases',
            left: [
              leaseq(MetricName.LeaseExpired),
              leaseq(MetricName.LeaseLost),
              leaseq(MetricName.OptimisticConflict),
            ],
            right: [leaseLossRate],
          }),
          new cloudwatch.GraphWidget({
            ...wide,
            title: 'leaseq duplicates and store',
            left: [
              leaseq(MetricName.DuplicateSkipped),
              leaseq(MetricName.DeadCopyDropped),
              leaseq(MetricName.StoreUnavailable),
            ],
          }),
        ],
        // The seed's operational smells: ping-pong (receives per attempt, hand-backs) and store latency
        // (p99 per call kind, calls abandoned at their lease-derived bound).
        [
          new cloudwatch.GraphWidget({
            ...wide,
            title: 'Ping-pong: receives per attempt',
            left: [
              new cloudwatch.MathExpression({
                expression: 'IF(FILL(claimed, 0) > 0, FILL(received, 0) / claimed, 0)',
                usingMetrics: {
                  received: leaseq(MetricName.MessageReceived),
                  claimed: leaseq(MetricName.JobClaimed),
                },
                period,
                label: 'Receives per attempt',
              }),
            ],
            right: [leaseq(MetricName.HandBack, 'Given back without running')],
          }),
          new cloudwatch.GraphWidget({
            ...wide,
            title: 'Store latency p99 per call (ms)',
            left: STORE_OPERATIONS.map(
              (operation) =>
                new cloudwatch.Metric({
                  namespace: LEASEQ_METRICS_NAMESPACE,
                  metricName: MetricName.StoreLatency,
                  dimensionsMap: { service: props.serviceName ?? 'leaseq', operation },
                  statistic: cloudwatch.Stats.p(99),
                  period,
                  label: operation,
                }),
            ),
          }),
          new cloudwatch.GraphWidget({
            ...wide,
            title: 'Store calls abandoned at their bound',
            left: STORE_OPERATIONS.map(
              (operation) =>
                new cloudwatch.Metric({
                  namespace: LEASEQ_METRICS_NAMESPACE,
                  metricName: MetricName.StoreTimeout,
                  dimensionsMap: { service: props.serviceName ?? 'leaseq', operation },
                  statistic: cloudwatch.Stats.SUM,
                  period,
                  label: operation,
                }),
            ),
          }),
        ],
      ],
    });
  }
}
