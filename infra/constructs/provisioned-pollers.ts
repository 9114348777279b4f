// The Lambda SQS event source's provisioned mode (`ProvisionedPollerConfig`): a floor and a ceiling of
// event pollers the mapping keeps, instead of standard mode's scaling (up to 1,250 concurrent invocations;
// provisioned mode up to 20,000, each poller driving up to 10 at once).
// https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html ("mutually exclusive" with maximum concurrency).
// What AWS refuses is refused at synth: for SQS, MinimumPollers 2-200 and MaximumPollers 2-2000
// (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-lambda-eventsourcemapping-provisionedpollerconfig.html),
// minimum at most maximum, and no MaximumConcurrency beside it (the two modes do not combine). leaseq's
// own rule, as for maxConcurrency: a reserved concurrency must cover what the pollers can start, since
// every batch Lambda throttles goes back to the queue as a receive that runs no job.

import { Stack, Token } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type { IConstruct } from 'constructs';

/** Provisioned mode of the worker's event source (`LeaseqPipelineProps.provisionedPollers`). */
export interface LeaseqProvisionedPollers {
  /** Pollers kept at the least (2-200). @default 2 */
  readonly minimumPollers?: number;
  /** Pollers at the most (2-2000); each drives up to 10 concurrent invocations. @default 200 */
  readonly maximumPollers?: number;
}

/** Concurrent invocations one SQS event poller drives at the most. */
export const INVOCATIONS_PER_POLLER = 10;
const MIN = { low: 2, high: 200 };
const MAX = { low: 2, high: 2000 };

/** The scaling props of a pipeline that shape its event source. */
export interface EventSourceScalingProps {
  /**
   * The event source's provisioned mode: pollers kept between `minimumPollers` and `maximumPollers`, up
   * to 20,000 concurrent invocations, billed per poller hour (docs/jobs.md, "Scaling the event source").
   * Not with `maxConcurrency` (AWS refuses both on one mapping). @default standard mode
   */
  readonly provisionedPollers?: LeaseqProvisionedPollers;
}

/**
 * The event source settings of a pipeline: `maxConcurrency` (standard mode), or `provisionedPollers`.
 * @throws the error `fail` makes, for what AWS refuses: both at once, a bound out of its range, a
 * minimum above the maximum.
 */
export function checkEventSourceScaling(
  props: EventSourceScalingProps & { readonly maxConcurrency?: number },
  maxConcurrency: number,
  fail: (prop: string, received: unknown, expected: string) => Error,
): { readonly maxConcurrency?: number; readonly provisionedPollers?: LeaseqProvisionedPollers } {
  const pollers = props.provisionedPollers;
  if (pollers === undefined) return { maxConcurrency };
  if (props.maxConcurrency !== undefined) {
    throw fail(
      'maxConcurrency',
      props.maxConcurrency,
      'no maxConcurrency with provisionedPollers: the event source takes one or the other (bound the concurrency with provisionedPollers.maximumPollers instead, up to 10 invocations a poller)',
    );
  }
  const check = (name: 'minimumPollers' | 'maximumPollers', range: { low: number; high: number }) => {
    const value = pollers[name];
    if (value === undefined || Token.isUnresolved(value)) return;
    if (!Number.isInteger(value) || value < range.low || value > range.high) {
      throw fail(`provisionedPollers.${name}`, value, `an integer from ${range.low} to ${range.high}`);
    }
  };
  check('minimumPollers', MIN);
  check('maximumPollers', MAX);
  const min = pollers.minimumPollers ?? MIN.low;
  const max = pollers.maximumPollers ?? 200;
  if (!Token.isUnresolved(min) && !Token.isUnresolved(max) && min > max) {
    throw fail(
      'provisionedPollers.minimumPollers',
      min,
      `at most provisionedPollers.maximumPollers (${max}${pollers.maximumPollers === undefined ? ', its default' : ''})`,
    );
  }
  return { provisionedPollers: pollers };
}

/** The mapping's `ProvisionedPollerConfig` for provisioned mode. */
export function provisionedPollerConfig(pollers: LeaseqProvisionedPollers): lambda.ProvisionedPollerConfig {
  return {
    ...(pollers.minimumPollers === undefined ? {} : { minimumPollers: pollers.minimumPollers }),
    ...(pollers.maximumPollers === undefined ? {} : { maximumPollers: pollers.maximumPollers }),
  };
}

/**
 * Synth-time rules on the worker's event source mapping as built (also after an escape hatch):
 * `pollers-without-max-concurrency` and `reserved-covers-pollers`.
 */
export function provisionedPollerErrors(fn: lambda.Function): string[] {
  const stack = Stack.of(fn);
  const mapping = fn.node
    .findAll()
    .find((c: IConstruct): c is lambda.CfnEventSourceMapping => c instanceof lambda.CfnEventSourceMapping);
  const config = mapping && (stack.resolve(mapping.provisionedPollerConfig) as Record<string, unknown>);
  if (!config) return [];
  const errors: string[] = [];
  const scaling = stack.resolve(mapping.scalingConfig) as { maximumConcurrency?: unknown } | undefined;
  if (scaling?.maximumConcurrency !== undefined) {
    errors.push(
      `leaseq safety rule pollers-without-max-concurrency: the event source has ProvisionedPollerConfig and ScalingConfig.MaximumConcurrency ${JSON.stringify(scaling.maximumConcurrency)}; AWS takes one or the other (bound the concurrency with MaximumPollers)`,
    );
  }
  const reserved = stack.resolve((fn.node.defaultChild as lambda.CfnFunction).reservedConcurrentExecutions);
  const maximum = config.maximumPollers ?? 200;
  if (typeof reserved === 'number' && reserved > 0 && typeof maximum === 'number') {
    const most = maximum * INVOCATIONS_PER_POLLER;
    if (reserved < most) {
      errors.push(
        `leaseq safety rule reserved-covers-pollers: worker reserved concurrency is ${reserved} and the event source's ${maximum} pollers start up to ${most} invocations at once; required at least ${most}: each batch Lambda throttles returns to the queue as receives that run no job (set maximumPollers to at most ${Math.max(2, Math.floor(reserved / INVOCATIONS_PER_POLLER))}, or reserve at least ${most})`,
      );
    }
  }
  return errors;
}
