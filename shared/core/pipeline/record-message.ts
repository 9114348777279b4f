import type { SQSRecord } from 'aws-lambda';
import { describe } from '../../errors.ts';
import type { JobQueue } from '../contract/job-queue.ts';
import type { JobLog } from '../observe/job-log.ts';

/**
 * Message attribute a re-send carries: the ids of the messages it replaced (comma-separated, the latest
 * last, at most {@link RESENT_FROM_MAX}), so a claim refused by the job's own item (which names the
 * message that claimed it) tells the job's own message from a copy.
 */
export const RESENT_FROM_ATTRIBUTE = 'leaseq-resent-from';
const RESENT_FROM_MAX = 10;

/**
 * The SendMessage fields of a message sent in place of `messageId` (a redrive's, shared/ops/dlq-redrive.ts):
 * the job item its redrive reset still names that message, so a worker that must refuse the body (its
 * claim-checked payload gone, an edit its schema refuses) knows it as the job's own message and ends the
 * job DEAD instead of leaving it waiting (docs/protocol.md, E13). None without an id.
 */
export function resentInPlaceOf(messageId: string | undefined): {
  MessageAttributes?: Record<string, { DataType: 'String'; StringValue: string }>;
} {
  return messageId
    ? { MessageAttributes: { [RESENT_FROM_ATTRIBUTE]: { DataType: 'String', StringValue: messageId } } }
    : {};
}

/**
 * The message side of one record: give it back (visible again after a delay) or delete it. Neither
 * throws: a failed give-back leaves the message to reappear when its visibility ends, a failed delete
 * leaves a copy that the next claim drops. Nothing is lost either way.
 */
export class RecordMessage {
  readonly #queue: JobQueue;
  readonly #log: JobLog;
  readonly record: SQSRecord;

  constructor(queue: JobQueue, record: SQSRecord, log: JobLog) {
    this.#queue = queue;
    this.record = record;
    this.#log = log;
  }

  /** How many times SQS has handed this message out (1 on the first receive). */
  get receives(): number {
    return Number(this.record.attributes.ApproximateReceiveCount ?? '1') || 1;
  }

  async giveBack(seconds: number, why: string): Promise<void> {
    try {
      await this.#queue.changeVisibility(this.record.receiptHandle, seconds);
    } catch (error) {
      this.#log.warn('could not set the message visibility', { why, error: describe(error) });
    }
  }

  /**
   * Sends the body again as a new message visible after `seconds` (same message attributes, same fair
   * queue group), then deletes this one; false when the queue cannot re-send (FIFO: no per-message delay;
   * a port without `resend`) or the send failed, and nothing changed. A failed delete after the send
   * leaves two messages of one job: the claim runs it once and drops the other as a copy.
   */
  /** The messages this one was re-sent in place of (a limit's bounce), oldest first; empty for a send. */
  get formerIds(): readonly string[] {
    const value = this.record.messageAttributes?.[RESENT_FROM_ATTRIBUTE]?.stringValue;
    return value ? value.split(',').filter((id) => id.length > 0) : [];
  }

  /**
   * Whether `messageId` (the message a job item names) is this message: its own id, or one it was
   * re-sent in place of (a limit's bounce, a redrive). What a refusal asks to tell the job's own message
   * from a copy.
   */
  isMessage(messageId: string | undefined): boolean {
    return (
      messageId !== undefined && (messageId === this.record.messageId || this.formerIds.includes(messageId))
    );
  }

  async resend(seconds: number): Promise<boolean> {
    const { record } = this;
    if (!this.#queue.resend || record.attributes.SequenceNumber !== undefined) return false;
    const formerIds = [...this.formerIds, record.messageId].slice(-RESENT_FROM_MAX).join(',');
    try {
      await this.#queue.resend(record.body, {
        delaySeconds: seconds,
        attributes: {
          ...record.messageAttributes,
          [RESENT_FROM_ATTRIBUTE]: { dataType: 'String', stringValue: formerIds },
        },
        ...(record.attributes.MessageGroupId ? { groupId: record.attributes.MessageGroupId } : {}),
      });
    } catch (error) {
      this.#log.warn('could not re-send the message; giving it back instead', { error: describe(error) });
      return false;
    }
    await this.delete();
    return true;
  }

  /** Hides the message for `seconds`; false when that failed (the message may show again sooner). */
  async hide(seconds: number): Promise<boolean> {
    try {
      await this.#queue.changeVisibility(this.record.receiptHandle, seconds);
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
