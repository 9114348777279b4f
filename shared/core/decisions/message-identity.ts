// Who a message is across leaseq's re-sends: a limit's bounce sends the body again under a new message id
// (limit-bounce.ts), and the re-send carries the id the message was first sent under, its origin. Every
// check of "is this the job's own message?" compares origins, so no number of re-sends loses the answer.
import type { JobItem } from '../contract/job-item.ts';

/** One message's identity: its id and the id its line of re-sends started from. */
export interface MessageIdentity {
  readonly messageId: string;
  /** The id it was first sent under: its own id unless leaseq re-sent it. */
  readonly originId: string;
  /**
   * The ids an older worker's re-send listed (`leaseq-resent-from`, at most 10), read only so that a
   * message re-sent before the origin attribute existed is still known; empty for every newer message.
   */
  readonly formerIds?: readonly string[];
  /**
   * The key's life a redrive sent it for (`leaseq-life`, kept by every later re-send); absent for a
   * producer's message and its re-sends, which any life may take.
   */
  readonly life?: number;
}

/** A message as a claim request names it: its origin, when absent, is its own id. */
export type MessageRef = Pick<MessageIdentity, 'messageId' | 'formerIds' | 'life'> & {
  readonly originId?: string;
};

/** The identity of a message leaseq never re-sent: it is its own origin. */
export function sentIdentity(messageId: string): MessageIdentity {
  return { messageId, originId: messageId };
}

/** The origin of the message an item names: `originId` when a re-send claimed it, else its `messageId`. */
export function itemOrigin(item: Pick<JobItem, 'messageId' | 'originId'>): string | undefined {
  return item.originId ?? item.messageId;
}

/**
 * True when `message` is the item's own message: the message that last claimed (or dead-lettered) the
 * job, under whatever id a re-send gave it. A copy the producer sent twice is another message (its own
 * origin); so is a redriven letter, which the CLI sends as a new message. Pure.
 */
export function isOwnMessage(item: Pick<JobItem, 'messageId' | 'originId'>, message: MessageRef): boolean {
  if (item.messageId === undefined) return false;
  const origin = message.originId ?? message.messageId;
  return (
    item.messageId === message.messageId ||
    // It descends from the message the item names (a redrive's message, re-sent by a bounce), or from
    // that message's origin.
    item.messageId === origin ||
    itemOrigin(item) === origin ||
    (message.formerIds?.includes(item.messageId) ?? false)
  );
}

/**
 * True when `message` was sent for another life of the key than `item`'s: a redrive's message (or a
 * re-send of one) still in flight when the job it was sent for died again and a fresh send reset the key.
 * It is not a copy of the item's job: its claim is refused and it is dropped, never run. Pure.
 */
export function sentForAnotherLife(item: Pick<JobItem, 'life'>, message: Pick<MessageRef, 'life'>): boolean {
  return message.life !== undefined && message.life !== (item.life ?? 0);
}
