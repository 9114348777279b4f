// The thresholds of the pipeline's alarms, with their defaults and the checks a bad one fails.
import { Duration } from 'aws-cdk-lib';

/** Thresholds of the pipeline's alarms. */
export interface LeaseqAlarmThresholds {
  /**
   * Alarm when the DLQ holds at least this many visible messages (a dead letter needs an operator).
   * @default 1
   */
  readonly deadLetters?: number;
  /**
   * Alarm when the oldest message of the jobs queue is older than this. Retries wait up to the backoff
   * cap (15 min) between attempts, so keep it above that.
   * @default Duration.minutes(30)
   */
  readonly oldestMessageAge?: Duration;
  /**
   * Alarm when this percentage of the worker's invocations fail (Lambda `Errors` / `Invocations`). Job
   * failures are partial batch failures, not invocation errors: these are crashes, timeouts, bad config.
   * @default 5
   */
  readonly errorRatePercent?: number;
  /**
   * Alarm when this percentage of attempts lose their job lease: `LeaseLost` / (`JobSucceeded` +
   * `JobRetried` + `JobDeadLettered` + `LeaseLost`). Lost leases mean heartbeats that do not get through
   * (store latency, a lease too short for the beat).
   * @default 1
   */
  readonly leaseLossRatePercent?: number;
  /**
   * Period of every alarm's metric; each alarm fires on one breaching period.
   * @default Duration.minutes(5)
   */
  readonly period?: Duration;
}

/** Properties of {@link PipelineMonitoring}. */
/** {@link LeaseqAlarmThresholds} with the defaults applied. */
export interface ResolvedAlarmThresholds {
  readonly deadLetters: number;
  readonly oldestMessageAge: Duration;
  readonly errorRatePercent: number;
  readonly leaseLossRatePercent: number;
  readonly period: Duration;
}

/**
 * Applies the defaults of {@link LeaseqAlarmThresholds}.
 * @returns the thresholds, or the name of the first bad one with what it should be.
 */
export function resolveAlarmThresholds(
  thresholds: LeaseqAlarmThresholds = {},
): ResolvedAlarmThresholds | { prop: keyof LeaseqAlarmThresholds; received: unknown; expected: string } {
  const resolved: ResolvedAlarmThresholds = {
    deadLetters: thresholds.deadLetters ?? 1,
    oldestMessageAge: thresholds.oldestMessageAge ?? Duration.minutes(30),
    errorRatePercent: thresholds.errorRatePercent ?? 5,
    leaseLossRatePercent: thresholds.leaseLossRatePercent ?? 1,
    period: thresholds.period ?? Duration.minutes(5),
  };
  if (!Number.isInteger(resolved.deadLetters) || resolved.deadLetters < 1) {
    return { prop: 'deadLetters', received: resolved.deadLetters, expected: 'an integer >= 1' };
  }
  for (const prop of ['errorRatePercent', 'leaseLossRatePercent'] as const) {
    const value = resolved[prop];
    if (!(Number.isFinite(value) && value > 0 && value <= 100)) {
      return { prop, received: value, expected: 'a percentage above 0 and at most 100' };
    }
  }
  const age = resolved.oldestMessageAge.toSeconds({ integral: false });
  if (!(age >= 60)) return { prop: 'oldestMessageAge', received: `${age} s`, expected: 'at least 60 s' };
  const period = resolved.period.toSeconds({ integral: false });
  if (!(period >= 60 && period % 60 === 0)) {
    return { prop: 'period', received: `${period} s`, expected: 'a whole number of minutes' };
  }
  return resolved;
}
