import { randomUUID } from 'node:crypto';
import {
  SendMessageBatchCommand,
  type SendMessageBatchCommandOutput,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { groupIdForKey } from '../aws/message-group.ts';
import { isFifoQueue } from '../aws/queue-url.ts';
import { runLimited } from '../core/pipeline/batch.ts';
import { Pacer } from './pacer.ts';
import { failureCode, setupProblem } from './setup-problem.ts';

/** One SQS message to send. */
export interface OutgoingMessage {
  readonly body: string;
  /** For reports and FIFO grouping; never sent as an attribute. */
  readonly dedupKey?: string;
  /**
   * FIFO `MessageGroupId`, already checked by the caller (see `groupIdProblem`); ignored on a standard
   * queue. @default the dedup key when it is a valid group id, else an id derived from it (`groupIdForKey`)
   */
  readonly groupId?: string;
  /** True for the second copy of a job (a duplicate send). */
  readonly duplicate?: boolean;
}

/** Settings of {@link sendMessages}; every default is applied in that function. */
export interface SendOptions {
  /** SendMessageBatch calls in flight at once (1 on a FIFO queue when any message has a groupId). @default 8 */
  readonly concurrency?: number;
  /** Messages per second at most. @default undefined (as fast as SQS takes them) */
  readonly ratePerSecond?: number;
  /** Extra tries for entries SQS failed on its side (not for sender faults). @default 2 */
  readonly retries?: number;
  /** Called after every batch with the running totals. */
  readonly onProgress?: (progress: SendProgress) => void;
  /** Stops sending further batches when aborted (what was sent stays sent). */
  readonly signal?: AbortSignal;
  /** Told of every message SQS accepted, with its SQS message id. */
  readonly onSent?: (message: OutgoingMessage, messageId: string) => void;
  /** Told of every message that was not sent after the retries. */
  readonly onFailed?: (message: OutgoingMessage, failure: SendFailure) => void;
}

export interface SendProgress {
  readonly sent: number;
  readonly failed: number;
  readonly total: number;
}

export interface SendFailure {
  readonly dedupKey?: string;
  readonly code: string;
  readonly message: string;
  /** What the sender must set (credentials, endpoint) when the failure is its setup: no retry helps. */
  readonly setup?: string;
}

export interface SendReport {
  /** Messages SQS accepted. */
  readonly sent: number;
  /** Of those, second copies (duplicate sends). */
  readonly duplicates: number;
  /** Messages not accepted after the retries. */
  readonly failed: number;
  /** The first few failures, for the report (at most 10). */
  readonly failures: readonly SendFailure[];
}

/** SQS limits of one SendMessageBatch call. */
const MAX_ENTRIES = 10;
const MAX_BATCH_BYTES = 256 * 1024;

/**
 * Sends messages with SendMessageBatch (10 per call, and under the 256 KiB batch limit), a bounded
 * number of calls in flight, and an optional rate limit. Partial batch failures are retried when SQS
 * says the fault is its own; whatever still fails is counted, never thrown, so the caller can report
 * what did go out. On a FIFO queue each message gets its chosen group, else its dedup key's group
 * (`groupIdForKey`: the key, or a hash of a key SQS would refuse as a group), and a unique deduplication
 * id (duplicates are meant to reach the workers, which drop them by dedup key).
 */
export async function sendMessages(
  sqs: SQSClient,
  queueUrl: string,
  messages: readonly OutgoingMessage[],
  options: SendOptions = {},
): Promise<SendReport> {
  const pacer = new Pacer({ perSecond: options.ratePerSecond });
  const retries = options.retries ?? 2;
  const fifo = isFifoQueue(queueUrl);
  const batches = chunk(messages, pacer.batchSize(MAX_ENTRIES));
  let sent = 0;
  let duplicates = 0;
  let failed = 0;
  const failures: SendFailure[] = [];
  const fail = (message: OutgoingMessage, code: string, text: string, setup?: string) => {
    failed += 1;
    const failure = {
      ...(message.dedupKey ? { dedupKey: message.dedupKey } : {}),
      code,
      message: text,
      ...(setup ? { setup } : {}),
    };
    if (failures.length < 10) failures.push(failure);
    options.onFailed?.(message, failure);
  };

  // Batches in flight together reach SQS in any order, and a chosen group is a promise of send order: such
  // a send goes one batch at a time (within a batch SQS keeps the entries' order).
  const ordered = fifo && messages.some((m) => m.groupId !== undefined);
  // Groups whose order is already broken (a job not sent, or sent behind a later one): their later jobs are
  // not sent, since a retry or a later batch would run them before the one that is missing.
  const broken = new Set<string>();
  const breakGroup = (message: OutgoingMessage) => {
    if (ordered) broken.add(groupOf(message));
  };
  await runLimited(batches, ordered ? 1 : (options.concurrency ?? 8), async (batch) => {
    if (options.signal?.aborted) return;
    await pacer.take(batch.length);
    let pending = batch
      .filter((message) => {
        if (!ordered || !broken.has(groupOf(message))) return true;
        fail(
          message,
          'GroupOrderBroken',
          `not sent: an earlier job of group ${groupOf(message)} was not sent`,
        );
        return false;
      })
      .map((message, i) => ({ id: String(i), message }));
    for (let attempt = 0; pending.length > 0; attempt++) {
      let out: SendMessageBatchCommandOutput;
      try {
        out = await sqs.send(
          new SendMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: pending.map(({ id, message }) => entry(id, message, fifo)),
          }),
        );
      } catch (error) {
        // The SDK already retried the call; count the batch as failed rather than losing the report.
        const text = error instanceof Error ? error.message : String(error);
        for (const { message } of pending) {
          fail(message, failureCode(error), text, setupProblem(error));
          breakGroup(message);
        }
        break;
      }
      const byId = new Map(pending.map((p) => [p.id, p.message]));
      for (const ok of out.Successful ?? []) {
        const message = byId.get(ok.Id ?? '');
        if (!message) continue;
        sent += 1;
        if (message.duplicate) duplicates += 1;
        options.onSent?.(message, ok.MessageId ?? '');
      }
      const again: typeof pending = [];
      for (const bad of out.Failed ?? []) {
        const message = byId.get(bad.Id ?? '');
        if (!message) continue;
        // A retry lands behind whatever SQS took after it: in an ordered send only while nothing of its
        // group came after it in this batch.
        const overtaken =
          ordered &&
          pending.some((p) => Number(p.id) > Number(bad.Id) && groupOf(p.message) === groupOf(message));
        if (!bad.SenderFault && attempt < retries && !overtaken) again.push({ id: bad.Id ?? '', message });
        else {
          const why = overtaken
            ? ' (not retried: a later job of its group was sent, a retry would run after it)'
            : '';
          fail(message, bad.Code ?? 'Failed', `${bad.Message ?? 'rejected by SQS'}${why}`);
          breakGroup(message);
        }
      }
      pending = again;
    }
    options.onProgress?.({ sent, failed, total: messages.length });
  });
  return { sent, duplicates, failed, failures };
}

function entry(id: string, message: OutgoingMessage, fifo: boolean): SendMessageBatchRequestEntry {
  return {
    Id: id,
    MessageBody: message.body,
    ...(fifo
      ? {
          MessageGroupId: groupOf(message),
          MessageDeduplicationId: randomUUID(),
        }
      : {}),
  };
}

/** A message's FIFO group: the chosen one, else its dedup key's. */
function groupOf(message: OutgoingMessage): string {
  return message.groupId ?? groupIdForKey(message.dedupKey ?? 'leaseq');
}

/** Splits into batches of at most `size` entries and at most 256 KiB of bodies each. */
export function chunk(messages: readonly OutgoingMessage[], size: number): OutgoingMessage[][] {
  const batches: OutgoingMessage[][] = [];
  let current: OutgoingMessage[] = [];
  let bytes = 0;
  for (const message of messages) {
    const length = Buffer.byteLength(message.body, 'utf8');
    if (current.length > 0 && (current.length >= size || bytes + length > MAX_BATCH_BYTES)) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(message);
    bytes += length;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}
