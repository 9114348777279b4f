import { fileURLToPath } from 'node:url';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { describe, expect, it } from 'vitest';
import { cdkJsonContext, createLeaseqApp } from '../../infra/leaseq-app.ts';
import { LeaseqPipeline, type LeaseqPipelineProps } from '../../infra/leaseq-pipeline.ts';
import { checkPipelineSafety, type PipelineSafetyFacts } from '../../infra/safety-checks.ts';
import { DEFAULT_DEDUP_TTL_SECONDS } from '../../shared/resources.ts';

const ENTRY = fileURLToPath(new URL('../../functions/worker.ts', import.meta.url));

/** Builds a pipeline, lets `tamper` change its resources, and synthesizes it. */
function synth(props: Partial<LeaseqPipelineProps> = {}, tamper?: (pipeline: LeaseqPipeline) => void) {
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'UserStack');
  const pipeline = new LeaseqPipeline(stack, 'Jobs', { entry: ENTRY, resourcePrefix: 'shop', ...props });
  tamper?.(pipeline);
  return Template.fromStack(stack);
}

const cfnQueue = (queue: sqs.IQueue) => queue.node.defaultChild as sqs.CfnQueue;
const mapping = (pipeline: LeaseqPipeline) => {
  const found = pipeline.worker.function.node
    .findAll()
    .find((c): c is lambda.CfnEventSourceMapping => c instanceof lambda.CfnEventSourceMapping);
  if (!found) throw new Error('no event source mapping');
  return found;
};

/** The defaults of the reference stack, as facts. */
const sound: PipelineSafetyFacts = {
  visibilityTimeoutSeconds: 360,
  functionTimeoutSeconds: 60,
  leaseMs: 30_000,
  maxReceiveCount: 15,
  maxAttempts: 5,
  batchSize: 10,
  fifo: false,
  maxBatchingWindowSeconds: 0,
  deadLetterRetentionSeconds: 14 * 24 * 3600,
  dedupTtlSeconds: DEFAULT_DEDUP_TTL_SECONDS,
};

