import { Stack, Token } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { CfnQueue } from 'aws-cdk-lib/aws-sqs';
import type { IConstruct } from 'constructs';
import { DEFAULTS } from '../shared/core/contract/defaults.ts';
import { minInvocationTimeoutSeconds } from '../shared/core/decisions/lease-timing.ts';
import {
  DEFAULT_DEDUP_TTL_SECONDS,
  handsBackUnstarted,
  redriveMaxReceiveCount,
  WORKER_ENV,
} from '../shared/resources.ts';
import {
  DEAD_LETTER_ATTRIBUTES_RESERVE_BYTES,
  RESEND_ATTRIBUTES_RESERVE_BYTES,
  SQS_MAX_MESSAGE_BYTES,
  VISIBILITY_TO_TIMEOUT_RATIO,
} from './constructs/job-queue.ts';
import { provisionedPollerErrors } from './constructs/provisioned-pollers.ts';

/** SQS's own default message retention, used when a queue sets none. */
const SQS_DEFAULT_RETENTION_SECONDS = 4 * 24 * 3600;
/** SQS's longest retention: an imported DLQ's, whose own setting synth cannot read. */
const SQS_MAX_RETENTION_SECONDS = 14 * 24 * 3600;

/** The settings of a deployed pipeline the protocol's timing and redrive rules depend on. */
export interface PipelineSafetyFacts {
  /** Visibility timeout of the jobs queue. */
  readonly visibilityTimeoutSeconds: number;
  /** Timeout of the worker function. */
  readonly functionTimeoutSeconds: number;
  /** The job lease (`LEASEQ_LEASE_MS`). */
  readonly leaseMs: number;
  /**
   * An explicit heartbeat period. The worker has no such setting today (it always beats at lease / 3),
   * so the construct never passes one; the rule that uses it guards a future setting or another caller.
   * @default floor(leaseMs / 3)
   */
  readonly heartbeatMs?: number;
  /** `LEASEQ_DEADLINE_MARGIN_MS` of the worker. @default DEFAULTS.deadlineMarginMs */
  readonly deadlineMarginMs?: number;
  /** `LEASEQ_BATCH_CONCURRENCY` of the worker. @default DEFAULTS.batchConcurrency */
  readonly batchConcurrency?: number;
  /** The event source's `ScalingConfig.MaximumConcurrency`. @default none (not checked) */
  readonly maxConcurrency?: number;
  /** The worker's reserved concurrency. @default none (not checked) */
  readonly reservedConcurrency?: number;
  /** The redrive policy's `maxReceiveCount` on the jobs queue. */
  readonly maxReceiveCount: number;
  /** The application's attempt limit (`LEASEQ_MAX_ATTEMPTS`). */
  readonly maxAttempts: number;
  /** Records per invocation of the event source mapping. */
  readonly batchSize: number;
  /** Whether the jobs queue is FIFO. */
  readonly fifo: boolean;
  /** The event source mapping's batching window (0 when none). */
  readonly maxBatchingWindowSeconds: number;
  /** How long the DLQ keeps a message. */
  readonly deadLetterRetentionSeconds: number;
  /** How long a dedup record lives after its last write. */
  readonly dedupTtlSeconds: number;
  /**
   * `MaximumMessageSize` of the jobs queue. When neither size is given, rule `letter-fits-dlq` is not
   * checked; when only one is, the other is SQS's default. @default SQS_MAX_MESSAGE_BYTES
   */
  readonly jobsMaxMessageBytes?: number;
  /** `MaximumMessageSize` of the DLQ (see `jobsMaxMessageBytes`). @default SQS_MAX_MESSAGE_BYTES */
  readonly deadLetterMaxMessageBytes?: number;
}

/** The rules {@link checkPipelineSafety} applies, one id each. */
export type PipelineSafetyRule =
  | 'lease-at-least-minimum'
  | 'timeout-leaves-a-lease'
  | 'visibility-covers-timeout'
  | 'visibility-covers-batching-window'
  | 'heartbeat-before-visibility'
  | 'lease-spans-two-heartbeats'
  | 'redrive-above-attempts'
  | 'no-batching-window-on-fifo'
  | 'dedup-outlives-dlq'
  | 'letter-fits-dlq'
  | 'reserved-covers-max-concurrency';

