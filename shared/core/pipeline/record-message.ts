import type { SQSRecord } from 'aws-lambda';
import { describe } from '../../error-text.ts';
import type { JobQueue } from '../contract/job-queue.ts';
import type { MessageIdentity } from '../decisions/message-identity.ts';
import { visibilityWithinBudget } from '../decisions/visibility-budget.ts';
import type { JobLog } from '../observe/job-log.ts';

/**
 * Message attribute a re-send carries: the id the message was first sent under (its origin), the same
 * through every later re-send. A claim refused by the job's own item (which names the origin of the
 * message that claimed it), the dead key's guard and the fast path's first-receive test read it
 * (decisions/message-identity.ts). One attribute of fixed size whatever the number of re-sends.
 */
export const ORIGIN_ATTRIBUTE = 'leaseq-origin';
/**
 * The ids a message was sent in place of, the oldest first: what a redrive's message carries (the
 * letter's message id, which the reset item names: resentInPlaceOf), and what a limit's re-send carried
 * before {@link ORIGIN_ATTRIBUTE} (up to 10). Read into the message's identity; its first id is the origin.
 */
export const RESENT_FROM_ATTRIBUTE = 'leaseq-resent-from';
/**
 * The key's life a redrive sent the message for (the reset item's `life`, 0 before any dead-key reset),
 * kept by every re-send: a claim takes only an item of that life, so a redrive's message still in flight
 * when its job died again and a fresh send reset the key is dropped by the newer job, never run on it.
 */
export const LIFE_ATTRIBUTE = 'leaseq-life';

/**
 * The SendMessage fields of a message sent in place of `messageId` (a redrive's, shared/ops/dlq-redrive.ts):
 * the job item its redrive reset still names that message, so a worker that must refuse the body (its
 * claim-checked payload gone, an edit its schema refuses) knows it as the job's own message and ends the
 * job DEAD instead of leaving it waiting (docs/protocol.md, E13). With `life`, the life of the key the
 * reset item is in ({@link LIFE_ATTRIBUTE}). None without either.
 */
export function resentInPlaceOf(
  messageId: string | undefined,
  life?: number,
): {
  MessageAttributes?: Record<string, { DataType: 'String'; StringValue: string }>;
} {
  const attributes = {
    ...(messageId
      ? { [RESENT_FROM_ATTRIBUTE]: { DataType: 'String' as const, StringValue: messageId } }
      : {}),
    ...(life === undefined
      ? {}
      : { [LIFE_ATTRIBUTE]: { DataType: 'String' as const, StringValue: String(life) } }),
  };
  return Object.keys(attributes).length > 0 ? { MessageAttributes: attributes } : {};
}

/** The life a message's {@link LIFE_ATTRIBUTE} names: a whole number, else none. */
export function lifeOf(value: string | undefined): number | undefined {
  const life = value === undefined || value === '' ? Number.NaN : Number(value);
  return Number.isSafeInteger(life) && life >= 0 ? life : undefined;
}

/** When the record was received, and the clock its visibility budget is read on. */
export interface ReceiveTiming {
  /** Epoch ms of the receive (the batch's start: processBatch). @default the construction time */
  readonly receivedAt?: number | undefined;
  /** @default Date.now */
  readonly now?: () => number;
}

/** The longest DelaySeconds SQS takes on a message (15 min). */
const SQS_MAX_DELAY_SECONDS = 900;

/** Message attributes SQS allows on one message. */
export const SQS_MAX_MESSAGE_ATTRIBUTES = 10;

/**
 * The producer's attributes a re-send keeps beside {@link ORIGIN_ATTRIBUTE} (and `reserved` more of
 * leaseq's own: a redrive's {@link LIFE_ATTRIBUTE}): all of them up to 9 (less `reserved`); past that the
 * first ones by name (sorted), the rest dropped (docs/protocol.md, "Limits": message identity).
 */
export function keepRoomForOrigin<T>(
  attributes: Readonly<Record<string, T>>,
  reserved = 0,
): {
  kept: Record<string, T>;
  dropped: string[];
} {
  const names = Object.keys(attributes).sort();
  const room = SQS_MAX_MESSAGE_ATTRIBUTES - 1 - reserved;
  const kept: Record<string, T> = {};
  for (const name of names.slice(0, room)) kept[name] = attributes[name] as T;
  return { kept, dropped: names.slice(room) };
}

/**
 * The message side of one record: give it back (visible again after a delay) or delete it. Neither
 * throws: a failed give-back leaves the message to reappear when its visibility ends, a failed delete
 * leaves a copy that the next claim drops. Nothing is lost either way. Every visibility it asks for
 * keeps within the 12 hours SQS grants per receive (decisions/visibility-budget.ts).
 */
export class RecordMessage {
  readonly #queue: JobQueue;
  readonly #log: JobLog;
  readonly #now: () => number;
  readonly record: SQSRecord;
  /** Epoch ms of the receive that handed out this record's receipt handle. */
  readonly receivedAt: number;

  constructor(queue: JobQueue, record: SQSRecord, log: JobLog, timing: ReceiveTiming = {}) {
    this.#queue = queue;
    this.record = record;
    this.#log = log;
    this.#now = timing.now ?? Date.now;
    this.receivedAt = timing.receivedAt ?? this.#now();
  }

