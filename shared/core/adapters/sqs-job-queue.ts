import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  type MessageAttributeValue,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { groupIdForKey } from '../../aws/message-group.ts';
import { isFifoQueue } from '../../aws/queue-url.ts';
import { storableText } from '../../error-text.ts';
import { LetterRefusedError } from '../../errors.ts';
import type { DeadLetterReason, JobQueue, ResendOptions } from '../contract/job-queue.ts';

export interface SqsJobQueueOptions {
  readonly client: SQSClient;
  readonly queueUrl: string;
  readonly deadLetterQueueUrl: string;
}

/** Prefix of the message attributes a leaseq dead letter carries. */
export const DLQ_ATTRIBUTE_PREFIX = 'leaseq.';

/** The SQS adapter of {@link JobQueue}. */
export class SqsJobQueue implements JobQueue {
  readonly #sqs: SQSClient;
  readonly #queueUrl: string;
  readonly #dlqUrl: string;

  constructor(options: SqsJobQueueOptions) {
    this.#sqs = options.client;
    this.#queueUrl = options.queueUrl;
    this.#dlqUrl = options.deadLetterQueueUrl;
  }

  async changeVisibility(receiptHandle: string, seconds: number): Promise<void> {
    await this.#sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: this.#queueUrl,
        ReceiptHandle: receiptHandle,
        VisibilityTimeout: Math.max(0, Math.min(43_200, Math.round(seconds))),
      }),
    );
  }

  async delete(receiptHandle: string): Promise<void> {
    await this.#sqs.send(
      new DeleteMessageCommand({ QueueUrl: this.#queueUrl, ReceiptHandle: receiptHandle }),
    );
  }

  /**
   * One SendMessage to the jobs queue. On FIFO: to the tail of `groupId` with `deduplicationId`, and no
   * per-message delay (a FIFO queue refuses one).
   */
  async resend(body: string, options: ResendOptions): Promise<void> {
    const fifo = isFifoQueue(this.#queueUrl);
    const attributes: Record<string, MessageAttributeValue> = {};
    for (const [name, value] of Object.entries(options.attributes ?? {})) {
      attributes[name] = {
        DataType: value.dataType,
        ...(value.stringValue === undefined ? {} : { StringValue: value.stringValue }),
        ...(value.binaryValue === undefined ? {} : { BinaryValue: Buffer.from(value.binaryValue, 'base64') }),
      };
    }
    await this.#sqs.send(
      new SendMessageCommand({
        QueueUrl: this.#queueUrl,
        MessageBody: body,
        ...(fifo ? {} : { DelaySeconds: Math.max(0, Math.min(900, Math.ceil(options.delaySeconds))) }),
        ...(Object.keys(attributes).length > 0 ? { MessageAttributes: attributes } : {}),
        ...(options.groupId === undefined ? {} : { MessageGroupId: options.groupId }),
        ...(fifo && options.deduplicationId !== undefined
          ? { MessageDeduplicationId: options.deduplicationId }
          : {}),
      }),
    );
  }

  /**
   * A FIFO DLQ gets the record's group (else the one the job's key gives); a standard DLQ gets none, even
   * when the record had one (a fair queue's tenant), since SQS refuses a deduplication id there.
   * @throws LetterRefusedError when SQS refuses the letter for what it carries (final).
   */
  async sendToDeadLetter(body: string, reason: DeadLetterReason, groupId?: string): Promise<void> {
    const group = groupId ?? groupIdForKey(reason.dedupKey ?? 'leaseq');
    try {
      await this.#sqs.send(
        new SendMessageCommand({
          QueueUrl: this.#dlqUrl,
          MessageBody: body,
          MessageAttributes: deadLetterAttributes(reason),
          ...(isFifoQueue(this.#dlqUrl)
            ? { MessageGroupId: group, MessageDeduplicationId: `${reason.messageId}-dead`.slice(0, 128) }
            : {}),
        }),
      );
    } catch (error) {
      const refused = contentRefusal(error);
      if (refused !== undefined) throw new LetterRefusedError(refused, error);
      throw error;
    }
  }
}

// SQS's codes for a message it refuses for its contents: the characters or size of its attributes, or its
// size. The query-protocol spelling (`AWS.SimpleQueueService.InvalidMessageContents`) is matched too.
const CONTENT_CODES = new Set([
  'InvalidMessageContents',
  'InvalidAttributeName',
  'InvalidAttributeValue',
  'InvalidParameterValue',
  'MessageTooLong',
]);

/**
 * The error code when SQS refused a send for what the message carries, else undefined. Such a refusal is
 * the same on every try; throttling, KMS, a missing queue or a 5xx may pass later and are not matched.
 */
function contentRefusal(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = error.name.slice(error.name.lastIndexOf('.') + 1);
  if (CONTENT_CODES.has(code)) return code;
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  if (status === 400 && /attribute/i.test(error.message)) return code;
  return undefined;
}

/** The most characters of one dead-letter attribute (the error text itself is capped lower, errors.ts). */
const ATTRIBUTE_MAX = 1024;

/**
 * Encodes a reason as SQS message attributes: strings capped at ATTRIBUTE_MAX characters with a
 * truncation marker, and made valid for SQS (no lone surrogates or C0 controls: errors.ts storableText).
 */
export function deadLetterAttributes(reason: DeadLetterReason): Record<string, MessageAttributeValue> {
  const attrs: Record<string, MessageAttributeValue> = {};
  const put = (name: string, value: string | number | undefined, type: 'String' | 'Number' = 'String') => {
    if (value === undefined || value === '') return;
    attrs[`${DLQ_ATTRIBUTE_PREFIX}${name}`] = {
      DataType: type,
      StringValue: storableText(String(value), ATTRIBUTE_MAX),
    };
  };
  put('reason', reason.reason);
  put('errorClass', reason.errorClass);
  put('errorMessage', reason.errorMessage);
  put('attempts', reason.attempts, 'Number');
  put('dedupKey', reason.dedupKey);
  put('worker', reason.worker);
  put('originalMessageId', reason.messageId);
  put('type', reason.type);
  // One attribute for both (SQS takes 10 a message; this is the tenth).
  if (reason.payloadHashes) {
    put('payloadHashes', `job=${reason.payloadHashes.job} message=${reason.payloadHashes.message}`);
  }
  put('deadAt', new Date().toISOString());
  return attrs;
}

/** Decodes the reason attributes of a DLQ message (for the CLI). */
export function readDeadLetterAttributes(
  attributes: Record<string, MessageAttributeValue> | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (name.startsWith(DLQ_ATTRIBUTE_PREFIX) && value.StringValue !== undefined) {
      out[name.slice(DLQ_ATTRIBUTE_PREFIX.length)] = value.StringValue;
    }
  }
  return out;
}