export interface PipelineSafetyViolation {
  readonly rule: PipelineSafetyRule;
  /** What was found and what is required, in one sentence. */
  readonly message: string;
}

/**
 * The protocol's rules (docs/protocol.md, "Timing rules") on a pipeline's settings. Pure: the construct
 * reads the facts from its own resources at synth time ({@link pipelineSafetyFacts}).
 */
export function checkPipelineSafety(facts: PipelineSafetyFacts): PipelineSafetyViolation[] {
  const found: PipelineSafetyViolation[] = [];
  const add = (rule: PipelineSafetyRule, message: string) => found.push({ rule, message });

  // The worker refuses a shorter lease at cold start (shared/worker/config.ts): fail the synth instead.
  if (facts.leaseMs < DEFAULTS.minLeaseMs) {
    add(
      'lease-at-least-minimum',
      `lease is ${facts.leaseMs} ms (${WORKER_ENV.leaseMs}); required at least ${DEFAULTS.minLeaseMs} ms`,
    );
  }

  // The processor starts no job under a lease below the minimum, and every lease ends the margin before the
  // invocation's deadline: under this timeout every record is handed back unrun, each hand-back a receive,
  // until SQS moves the message with no reason and no job item (issue 23).
  const marginMs = facts.deadlineMarginMs ?? DEFAULTS.deadlineMarginMs;
  const minTimeout = minInvocationTimeoutSeconds(marginMs);
  if (facts.functionTimeoutSeconds < minTimeout) {
    add(
      'timeout-leaves-a-lease',
      `worker timeout is ${facts.functionTimeoutSeconds} s; required at least ${minTimeout} s: every lease ends ` +
        `${WORKER_ENV.deadlineMarginMs} (${marginMs} ms) before the invocation's deadline and no job starts ` +
        `under a lease below ${DEFAULTS.minLeaseMs} ms, so every record would be handed back unrun ` +
        `(set workerTimeout to at least ${minTimeout} s, plus the longest job's run time)`,
    );
  }

  // The queue's visibility covers a message until the first beat shortens it, and AWS asks for 6x the
  // function timeout on Lambda event sources (the poller's own retries of a batch).
  const minVisibility = VISIBILITY_TO_TIMEOUT_RATIO * facts.functionTimeoutSeconds;
  if (facts.visibilityTimeoutSeconds < minVisibility) {
    add(
      'visibility-covers-timeout',
      `jobs queue visibility timeout is ${facts.visibilityTimeoutSeconds} s; required at least ${minVisibility} s ` +
        `(${VISIBILITY_TO_TIMEOUT_RATIO} x the worker timeout of ${facts.functionTimeoutSeconds} s): raise the ` +
        `queue's VisibilityTimeout to at least ${minVisibility} s or lower workerTimeout`,
    );
  }

  // On a standard queue the event source may gather records for up to its batching window before it
  // invokes (FIFO takes none: rule below): a record received at the window's start has used that much of
  // its visibility before the worker sees it, so the window comes on top of the 6x.
  const window = facts.fifo ? 0 : facts.maxBatchingWindowSeconds;
  if (
    window > 0 &&
    facts.visibilityTimeoutSeconds >= minVisibility &&
    facts.visibilityTimeoutSeconds < minVisibility + window
  ) {
    add(
      'visibility-covers-batching-window',
      `jobs queue visibility timeout is ${facts.visibilityTimeoutSeconds} s; required at least ${minVisibility + window} s ` +
        `(${VISIBILITY_TO_TIMEOUT_RATIO} x the worker timeout of ${facts.functionTimeoutSeconds} s plus the event ` +
        `source batching window of ${window} s)`,
    );
  }

  const heartbeatMs = facts.heartbeatMs ?? Math.floor(facts.leaseMs / 3);
  const heartbeatSource =
    facts.heartbeatMs === undefined ? `lease ${facts.leaseMs} ms / 3` : 'the explicit heartbeat setting';
  // The first beat must land while the message is still hidden, or another worker receives it meanwhile.
  // (In Lambda the lease is also capped to the invocation's deadline, which only shortens the beat; the
  // configured lease is checked because local workers and the first claim use it as is.)
  if (heartbeatMs >= facts.visibilityTimeoutSeconds * 1000) {
    add(
      'heartbeat-before-visibility',
      `heartbeat period is ${heartbeatMs} ms (${heartbeatSource}); required below the jobs queue ` +
        `visibility timeout of ${facts.visibilityTimeoutSeconds * 1000} ms (lower ${WORKER_ENV.leaseMs} or raise the visibility)`,
    );
  }

  // Two beats may fail before the lease ends. With the default heartbeat (lease / 3) this cannot fail;
  // it bites only on an explicit heartbeat period.
  if (facts.leaseMs < 2 * heartbeatMs) {
    add(
      'lease-spans-two-heartbeats',
      `lease is ${facts.leaseMs} ms; required at least two heartbeat periods, ${2 * heartbeatMs} ms ` +
        `(heartbeat ${heartbeatMs} ms from ${heartbeatSource})`,
    );
  }

  // The queue's redrive is a safety net above every receive leaseq causes itself (attempts, and the
  // records handed back unstarted: behind a failed FIFO group head, or waiting for a lane when the batch
  // concurrency is below the batch size): below that SQS dead-letters jobs leaseq would still run.
  const batchConcurrency = facts.batchConcurrency ?? DEFAULTS.batchConcurrency;
  const minReceives = redriveMaxReceiveCount({ ...facts, batchConcurrency });
  if (facts.maxReceiveCount < minReceives) {
    const formula = facts.fifo
      ? `maxAttempts ${facts.maxAttempts} x batchSize ${facts.batchSize} + margin, FIFO hand-backs are receives`
      : handsBackUnstarted({ ...facts, batchConcurrency })
        ? `maxAttempts ${facts.maxAttempts} x batchSize ${facts.batchSize} + margin, ${WORKER_ENV.concurrency} ` +
          `${batchConcurrency} below the batch size hands records back unstarted; or set ` +
          `${WORKER_ENV.concurrency} to at least batchSize ${facts.batchSize}`
        : `maxAttempts ${facts.maxAttempts} + margin`;
    add(
      'redrive-above-attempts',
      `jobs queue redrive maxReceiveCount is ${facts.maxReceiveCount}; required at least ${minReceives} (${formula}): ` +
        `raise the queue's redrive maxReceiveCount to ${minReceives} or lower maxAttempts`,
    );
  }

  // Lambda does not support a batching window on FIFO event sources.
  if (facts.fifo && facts.maxBatchingWindowSeconds > 0) {
    add(
      'no-batching-window-on-fifo',
      `event source batching window is ${facts.maxBatchingWindowSeconds} s on a FIFO queue; required 0 s (none)`,
    );
  }

  // The protocol needs dedup records to OUTLIVE the DLQ's retention (docs/protocol.md, "The job item"): a
  // letter redriven on its last day must still find its DEAD item and checkpoint, or the key runs again
  // from scratch. So the rule is dedup TTL >= DLQ retention (15 days >= 14 days by default), not the reverse.
  if (facts.dedupTtlSeconds < facts.deadLetterRetentionSeconds) {
    add(
      'dedup-outlives-dlq',
      `dedup record TTL is ${facts.dedupTtlSeconds} s; required at least the DLQ retention of ` +
        `${facts.deadLetterRetentionSeconds} s (dedup records must outlive the dead letters they describe)`,
    );
  }

  // A dead letter is the original body plus the leaseq.* reason attributes. If the largest message the
  // jobs queue takes does not fit into the DLQ with them, the worker's dead-lettering of it fails and the
  // message cycles until SQS's own redrive moves it, without its reason.
  // (Checked when either size is known; the other then counts as SQS's default.) The jobs queue may take
  // the re-send reserve more than the body limit (a limit's re-send adds its origin attribute); a letter
  // carries the body alone, and the reason attributes' worst case (~28 KiB) leaves that much of the
  // letter reserve unused.
  const sized = facts.jobsMaxMessageBytes !== undefined || facts.deadLetterMaxMessageBytes !== undefined;
  const jobsMax = facts.jobsMaxMessageBytes ?? SQS_MAX_MESSAGE_BYTES;
  const dlqMax = facts.deadLetterMaxMessageBytes ?? SQS_MAX_MESSAGE_BYTES;
  const letterRoom = DEAD_LETTER_ATTRIBUTES_RESERVE_BYTES - RESEND_ATTRIBUTES_RESERVE_BYTES;
  if (sized && jobsMax + letterRoom > dlqMax) {
    add(
      'letter-fits-dlq',
      `jobs queue MaximumMessageSize is ${jobsMax} bytes and the DLQ's ${dlqMax} bytes; required the jobs ` +
        `queue's at most the DLQ's less ${letterRoom} bytes for the reason attributes ` +
        `(at most ${dlqMax - letterRoom})`,
    );
  }

  // Event source mappings do not count reserved concurrency: the poller receives batches for more
  // invocations than Lambda then runs, and each throttled batch returns to the queue as receives.
  // Reserved concurrency 0 is the documented way to pause a function: nothing is meant to run then.
  if (
    facts.reservedConcurrency !== undefined &&
    facts.reservedConcurrency > 0 &&
    facts.maxConcurrency !== undefined &&
    facts.reservedConcurrency < facts.maxConcurrency
  ) {
    add(
      'reserved-covers-max-concurrency',
      `worker reserved concurrency is ${facts.reservedConcurrency} and the event source's maximum concurrency ` +
        `${facts.maxConcurrency}; required at least ${facts.maxConcurrency}: the event source does not count ` +
        'reserved concurrency, and each batch Lambda throttles returns to the queue as receives that run no job ' +
        `(set maxConcurrency to at most ${facts.reservedConcurrency}, or reserve at least ${facts.maxConcurrency})`,
    );
  }
  return found;
}