  /** `seconds`, or less when SQS's 12 hours from the receive end sooner. */
  visibilityWithinBudget(seconds: number): number {
    return visibilityWithinBudget(seconds, this.receivedAt, this.#now());
  }

  /** How many times SQS has handed this message out (1 on the first receive). */
  get receives(): number {
    return Number(this.record.attributes.ApproximateReceiveCount ?? '1') || 1;
  }

  /**
   * Visible again after `seconds`. When the receive's 12 hours have less left than that (and less than a
   * re-send's delay, SQS's 15 min at most), a standard queue's message is re-sent with the delay instead
   * (same origin, a receive of its own and its own 12 hours): capped, it would show at once and come back
   * before its backoff. A FIFO message, or a failed re-send, gets what is left.
   */
  async giveBack(seconds: number, why: string): Promise<void> {
    const granted = this.visibilityWithinBudget(seconds);
    if (granted < Math.min(seconds, SQS_MAX_DELAY_SECONDS) && !this.fifo && (await this.resend(seconds))) {
      this.#log.info('the receive has used its 12 hours of visibility: re-sent the message instead', {
        why,
        delaySeconds: Math.min(seconds, SQS_MAX_DELAY_SECONDS),
      });
      return;
    }
    try {
      await this.#queue.changeVisibility(this.record.receiptHandle, granted);
    } catch (error) {
      this.#log.warn('could not set the message visibility', { why, error: describe(error) });
    }
  }

  /** Who this message is across re-sends: its id and its origin (decisions/message-identity.ts). */
  get identity(): MessageIdentity {
    const attributes = this.record.messageAttributes;
    const formerIds = (attributes?.[RESENT_FROM_ATTRIBUTE]?.stringValue ?? '')
      .split(',')
      .filter((id) => id.length > 0);
    const originId = attributes?.[ORIGIN_ATTRIBUTE]?.stringValue || formerIds[0] || this.record.messageId;
    const life = lifeOf(attributes?.[LIFE_ATTRIBUTE]?.stringValue);
    return {
      messageId: this.record.messageId,
      originId,
      ...(formerIds.length > 0 ? { formerIds } : {}),
      ...(life === undefined ? {} : { life }),
    };
  }

  /**
   * True when leaseq re-sent this message (a limit's bounce): its receive count started again at 1 with
   * the re-send, so it is not a first receive whatever SQS counts.
   */
  get resent(): boolean {
    return this.identity.originId !== this.record.messageId;
  }

  /** True for a FIFO queue's message (SQS numbers those in their group). */
  get fifo(): boolean {
    return this.record.attributes.SequenceNumber !== undefined;
  }

  /**
   * Sends the body again as a new message (same message attributes, same group, and its origin in
   * {@link ORIGIN_ATTRIBUTE}), then deletes this one; false when the queue cannot re-send (a port without
   * `resend`) or the send failed, and nothing changed. On a standard queue it shows after `seconds`; on
   * FIFO it goes to the tail of its group at once (no per-message delay), with a deduplication id made
   * from this message's id. A failed delete after the send leaves two messages of one job: the claim runs
   * it once and drops the other as a copy.
   */
  async resend(seconds: number): Promise<boolean> {
    const { record } = this;
    if (!this.#queue.resend) return false;
    const group = record.attributes.MessageGroupId;
    if (this.fifo && group === undefined) return false;
    // The older attribute goes: the origin replaces it. SQS takes at most 10 attributes, and the origin
    // is what keeps the message's identity, so it is the producer's that make room (names only logged).
    // A redrive's life stays too: the re-send is still the message sent for that life of the key.
    const {
      [RESENT_FROM_ATTRIBUTE]: _replaced,
      [ORIGIN_ATTRIBUTE]: _origin,
      [LIFE_ATTRIBUTE]: life,
      ...theirs
    } = record.messageAttributes ?? {};
    const { kept, dropped } = keepRoomForOrigin(theirs, life === undefined ? 0 : 1);
    if (dropped.length > 0) {
      this.#log.warn('re-sending without message attributes past the 10 SQS allows', { dropped });
    }
    try {
      await this.#queue.resend(record.body, {
        delaySeconds: seconds,
        attributes: {
          ...kept,
          ...(life === undefined ? {} : { [LIFE_ATTRIBUTE]: life }),
          [ORIGIN_ATTRIBUTE]: { dataType: 'String', stringValue: this.identity.originId },
        },
        ...(group ? { groupId: group } : {}),
        ...(this.fifo ? { deduplicationId: `leaseq-resend-${record.messageId}` } : {}),
      });
    } catch (error) {
      this.#log.warn('could not re-send the message; giving it back instead', { error: describe(error) });
      return false;
    }
    await this.delete();
    return true;
  }

  /**
   * Hides the message for `seconds` (for what is left of the receive's 12 hours when that is less); false
   * when that failed, or nothing was left to hide it with (the message may show again sooner).
   */
  async hide(seconds: number): Promise<boolean> {
    const granted = this.visibilityWithinBudget(seconds);
    if (granted === 0 && seconds > 0) return false;
    try {
      await this.#queue.changeVisibility(this.record.receiptHandle, granted);
      return true;
    } catch (error) {
      this.#log.warn('could not hide the message', { seconds, error: describe(error) });
      return false;
    }
  }

  /** Deletes the message; false when that failed (a later copy, or this one back, is dropped then). */
  async delete(): Promise<boolean> {
    try {
      await this.#queue.delete(this.record.receiptHandle);
      return true;
    } catch (error) {
      this.#log.warn('could not delete the original message; a later copy will be dropped', {
        error: describe(error),
      });
      return false;
    }
  }
}
