import { Duration, type RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import {
  DEAD_LETTER_ATTRIBUTES_RESERVE_BYTES,
  DEFAULT_MAX_BODY_BYTES,
  RESEND_ATTRIBUTES_RESERVE_BYTES,
  SQS_MAX_MESSAGE_BYTES,
} from '../../shared/core/contract/envelope.ts';

/** Properties of {@link JobQueue}. */
export interface JobQueueProps {
  /** Physical name of the jobs queue (`.fifo` suffix included for FIFO). */
  readonly queueName: string;
  /** Physical name of the dead-letter queue (`.fifo` suffix included for FIFO). */
  readonly deadLetterQueueName: string;
  /**
   * Longest time one consumer invocation may take (the worker Lambda's timeout). The visibility
   * timeout defaults to six times this, as AWS recommends for Lambda event sources, so a message is
   * not redelivered while a batch (and the event source's own retries) may still be working on it.
   */
  readonly consumerTimeout: Duration;
  /**
   * Visibility timeout of the jobs queue; must be at least 6x `consumerTimeout` and at most 12 hours.
   * @default 6 x consumerTimeout
   */
  readonly visibilityTimeout?: Duration;
  /**
   * SQS receives after which SQS itself moves a message to the DLQ. A safety net only: set it above
   * the application's own attempt limit (1-1000).
   */
  readonly maxReceiveCount: number;
  /**
   * How long the jobs queue keeps a message. Kept below the DLQ's retention: for standard queues a
   * redriven message keeps its original enqueue time, so the DLQ must hold it longer.
   * @default Duration.days(4)
   */
  readonly retentionPeriod?: Duration;
  /** How long the DLQ keeps a message (max 14 days). @default Duration.days(14) */
  readonly deadLetterRetentionPeriod?: Duration;
  /** FIFO queues (ordered per message group, deduplicated by MessageDeduplicationId). @default false */
  readonly fifo?: boolean;
  /**
   * The largest body the jobs queue takes (the workers' body limit), 1024 up to
   * {@link JOBS_QUEUE_MAX_MESSAGE_BYTES}. Its `MaximumMessageSize` is this plus
   * {@link RESEND_ATTRIBUTES_RESERVE_BYTES}: SQS counts attributes toward the size, and a limit's re-send
   * of any body the workers run adds its origin attribute. @default JOBS_QUEUE_MAX_MESSAGE_BYTES
   */
  readonly maxMessageSizeBytes?: number;
  /** Removal policy of both queues. */
  readonly removalPolicy: RemovalPolicy;
}

// The sizes live with the envelope: the worker and the producer check bodies against the same numbers.
export { DEAD_LETTER_ATTRIBUTES_RESERVE_BYTES, RESEND_ATTRIBUTES_RESERVE_BYTES, SQS_MAX_MESSAGE_BYTES };

/**
 * The largest body the jobs queue is for: the SQS maximum less the letter reserve, so that any body the
 * jobs queue took still fits into the DLQ (which takes the SQS maximum) with its reason attributes. The
 * workers' default body limit (`DEFAULT_MAX_BODY_BYTES`) is the same; the queue's `MaximumMessageSize`
 * is this plus the re-send reserve (`RESEND_ATTRIBUTES_RESERVE_BYTES`).
 */
export const JOBS_QUEUE_MAX_MESSAGE_BYTES = DEFAULT_MAX_BODY_BYTES;

/** Minimum ratio of visibility timeout to consumer timeout (AWS guidance for Lambda SQS sources). */
export const VISIBILITY_TO_TIMEOUT_RATIO = 6;
const MAX_VISIBILITY = Duration.hours(12);

/**
 * The jobs queue and its dead-letter queue with secure defaults: SQS-managed server-side encryption,
 * a TLS-only queue policy (deny when `aws:SecureTransport` is false), a redrive policy as safety net,
 * and message size limits under which every message of the jobs queue fits into the DLQ as a letter.
 */
export class JobQueue extends Construct {
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;

  constructor(scope: Construct, id: string, props: JobQueueProps) {
    super(scope, id);
    const visibilityTimeout =
      props.visibilityTimeout ??
      Duration.seconds(
        Math.ceil(props.consumerTimeout.toSeconds({ integral: false }) * VISIBILITY_TO_TIMEOUT_RATIO),
      );
    validate(props, visibilityTimeout);

    const fifo = props.fifo ?? false;
    const common = {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      removalPolicy: props.removalPolicy,
      // Only a `true` FifoQueue is valid in CloudFormation; standard queues omit the property.
      ...(fifo ? { fifo: true } : {}),
    };

    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetterQueue', {
      ...common,
      queueName: props.deadLetterQueueName,
      retentionPeriod: props.deadLetterRetentionPeriod ?? Duration.days(14),
      // A letter is the original body plus the reason attributes: the DLQ takes the largest message SQS
      // allows, the jobs queue that less the attributes' reserve.
      maxMessageSizeBytes: SQS_MAX_MESSAGE_BYTES,
      // Only the jobs queue may name this queue as its dead-letter target. Its ARN is built from its name:
      // a reference to the jobs queue itself would be a cycle (its RedrivePolicy names this queue).
      redriveAllowPolicy: {
        redrivePermission: sqs.RedrivePermission.BY_QUEUE,
        sourceQueues: [
          sqs.Queue.fromQueueAttributes(this, 'RedriveSource', {
            queueArn: Stack.of(this).formatArn({ service: 'sqs', resource: props.queueName }),
            queueName: props.queueName,
            fifo,
          }),
        ],
      },
    });

    this.queue = new sqs.Queue(this, 'Queue', {
      ...common,
      queueName: props.queueName,
      visibilityTimeout,
      retentionPeriod: props.retentionPeriod ?? Duration.days(4),
      maxMessageSizeBytes:
        (props.maxMessageSizeBytes ?? JOBS_QUEUE_MAX_MESSAGE_BYTES) + RESEND_ATTRIBUTES_RESERVE_BYTES,
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: props.maxReceiveCount },
    });
  }
}

