import type { SQSRecord } from 'aws-lambda';
import type { DeadLetterReason, JobQueue } from '../core/contract/job-queue.ts';
import { StoreFaults } from './store-faults.ts';

/** The operation names of {@link InMemoryQueue} faults. */
export type QueueOperation = 'change-visibility' | 'delete' | 'send-to-dead-letter';

export interface InMemoryQueueOptions {
  /** Visibility timeout a receive gives when the caller names none (seconds). @default 30 */
  readonly visibilitySeconds?: number;
  /** Clock (epoch ms); fake timers drive the default. @default Date.now */
  readonly now?: () => number;
  /**
   * Refuse a letter as SQS refuses a message: text outside SQS's character set (`#x9 #xA #xD
   * #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF`) in the body or a reason attribute throws
   * `InvalidMessageContents`; a body plus attributes above {@link SQS_MAX_MESSAGE_BYTES} throws
   * `InvalidParameterValue`. Off by default, so tests that hand the port any text keep working.
   * @default false
   */
  readonly refuseInvalidContent?: boolean;
}

/** The most bytes SQS takes in one message, body and attributes together (a queue's MaximumMessageSize default). */
export const SQS_MAX_MESSAGE_BYTES = 262_144;

// What SQS refuses in a body or attribute (the complement of its allowed set; errors.ts validText).
const SQS_REFUSED =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters SQS refuses
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** An error named like the SQS error code it stands for (the SDK's `name`). */
function sqsError(name: string, message: string): Error {
  const error = new Error(message);
  error.name = name;
  return error;
}

/** Why SQS would refuse this letter, or undefined when it would take it. */
function letterRefusal(body: string, reason: DeadLetterReason): Error | undefined {
  const texts = Object.entries(reason).filter((e): e is [string, string] => typeof e[1] === 'string');
  if (SQS_REFUSED.test(body))
    return sqsError('InvalidMessageContents', 'Invalid characters found in the message body');
  const bad = texts.find(([, text]) => SQS_REFUSED.test(text));
  if (bad)
    return sqsError('InvalidMessageContents', `Invalid characters found in message attribute ${bad[0]}`);
  const bytes = texts.reduce((n, [name, text]) => n + Buffer.byteLength(name) + Buffer.byteLength(text), 0);
  const size = Buffer.byteLength(body) + bytes;
  if (size > SQS_MAX_MESSAGE_BYTES) {
    return sqsError('InvalidParameterValue', `Message must be shorter than ${SQS_MAX_MESSAGE_BYTES} bytes`);
  }
  return undefined;
}

/** One message as the simulated queue holds it. */
export interface QueuedMessage {
  readonly messageId: string;
  readonly body: string;
  readonly groupId?: string;
  readonly attributes?: SQSRecord['messageAttributes'];
  /** Epoch ms from which a receive may return it. */
  visibleAt: number;
  receiveCount: number;
  /** The receipt of the latest receive; older receipts can no longer change its visibility. */
  receipt?: string;
}

/** A letter in the simulated DLQ. */
export interface DeadLetter {
  readonly body: string;
  readonly reason: DeadLetterReason;
  readonly groupId?: string;
}

/**
 * A simulated SQS standard queue with its DLQ, for unit tests and the interleaving model: at-least-once
 * delivery under a visibility timeout, receive counts, and SQS's receipt rule (each receive issues a new
 * receipt; a visibility change with an older one fails with `ReceiptHandleIsInvalid`, while a delete with
 * an older one still deletes, as SQS allows). No ordering guarantee and no FIFO groups are modelled.
 * Implements the {@link JobQueue} port the processor talks to.
 */
export class InMemoryQueue implements JobQueue {
  readonly #messages = new Map<string, QueuedMessage>();
  readonly #byReceipt = new Map<string, string>();
  readonly #visibility: number;
  readonly #now: () => number;
  readonly #refuseInvalid: boolean;
  #nextId = 0;
  /** Letters sent to the DLQ, in order. */
  readonly deadLetters: DeadLetter[] = [];
  /** Letters refused for their content (`refuseInvalidContent`). */
  refusedLetters = 0;
  /** Injects outages, lost answers and latency into the port's calls (see {@link StoreFaults}). */
  readonly faults = new StoreFaults<QueueOperation>();

  constructor(options: InMemoryQueueOptions = {}) {
    this.#visibility = options.visibilitySeconds ?? 30;
    this.#now = options.now ?? Date.now;
    this.#refuseInvalid = options.refuseInvalidContent ?? false;
  }

  /** Enqueues a body (a producer's send); returns its message id. */
  send(
    body: string,
    options: { delaySeconds?: number; groupId?: string; attributes?: SQSRecord['messageAttributes'] } = {},
  ): string {
    this.#nextId += 1;
    const messageId = `m-${this.#nextId}`;
    this.#messages.set(messageId, {
      messageId,
      body,
      ...(options.groupId === undefined ? {} : { groupId: options.groupId }),
      ...(options.attributes === undefined ? {} : { attributes: options.attributes }),
      visibleAt: this.#now() + (options.delaySeconds ?? 0) * 1000,
      receiveCount: 0,
    });
    return messageId;
  }

  /** The {@link JobQueue} port's re-send: a new message with the attributes given, as a producer's send. */
  async resend(
    body: string,
    options: { delaySeconds: number; groupId?: string; attributes?: SQSRecord['messageAttributes'] },
  ): Promise<void> {
    this.send(body, {
      delaySeconds: options.delaySeconds,
      ...(options.groupId === undefined ? {} : { groupId: options.groupId }),
      ...(options.attributes === undefined ? {} : { attributes: options.attributes }),
    });
  }

  /**
   * Receives up to `max` visible messages as Lambda would hand them over, hiding each for the visibility
   * timeout. Which visible messages come first is up to `pick` (random order in the model).
   */
  receive(
    max = 10,
    options: { visibilitySeconds?: number; pick?: (visible: QueuedMessage[]) => QueuedMessage[] } = {},
  ): SQSRecord[] {
    const now = this.#now();
    let chosen: QueuedMessage[];
    if (!options.pick && Number.isInteger(max) && max >= 0) {
      chosen = this.#firstVisible(now, max);
    } else {
      const visible = [...this.#messages.values()].filter((m) => m.visibleAt <= now);
      chosen = (options.pick ? options.pick(visible) : visible).slice(0, max);
    }
    return chosen.map((message) => {
      message.receiveCount += 1;
      message.visibleAt = now + (options.visibilitySeconds ?? this.#visibility) * 1000;
      const receipt = `${message.messageId}#${message.receiveCount}`;
      message.receipt = receipt;
      this.#byReceipt.set(receipt, message.messageId);
      return toRecord(message, receipt, now);
    });
  }

  async changeVisibility(receiptHandle: string, seconds: number): Promise<void> {
    await this.faults.run('change-visibility', () => {
      const message = this.#current(receiptHandle);
      message.visibleAt = this.#now() + seconds * 1000;
    });
  }

  async delete(receiptHandle: string): Promise<void> {
    await this.faults.run('delete', () => {
      const id = this.#byReceipt.get(receiptHandle);
      if (id !== undefined) this.#messages.delete(id);
    });
  }

  async sendToDeadLetter(body: string, reason: DeadLetterReason, groupId?: string): Promise<void> {
    await this.faults.run('send-to-dead-letter', () => {
      const refusal = this.#refuseInvalid ? letterRefusal(body, reason) : undefined;
      if (refusal) {
        this.refusedLetters += 1;
        throw refusal;
      }
      this.deadLetters.push({ body, reason: { ...reason }, ...(groupId === undefined ? {} : { groupId }) });
    });
  }

  /** Messages still in the queue (visible or in flight). */
  get size(): number {
    return this.#messages.size;
  }

  /** A copy of every message still in the queue. */
  messages(): QueuedMessage[] {
    return [...this.#messages.values()].map((m) => ({ ...m }));
  }

  /** Epoch ms at which the next hidden message becomes visible, or undefined when none is hidden. */
  nextVisibleAt(): number | undefined {
    const now = this.#now();
    let next: number | undefined;
    for (const m of this.#messages.values()) {
      if (m.visibleAt > now && (next === undefined || m.visibleAt < next)) next = m.visibleAt;
    }
    return next;
  }

  /** The first `max` visible messages in send order, without scanning past them (a long queue stays cheap). */
  #firstVisible(now: number, max: number): QueuedMessage[] {
    const chosen: QueuedMessage[] = [];
    if (max === 0) return chosen;
    for (const m of this.#messages.values()) {
      if (m.visibleAt > now) continue;
      chosen.push(m);
      if (chosen.length >= max) break;
    }
    return chosen;
  }

  #current(receiptHandle: string): QueuedMessage {
    const id = this.#byReceipt.get(receiptHandle);
    const message = id === undefined ? undefined : this.#messages.get(id);
    if (!message || message.receipt !== receiptHandle) {
      const error = new Error(`receipt handle ${receiptHandle} is not the message's latest`);
      error.name = 'ReceiptHandleIsInvalid';
      throw error;
    }
    return message;
  }
}

function toRecord(message: QueuedMessage, receipt: string, now: number): SQSRecord {
  return {
    messageId: message.messageId,
    receiptHandle: receipt,
    body: message.body,
    attributes: {
      ApproximateReceiveCount: String(message.receiveCount),
      SentTimestamp: String(now),
      SenderId: 'in-memory',
      ApproximateFirstReceiveTimestamp: String(now),
      ...(message.groupId === undefined ? {} : { MessageGroupId: message.groupId }),
    },
    messageAttributes: message.attributes ?? {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:in-memory',
    awsRegion: 'us-east-1',
  };
}
