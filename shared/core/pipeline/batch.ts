import type { SQSBatchResponse, SQSRecord } from 'aws-lambda';
import { isFifoQueue } from '../../aws/queue-url.ts';
import { outcomeOf, type RecordOutcome } from './outcome.ts';
import type { JobProcessor, ProcessOptions } from './processor.ts';

export interface BatchOptions extends ProcessOptions {
  /** Records processed at once on a standard queue. @default 10 */
  readonly concurrency?: number;
  /**
   * FIFO semantics: records of one message group run in order, one at a time, and the first one that is
   * retained fails the rest of its group (they are not started). @default auto: true when the records'
   * queue is FIFO (its ARN ends in `.fifo`, as every FIFO queue's name does). Not from MessageGroupId:
   * SQS fair queues set it on standard queues, which promise no order.
   */
  readonly fifo?: boolean;
}

export interface BatchResult {
  readonly response: SQSBatchResponse;
  readonly outcomes: readonly RecordOutcome[];
}

/**
 * Processes a Lambda SQS batch: each record gets its own outcome and one bad record never fails the
 * others. Retained records are reported in `batchItemFailures` (the event source mapping leaves them in
 * the queue with the visibility the processor set); the rest are deleted by the caller.
 */
export async function processBatch(
  records: readonly SQSRecord[],
  processor: JobProcessor,
  options: BatchOptions = {},
): Promise<BatchResult> {
  const fifo =
    options.fifo ??
    records.some((r) => typeof r.eventSourceARN === 'string' && isFifoQueue(r.eventSourceARN));
  // The batch's records were received a moment before it arrived: their 12 hours of visibility count
  // from here (records started later in the batch have used part of them).
  const processOptions: ProcessOptions = {
    receivedAt: options.receivedAt ?? Date.now(),
    ...(options.deadline === undefined ? {} : { deadline: options.deadline }),
  };
  const outcomes = new Map<string, RecordOutcome>();

  if (fifo) {
    const groups = new Map<string, SQSRecord[]>();
    for (const record of records) {
      const group = record.attributes.MessageGroupId ?? '';
      const list = groups.get(group) ?? [];
      list.push(record);
      groups.set(group, list);
    }
    await runLimited([...groups.values()], options.concurrency ?? 10, async (group) => {
      let failed = false;
      for (const record of group) {
        if (failed) {
          // Not started: order within the group must hold, so it waits for its predecessor's retry.
          outcomes.set(record.messageId, await processor.defer(record));
          continue;
        }
        const outcome = await processor.process(record, processOptions);
        outcomes.set(record.messageId, outcome);
        // A head re-sent to its group's tail no longer stands before the rest: they go on.
        if (outcome.disposition === 'retain' && outcome.action !== 'resent') failed = true;
      }
    });
  } else {
    await runLimited(records, options.concurrency ?? 10, async (record) => {
      outcomes.set(record.messageId, await processor.process(record, processOptions));
    });
  }

  const ordered = records.map((r) => outcomes.get(r.messageId) ?? outcomeOf(r.messageId, 'retry'));
  return {
    outcomes: ordered,
    response: {
      batchItemFailures: ordered
        .filter((o) => o.disposition === 'retain')
        .map((o) => ({ itemIdentifier: o.messageId })),
    },
  };
}

/** Runs `work` over `items` with at most `limit` in flight. */
export async function runLimited<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  });
  await Promise.all(lanes);
}