describe('Synth-time safety checks', () => {
  it('pass the reference stack with its defaults, standard and FIFO', () => {
    for (const fifo of [false, true]) {
      const { app } = createLeaseqApp({ stackProps: { fifo }, bundle: false });
      expect(() => app.synth()).not.toThrow();
    }
    expect(checkPipelineSafety(sound)).toEqual([]);
  });

  it('rule visibility-covers-timeout: a visibility timeout below 6x the worker timeout fails synth', () => {
    expect(() =>
      synth({ workerTimeout: Duration.seconds(60) }, (p) => {
        cfnQueue(p.queue).visibilityTimeout = 300;
      }),
    ).toThrow(
      /visibility-covers-timeout: jobs queue visibility timeout is 300 s; required at least 360 s \(6 x the worker timeout of 60 s\)/,
    );
  });

  // Defect 5 (issue 18): the construct accepted any positive lease; the worker then handed every record back.
  it('rule lease-at-least-minimum: a lease below DEFAULTS.minLeaseMs fails synth, naming the minimum', () => {
    expect(() => synth({ environment: { LEASEQ_LEASE_MS: '500' } })).toThrow(
      /lease-at-least-minimum: lease is 500 ms \(LEASEQ_LEASE_MS\); required at least 1000 ms/,
    );
    expect(() => synth({ environment: { LEASEQ_LEASE_MS: '1000' } })).not.toThrow();
  });

  it('rule heartbeat-before-visibility: a lease whose heartbeat (lease / 3) reaches the visibility fails synth', () => {
    // 1,080,000 ms / 3 = 360,000 ms: the first beat would come just as the message shows again (360 s).
    expect(() => synth({ environment: { LEASEQ_LEASE_MS: '1080000' } })).toThrow(
      /heartbeat-before-visibility: heartbeat period is 360000 ms \(lease 1080000 ms \/ 3\); required below the jobs queue visibility timeout of 360000 ms/,
    );
    expect(() => synth({ environment: { LEASEQ_LEASE_MS: '1079997' } })).not.toThrow();
  });

  it('rule lease-spans-two-heartbeats: an explicit heartbeat over half the lease is refused', () => {
    // The worker always beats at lease / 3, so this rule cannot fail on a construct; it is checked on the
    // facts a future heartbeat setting would give.
    expect(checkPipelineSafety({ ...sound, heartbeatMs: 10_000 })).toEqual([]);
    expect(checkPipelineSafety({ ...sound, heartbeatMs: 15_001 })).toEqual([
      {
        rule: 'lease-spans-two-heartbeats',
        message:
          'lease is 30000 ms; required at least two heartbeat periods, 30002 ms (heartbeat 15001 ms from the explicit heartbeat setting)',
      },
    ]);
    for (const leaseMs of [300, 301, 302, 30_000, 3_600_000]) {
      const rules = checkPipelineSafety({ ...sound, leaseMs }).map((v) => v.rule);
      expect(rules).not.toContain('lease-spans-two-heartbeats');
    }
  });

  it('rule redrive-above-attempts: a maxReceiveCount at or below the attempts fails synth', () => {
    expect(() =>
      synth({ maxAttempts: 5 }, (p) => {
        cfnQueue(p.queue).redrivePolicy = {
          deadLetterTargetArn: p.deadLetterQueue.queueArn,
          maxReceiveCount: 5,
        };
      }),
    ).toThrow(
      /redrive-above-attempts: jobs queue redrive maxReceiveCount is 5; required at least 15 \(maxAttempts 5 \+ margin\)/,
    );
  });

  it('rule redrive-above-attempts on FIFO: the count must cover the hand-backs (attempts x batch size)', () => {
    expect(() =>
      synth({ fifo: true, maxAttempts: 5, batchSize: 4 }, (p) => {
        cfnQueue(p.queue).redrivePolicy = {
          deadLetterTargetArn: p.deadLetterQueue.queueArn,
          maxReceiveCount: 15,
        };
      }),
    ).toThrow(
      /redrive-above-attempts: jobs queue redrive maxReceiveCount is 15; required at least 30 \(maxAttempts 5 x batchSize 4 \+ margin, FIFO hand-backs are receives\)/,
    );
  });

  it('rule no-batching-window-on-fifo: a batching window on a FIFO event source fails synth', () => {
    expect(() =>
      synth({ fifo: true }, (p) => {
        mapping(p).maximumBatchingWindowInSeconds = 5;
      }),
    ).toThrow(
      /no-batching-window-on-fifo: event source batching window is 5 s on a FIFO queue; required 0 s/,
    );
    // A standard queue may batch (with a visibility that covers the window: rule below).
    expect(() =>
      synth({}, (p) => {
        mapping(p).maximumBatchingWindowInSeconds = 5;
        cfnQueue(p.queue).visibilityTimeout = 365;
      }),
    ).not.toThrow();
  });

  it('rule visibility-covers-batching-window: on a standard queue the visibility must also cover the batching window', () => {
    // The event source holds the records it received for up to the window before it invokes: their
    // visibility runs meanwhile.
    expect(() =>
      synth({ workerTimeout: Duration.seconds(60) }, (p) => {
        mapping(p).maximumBatchingWindowInSeconds = 60;
      }),
    ).toThrow(
      /visibility-covers-batching-window: jobs queue visibility timeout is 360 s; required at least 420 s \(6 x the worker timeout of 60 s plus the event source batching window of 60 s\)/,
    );
    expect(() =>
      synth({ workerTimeout: Duration.seconds(60) }, (p) => {
        mapping(p).maximumBatchingWindowInSeconds = 60;
        cfnQueue(p.queue).visibilityTimeout = 420;
      }),
    ).not.toThrow();
    expect(
      checkPipelineSafety({ ...sound, maxBatchingWindowSeconds: 300, visibilityTimeoutSeconds: 660 }),
    ).toEqual([]);
  });

  it('rule dedup-outlives-dlq: a DLQ that keeps letters longer than the dedup records fails synth', () => {
    // SQS caps retention at 14 days, under the 15-day TTL; an override past it is what this rule stops.
    expect(() =>
      synth({}, (p) => {
        cfnQueue(p.deadLetterQueue).messageRetentionPeriod = 16 * 24 * 3600;
      }),
    ).toThrow(
      /dedup-outlives-dlq: dedup record TTL is 1296000 s; required at least the DLQ retention of 1382400 s/,
    );
    expect(checkPipelineSafety({ ...sound, dedupTtlSeconds: 13 * 24 * 3600 }).map((v) => v.rule)).toEqual([
      'dedup-outlives-dlq',
    ]);
  });

  it('rule letter-fits-dlq: a jobs queue whose largest message cannot fit into the DLQ as a letter fails synth', () => {
    // The SQS default for both is 1 MiB: a letter of a 1 MiB body plus its reason attributes would not fit.
    expect(() =>
      synth({}, (p) => {
        cfnQueue(p.queue).maximumMessageSize = undefined;
      }),
    ).toThrow(
      /letter-fits-dlq: jobs queue MaximumMessageSize is 1048576 bytes and the DLQ's 1048576 bytes; required .*\(at most 1016064\)/,
    );
    expect(() =>
      synth({}, (p) => {
        cfnQueue(p.deadLetterQueue).maximumMessageSize = 262_144;
      }),
    ).toThrow(/letter-fits-dlq/);
    expect(checkPipelineSafety({ ...sound, jobsMaxMessageBytes: 1_048_576 }).map((v) => v.rule)).toEqual([
      'letter-fits-dlq',
    ]);
    expect(
      checkPipelineSafety({ ...sound, jobsMaxMessageBytes: 200_000, deadLetterMaxMessageBytes: 262_144 }),
    ).toEqual([]);
  });

  // Issue 23 item 1: a timeout of 4 s or less synthesized, and every record was handed back unrun until SQS
  // moved it to the DLQ with no reason.
  it('rule timeout-leaves-a-lease: a worker timeout that leaves no minimum lease after the deadline margin fails synth', () => {
    expect(() => synth({ workerTimeout: Duration.seconds(4) })).toThrow(
      /timeout-leaves-a-lease: worker timeout is 4 s; required at least 5 s: every lease ends LEASEQ_DEADLINE_MARGIN_MS \(3000 ms\) before the invocation's deadline and no job starts under a lease below 1000 ms, so every record would be handed back unrun \(set workerTimeout to at least 5 s, plus the longest job's run time\)/,
    );
    expect(() => synth({ workerTimeout: Duration.seconds(1) })).toThrow(/timeout-leaves-a-lease/);
    expect(() => synth({ workerTimeout: Duration.seconds(5) })).not.toThrow();
    // The margin is read from the worker's environment: a larger one raises the minimum.
    expect(() =>
      synth({ workerTimeout: Duration.seconds(11), environment: { LEASEQ_DEADLINE_MARGIN_MS: '10000' } }),
    ).toThrow(
      /worker timeout is 11 s; required at least 12 s: every lease ends LEASEQ_DEADLINE_MARGIN_MS \(10000 ms\)/,
    );
    expect(() =>
      synth({ workerTimeout: Duration.seconds(12), environment: { LEASEQ_DEADLINE_MARGIN_MS: '10000' } }),
    ).not.toThrow();
    // Review: 6 s with a 4,999 ms margin left 1,001 ms to the deadline, so a job started only if its claim
    // took under 1 ms; a second of slack is required.
    expect(() =>
      synth({ workerTimeout: Duration.seconds(6), environment: { LEASEQ_DEADLINE_MARGIN_MS: '4999' } }),
    ).toThrow(/worker timeout is 6 s; required at least 7 s/);
  });

  // Issue 23 item 3: with LEASEQ_BATCH_CONCURRENCY below the batch size, records that cannot start before
  // the deadline are handed back unstarted; the construct raises the redrive count as it does on FIFO.
  it('rule redrive-above-attempts with batch concurrency below the batch size: the count must cover the hand-backs', () => {
    const redrive = (template: ReturnType<typeof synth>) =>
      Object.values(template.findResources('AWS::SQS::Queue', { Properties: { QueueName: 'shop-jobs' } }))
        .map((r) => (r as { Properties: { RedrivePolicy: { maxReceiveCount: number } } }).Properties)
        .map((p) => p.RedrivePolicy.maxReceiveCount);
    expect(redrive(synth({ environment: { LEASEQ_BATCH_CONCURRENCY: '2' } }))).toEqual([5 * 10 + 10]);
    expect(redrive(synth({ batchSize: 4, environment: { LEASEQ_BATCH_CONCURRENCY: '4' } }))).toEqual([15]);
    expect(() =>
      synth({ environment: { LEASEQ_BATCH_CONCURRENCY: '2' } }, (p) => {
        cfnQueue(p.queue).redrivePolicy = {
          deadLetterTargetArn: p.deadLetterQueue.queueArn,
          maxReceiveCount: 15,
        };
      }),
    ).toThrow(
      /redrive-above-attempts: jobs queue redrive maxReceiveCount is 15; required at least 60 \(maxAttempts 5 x batchSize 10 \+ margin, LEASEQ_BATCH_CONCURRENCY 2 below the batch size hands records back unstarted; or set LEASEQ_BATCH_CONCURRENCY to at least batchSize 10\)/,
    );
    expect(checkPipelineSafety({ ...sound, batchConcurrency: 3 }).map((v) => v.rule)).toEqual([
      'redrive-above-attempts',
    ]);
    expect(checkPipelineSafety({ ...sound, batchConcurrency: 10 })).toEqual([]);
  });

  // Issue 23, reasoned item: event sources ignore reserved concurrency, so the batches Lambda throttles go
  // back to the queue as receives that are not attempts.
  it('rule reserved-covers-max-concurrency: reserved concurrency below the event source maximum fails synth', () => {
    const reserve = (n: number) => (p: LeaseqPipeline) => {
      (p.worker.function.node.defaultChild as lambda.CfnFunction).reservedConcurrentExecutions = n;
    };
    expect(() => synth({ maxConcurrency: 5 }, reserve(2))).toThrow(
      /reserved-covers-max-concurrency: worker reserved concurrency is 2 and the event source's maximum concurrency 5; required at least 5: the event source does not count reserved concurrency, and each batch Lambda throttles returns to the queue as receives that run no job \(set maxConcurrency to at most 2, or reserve at least 5\)/,
    );
    expect(() => synth({ maxConcurrency: 5 }, reserve(1))).toThrow(/reserved-covers-max-concurrency/);
    // Reserved concurrency 0 pauses the function (nothing is meant to run): not refused.
    expect(() => synth({ maxConcurrency: 5 }, reserve(0))).not.toThrow();
    expect(() => synth({ maxConcurrency: 5 }, reserve(5))).not.toThrow();
    expect(() => synth({ maxConcurrency: 5 })).not.toThrow();
  });

  it('reports a worker setting it cannot read instead of guessing', () => {
    expect(() => synth({ environment: { LEASEQ_LEASE_MS: 'soon' } })).toThrow(
      /cannot read a setting: worker environment LEASEQ_LEASE_MS is "soon"; expected a positive integer/,
    );
  });
});