function validate(props: JobQueueProps, visibilityTimeout: Duration): void {
  const consumerSeconds = props.consumerTimeout.toSeconds({ integral: false });
  const minimum = consumerSeconds * VISIBILITY_TO_TIMEOUT_RATIO;
  if (visibilityTimeout.toSeconds() < minimum) {
    throw new Error(
      `JobQueue visibilityTimeout is ${visibilityTimeout.toSeconds()} s; expected at least ` +
        `${minimum} s (${VISIBILITY_TO_TIMEOUT_RATIO} x consumerTimeout ${consumerSeconds} s)`,
    );
  }
  if (visibilityTimeout.toSeconds() > MAX_VISIBILITY.toSeconds()) {
    throw new Error(
      `JobQueue visibilityTimeout is ${visibilityTimeout.toSeconds()} s; expected at most ` +
        `${MAX_VISIBILITY.toSeconds()} s (the SQS limit of 12 hours)`,
    );
  }
  if (!Number.isInteger(props.maxReceiveCount) || props.maxReceiveCount < 1 || props.maxReceiveCount > 1000) {
    throw new Error(
      `JobQueue maxReceiveCount is ${props.maxReceiveCount}; expected an integer from 1 to 1000`,
    );
  }
  const fifo = props.fifo ?? false;
  for (const [prop, name] of [
    ['queueName', props.queueName],
    ['deadLetterQueueName', props.deadLetterQueueName],
  ] as const) {
    if (name.endsWith('.fifo') !== fifo) {
      throw new Error(
        `JobQueue ${prop} is ${JSON.stringify(name)}; expected a name ${fifo ? 'ending' : 'not ending'} ` +
          `in ".fifo" because fifo is ${fifo}`,
      );
    }
  }
}
