// Redrive's send and its undo (dlq-redrive.ts): the letter's body back to the jobs queue, then the
// letter deleted; a failed send puts the job item back as it was before this run's reset.
import { randomUUID } from 'node:crypto';
import { DeleteMessageCommand, type Message, SendMessageCommand } from '@aws-sdk/client-sqs';
import { groupIdForKey } from '../aws/message-group.ts';
import type { JobItem } from '../core/contract/job-item.ts';
import { resentInPlaceOf } from '../core/pipeline/record-message.ts';
import { KEEP, type Visit } from './dlq-browse.ts';
import type { DeadLetter } from './dlq-letters.ts';
import type { EarlierSend } from './dlq-redrive-plan.ts';
import { letterFields, type RedriveRun, record } from './dlq-redrive-run.ts';
import { messageOf } from './ops-errors.ts';

/**
 * Sends the letter's body to the jobs queue, then deletes the letter. A failed send keeps the letter
 * for the next redrive and undoes the reset (`item`, as read before it): no message would bring a reset
 * job back, and a DEAD job stays listed as dead. A failed delete leaves a duplicate the workers drop by
 * dedup key.
 */
export async function sendBack(
  run: RedriveRun,
  message: Message,
  letter: DeadLetter,
  how: {
    readonly reset: boolean;
    readonly note: { readonly detail?: string };
    readonly earlier: EarlierSend;
    readonly item?: JobItem;
  },
): Promise<Visit> {
  const { reset, note, earlier } = how;
  const { clients, names } = run.target;
  const fields = letterFields(letter);
  await run.pacer.take(1);
  let newMessageId: string;
  try {
    // The group its job was sent in (SQS took it); else the one the producer would give its key.
    const groupId = letter.systemAttributes.MessageGroupId ?? groupIdForKey(letter.dedupKey ?? 'leaseq');
    const out = await clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: names.queueUrl,
        MessageBody: letter.body,
        // A reset job's message is for the item's life only: late, it never runs on a newer job of the key.
        ...resentInPlaceOf(letter.originalMessageId, reset && how.item ? (how.item.life ?? 0) : undefined),
        ...(run.fifo ? { MessageGroupId: groupId, MessageDeduplicationId: randomUUID() } : {}),
      }),
    );
    newMessageId = out.MessageId ?? '';
  } catch (error) {
    const undone = await undoReset(run, how);
    record(run, {
      ...fields,
      outcome: 'failed',
      reset: reset && !undone,
      detail: `send to the jobs queue failed: ${messageOf(error)}; ${
        undone || !reset
          ? 'the job is as it was, its letter stays'
          : 'the job was reset and waits for this letter, which stays: run redrive again'
      }`,
    });
    return KEEP;
  }
  run.sentIds.add(newMessageId);
  if (letter.dedupKey) run.sentJobs.set(letter.dedupKey, earlier);
  run.taken += 1;
  try {
    await clients.sqs.send(
      new DeleteMessageCommand({ QueueUrl: names.dlqUrl, ReceiptHandle: message.ReceiptHandle ?? '' }),
    );
  } catch (error) {
    const detail = `sent, but the dead letter stays in the DLQ (${messageOf(error)}); a second redrive would send a duplicate the workers drop`;
    record(run, { ...fields, outcome: 'redriven', reset, newMessageId, detail });
    return { stop: run.taken >= run.limit };
  }
  record(run, { ...fields, outcome: 'redriven', reset, newMessageId, ...note });
  return { deleted: true, stop: run.taken >= run.limit };
}

/** Puts the item back as it was before this run's reset (its send failed); false if it could not. */
async function undoReset(
  run: RedriveRun,
  how: { readonly reset: boolean; readonly earlier: EarlierSend; readonly item?: JobItem },
): Promise<boolean> {
  const { item, earlier } = how;
  if (!how.reset || !item || earlier.versionAfter === undefined) return false;
  try {
    return await run.store.undoRedrive(item, earlier.versionAfter, run.now());
  } catch {
    return false;
  }
}
