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
}

/** One message as the simulated queue holds it. */
export interface QueuedMessage {
  readonly messageId: string;
  readonly body: string;
  readonly groupId?: string;
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
  #nextId = 0;
  /** Letters sent to the DLQ, in order. */
  readonly deadLetters: DeadLetter[] = [];
  /** Injects outages, lost answers and latency into the port's calls (see {@link StoreFaults}). */
  readonly faults = new StoreFaults<QueueOperation>();

  constructor(options: InMemoryQueueOptions = {}) {
    this.#visibility = options.visibilitySeconds ?? 30;
    this.#now = options.now ?? Date.now;
  }

  /** Enqueues a body (a producer's send); returns its message id. */
  send(body: string, options: { delaySeconds?: number; groupId?: string } = {}): string {
    this.#nextId += 1;
    const messageId = `m-${this.#nextId}`;
    this.#messages.set(messageId, {
      messageId,
      body,
      ...(options.groupId === undefined ? {} : { groupId: options.groupId }),
      visibleAt: this.#now() + (options.delaySeconds ?? 0) * 1000,
      receiveCount: 0,
    });
    return messageId;
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
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:in-memory',
    awsRegion: 'us-east-1',
  };
}