/**
 * The settings of an imported jobs queue, as the pipeline's props describe them (synth cannot read them).
 * With these the DLQ's retention counts as SQS's longest (14 days) and rule `letter-fits-dlq` is skipped.
 */
export interface ExistingQueueFacts {
  readonly visibilityTimeoutSeconds: number;
  readonly maxReceiveCount: number;
  readonly fifo: boolean;
}

/** The resources of a pipeline the facts are read from. */
export interface PipelineSafetyResources {
  /** A `Queue` of the app (its CfnQueue is read), or an imported one described by `queueFacts`. */
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
  /** The described settings of an imported queue. @default read from the queue's CfnQueue */
  readonly queueFacts?: ExistingQueueFacts;
  readonly function: lambda.Function;
  /** @default DEFAULT_DEDUP_TTL_SECONDS (the job store's default) */
  readonly dedupTtlSeconds?: number;
}

/**
 * Reads {@link PipelineSafetyFacts} from the L1 resources as they stand at synth time, so escape hatches
 * on the CfnQueue, CfnFunction or CfnEventSourceMapping are seen (raw `addPropertyOverride` values are
 * not: CDK applies those after validation). Returns the problems instead when a value cannot be read.
 */
export function pipelineSafetyFacts(
  resources: PipelineSafetyResources,
): { facts: PipelineSafetyFacts; problems: [] } | { facts?: undefined; problems: string[] } {
  const problems: string[] = [];
  const stack = Stack.of(resources.queue);
  const resolved = (value: unknown): unknown => (value === undefined ? undefined : stack.resolve(value));
  const number = (what: string, value: unknown, fallback?: number): number => {
    const v = resolved(value);
    if (v === undefined && fallback !== undefined) return fallback;
    const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isFinite(n)) {
      problems.push(`${what} is ${Token.isUnresolved(v) ? 'a token' : JSON.stringify(v)}; expected a number`);
      return Number.NaN;
    }
    return n;
  };

  const described = resources.queueFacts;
  // An imported queue has no CfnQueue: its described settings stand in, the rest is SQS's worst case.
  const queue = (described ? {} : (resources.queue.node.defaultChild ?? {})) as Partial<sqs.CfnQueue>;
  const dlqChild = resources.deadLetterQueue.node.defaultChild;
  const dlq = (dlqChild instanceof CfnQueue ? dlqChild : {}) as Partial<sqs.CfnQueue>;
  const fn = resources.function.node.defaultChild as lambda.CfnFunction;
  const mappings = resources.function.node
    .findAll()
    .filter((c: IConstruct): c is lambda.CfnEventSourceMapping => c instanceof lambda.CfnEventSourceMapping);
  const mapping = mappings[0];
  if (!mapping || mappings.length > 1) {
    problems.push(`the worker has ${mappings.length} event source mappings; expected exactly one`);
  }
  const redrive = (
    described ? { maxReceiveCount: described.maxReceiveCount } : resolved(queue.redrivePolicy)
  ) as { maxReceiveCount?: unknown } | undefined;
  const env = ((resolved(fn.environment) as { variables?: Record<string, unknown> } | undefined)?.variables ??
    {}) as Record<string, unknown>;
  const envInt = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined) return fallback;
    if (typeof raw !== 'string' || !/^[1-9]\d*$/.test(raw)) {
      problems.push(`worker environment ${name} is ${JSON.stringify(raw)}; expected a positive integer`);
      return Number.NaN;
    }
    return Number(raw);
  };

  const scaling = resolved(mapping?.scalingConfig) as { maximumConcurrency?: unknown } | undefined;
  const facts: PipelineSafetyFacts = {
    visibilityTimeoutSeconds:
      described?.visibilityTimeoutSeconds ??
      number('jobs queue VisibilityTimeout', queue.visibilityTimeout, 30),
    // CloudFormation's default Lambda timeout is 3 s.
    functionTimeoutSeconds: number('worker Timeout', fn.timeout, 3),
    leaseMs: envInt(WORKER_ENV.leaseMs, DEFAULTS.leaseMs),
    deadlineMarginMs: envInt(WORKER_ENV.deadlineMarginMs, DEFAULTS.deadlineMarginMs),
    batchConcurrency: envInt(WORKER_ENV.concurrency, DEFAULTS.batchConcurrency),
    maxReceiveCount: number('jobs queue RedrivePolicy.maxReceiveCount', redrive?.maxReceiveCount),
    maxAttempts: envInt(WORKER_ENV.maxAttempts, DEFAULTS.maxAttempts),
    // The Lambda default batch size for SQS is 10.
    batchSize: number('event source BatchSize', mapping?.batchSize, 10),
    fifo: described?.fifo ?? resolved(queue.fifoQueue) === true,
    maxBatchingWindowSeconds: number(
      'event source MaximumBatchingWindowInSeconds',
      mapping?.maximumBatchingWindowInSeconds,
      0,
    ),
    deadLetterRetentionSeconds: number(
      'DLQ MessageRetentionPeriod',
      dlq.messageRetentionPeriod,
      dlqChild instanceof CfnQueue ? SQS_DEFAULT_RETENTION_SECONDS : SQS_MAX_RETENTION_SECONDS,
    ),
    dedupTtlSeconds: resources.dedupTtlSeconds ?? DEFAULT_DEDUP_TTL_SECONDS,
    ...(scaling?.maximumConcurrency === undefined
      ? {}
      : {
          maxConcurrency: number('event source ScalingConfig.MaximumConcurrency', scaling.maximumConcurrency),
        }),
    ...(resolved(fn.reservedConcurrentExecutions) === undefined
      ? {}
      : {
          reservedConcurrency: number('worker ReservedConcurrentExecutions', fn.reservedConcurrentExecutions),
        }),
    ...(described || !(dlqChild instanceof CfnQueue)
      ? {}
      : {
          jobsMaxMessageBytes: number(
            'jobs queue MaximumMessageSize',
            queue.maximumMessageSize,
            SQS_MAX_MESSAGE_BYTES,
          ),
          deadLetterMaxMessageBytes: number(
            'DLQ MaximumMessageSize',
            dlq.maximumMessageSize,
            SQS_MAX_MESSAGE_BYTES,
          ),
        }),
  };
  return problems.length > 0 ? { problems } : { facts, problems: [] };
}

/** The synth-time validation messages of a pipeline: unreadable settings, then broken rules. */
export function pipelineSafetyErrors(resources: PipelineSafetyResources): string[] {
  const read = pipelineSafetyFacts(resources);
  if (!read.facts) return read.problems.map((p) => `leaseq safety check cannot read a setting: ${p}`);
  const rules = checkPipelineSafety(read.facts).map((v) => `leaseq safety rule ${v.rule}: ${v.message}`);
  return [...rules, ...provisionedPollerErrors(resources.function)];
}
