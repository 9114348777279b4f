import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import type { JobQueue, ResendOptions } from '../../../../shared/core/contract/job-queue.ts';
import type { JobLease } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRenewer } from '../../../../shared/core/leases/renewer.ts';
import { JobLog } from '../../../../shared/core/observe/job-log.ts';
import {
  LIFE_ATTRIBUTE,
  ORIGIN_ATTRIBUTE,
  RESENT_FROM_ATTRIBUTE,
  RecordMessage,
} from '../../../../shared/core/pipeline/record-message.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

// Two limits of SQS that an emulator may not hold leaseq to (docs/emulators.md): no ChangeMessageVisibility
// may hide a message past 12 hours after the receive that returned its receipt handle, and a message
// carries at most 10 message attributes. The queue below refuses both as SQS does, with its wording.

const HOUR = 3_600_000;
const RECEIVED_AT = Date.parse('2026-12-01T00:00:00Z');

/** A JobQueue that holds one receipt received at RECEIVED_AT and refuses what SQS refuses. */
function sqsLikeQueue(now: () => number) {
  const hidden: number[] = [];
  const sent: ResendOptions[] = [];
  const deleted: string[] = [];
  const queue: JobQueue = {
    changeVisibility: async (_receipt, seconds) => {
      const used = (now() - RECEIVED_AT) / 1000;
      if (used + seconds > 43_200) {
        throw Object.assign(
          new Error(
            `Value ${seconds} for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds].`,
          ),
          { name: 'InvalidParameterValue' },
        );
      }
      hidden.push(seconds);
    },
    delete: async (receipt) => {
      deleted.push(receipt);
    },
    resend: async (_body, options) => {
      const count = Object.keys(options.attributes ?? {}).length;
      if (count > 10) {
        throw Object.assign(
          new Error(`Number of message attributes [${count}] exceeds the allowed maximum [10].`),
          { name: 'InvalidParameterValue' },
        );
      }
      sent.push(options);
    },
    sendToDeadLetter: async () => {},
  };
  return { queue, hidden, sent, deleted };
}

function record(attributes: Record<string, string> = {}): SQSRecord {
  const body = JSON.stringify(makeEnvelope({ id: 'e-1', type: 'test.work', dedupKey: 'k-1', payload: {} }));
  return toSqsRecord(
    {
      MessageId: 'm-1',
      ReceiptHandle: 'r-1',
      Body: body,
      Attributes: { ApproximateReceiveCount: '3' },
      MessageAttributes: Object.fromEntries(
        Object.entries(attributes).map(([name, value]) => [name, { DataType: 'String', StringValue: value }]),
      ),
    },
    'arn:aws:sqs:us-east-1:000000000000:jobs',
    'us-east-1',
  );
}

const log = () => new JobLog(new Logger({ logLevel: 'SILENT' }), { dedupKey: 'k-1' });

describe('The 12-hour visibility budget, counted from the receive', () => {
  it('a give-back 11 hours after the receive hides the message for no longer than the budget left', async () => {
    // Prepare: 11 hours into the receive, a backoff of 2 hours is asked for.
    const now = () => RECEIVED_AT + 11 * HOUR;
    const { queue, hidden } = sqsLikeQueue(now);
    const message = new RecordMessage(queue, record(), log(), { receivedAt: RECEIVED_AT, now });

    // Act
    await message.giveBack(7200, 'retry');
    const hid = await message.hide(7200);

    // Assess: SQS took both, each within the hour left (less the allowance for the batching window).
    expect(hid).toBe(true);
    expect(hidden).toHaveLength(2);
    for (const seconds of hidden) {
      expect(seconds).toBeGreaterThan(0);
      expect(seconds).toBeLessThanOrEqual(3600);
    }
  });

  it('a give-back with the 12 hours used up re-sends the message, delayed by the backoff, instead of showing it at once', async () => {
    // Prepare: 12 hours into the receive (nothing left of the budget), a backoff of 10 minutes is asked for.
    const now = () => RECEIVED_AT + 12 * HOUR - 60_000;
    const { queue, hidden, sent, deleted } = sqsLikeQueue(now);
    const message = new RecordMessage(queue, record(), log(), { receivedAt: RECEIVED_AT, now });

    // Act
    await message.giveBack(600, 'retry');

    // Assess: a new message of the same origin, delayed 600 s (its own 12 hours start with its receive);
    // the old one deleted, not made visible.
    expect(hidden).toEqual([]);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ delaySeconds: 600 });
    expect(sent[0]?.attributes?.[ORIGIN_ATTRIBUTE]?.stringValue).toBe('m-1');
    expect(deleted).toEqual(['r-1']);
  });

  it('a hide with nothing left of the budget says it hid nothing; a give-back on FIFO shows the message', async () => {
    // Prepare
    const now = () => RECEIVED_AT + 12 * HOUR - 60_000;
    const { queue, hidden, sent } = sqsLikeQueue(now);
    const message = new RecordMessage(queue, record(), log(), { receivedAt: RECEIVED_AT, now });
    const fifoRecord = record();
    fifoRecord.attributes.SequenceNumber = '1';
    fifoRecord.attributes.MessageGroupId = 'g';
    const fifo = new RecordMessage(queue, fifoRecord, log(), { receivedAt: RECEIVED_AT, now });

    // Act
    const hid = await message.hide(900);
    await fifo.giveBack(600, 'retry');

    // Assess: the caller of the hide keeps the copy (it shows again and is judged under a new receive); a
    // FIFO head is never re-sent behind its group: it shows at once, as before.
    expect(hid).toBe(false);
    expect(sent).toEqual([]);
    expect(hidden).toEqual([0]);
  });

  it('a heartbeat past the budget renews the lease and asks SQS for nothing it would refuse', async () => {
    // Prepare: a job claimed at the receive, beating 12 hours later.
    let at = RECEIVED_AT;
    const now = () => at;
    const { queue, hidden } = sqsLikeQueue(now);
    const { store } = memoryStores({ now });
    const claimed = await store.claim({
      dedupKey: 'k-1',
      owner: 'w-a',
      messageId: 'm-1',
      type: 'test.work',
      createdAt: new Date(at).toISOString(),
      leaseMs: 3000,
      now: at,
    });
    if (!claimed.claimed) throw new Error('expected w-a to claim');
    const lease: JobLease = claimed.lease;
    const logger = new Logger({ logLevel: 'SILENT' });
    const warnings: string[] = [];
    logger.warn = ((message: string) => {
      warnings.push(message);
    }) as never;
    const renewer = new JobRenewer({
      store,
      queue,
      lease,
      receiptHandle: 'r-1',
      leaseMs: 3000,
      log: new JobLog(logger, { dedupKey: 'k-1' }),
      now,
      receivedAt: RECEIVED_AT,
    });

    // Act
    at = RECEIVED_AT + 12 * HOUR - 2000;
    const until = await renewer.renew();
    await new Promise((resolve) => setImmediate(resolve));

    // Assess: the lease is the store's; no visibility SQS would refuse was asked for.
    expect(until).toBe(at + 3000);
    expect((await store.get('k-1'))?.status).toBe(JobStatus.InProgress);
    expect(warnings.filter((w) => w.startsWith('could not extend'))).toEqual([]);
    for (const seconds of hidden) expect((at - RECEIVED_AT) / 1000 + seconds).toBeLessThanOrEqual(43_200);
  });
});

describe('A re-send keeps within the 10 message attributes of SQS', () => {
  it('re-sends a producer message that carries 10 attributes, with its origin, instead of giving it back', async () => {
    // Prepare: the producer used all 10 attributes.
    const now = () => RECEIVED_AT;
    const { queue, sent, deleted, hidden } = sqsLikeQueue(now);
    const attributes = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`a${i}`, `v${i}`]));
    const message = new RecordMessage(queue, record(attributes), log(), { receivedAt: RECEIVED_AT, now });

    // Act
    const resent = await message.resend(5);

    // Assess: sent once, within 10 attributes, the origin kept; the original deleted, nothing hidden.
    expect(resent).toBe(true);
    expect(sent).toHaveLength(1);
    const names = Object.keys(sent[0]?.attributes ?? {});
    expect(names.length).toBeLessThanOrEqual(10);
    expect(sent[0]?.attributes?.[ORIGIN_ATTRIBUTE]?.stringValue).toBe('m-1');
    expect(deleted).toEqual(['r-1']);
    expect(hidden).toEqual([]);
  });

  it("re-sends a redrive's message with the life it was sent for, within 10 attributes beside the producer's", async () => {
    // Prepare: a redrive's message (in place of m-0, for life 2) that also carries 9 producer attributes.
    const now = () => RECEIVED_AT;
    const { queue, sent } = sqsLikeQueue(now);
    const attributes = {
      ...Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`a${i}`, `v${i}`])),
      [RESENT_FROM_ATTRIBUTE]: 'm-0',
      [LIFE_ATTRIBUTE]: '2',
    };
    const message = new RecordMessage(queue, record(attributes), log(), { receivedAt: RECEIVED_AT, now });
    expect(message.identity).toMatchObject({ originId: 'm-0', life: 2 });

    // Act
    const resent = await message.resend(5);

    // Assess: the re-send is the same message of the same life (its identity read back from what was sent).
    expect(resent).toBe(true);
    const out = sent[0]?.attributes ?? {};
    expect(Object.keys(out).length).toBeLessThanOrEqual(10);
    expect(out[ORIGIN_ATTRIBUTE]?.stringValue).toBe('m-0');
    expect(out[LIFE_ATTRIBUTE]?.stringValue).toBe('2');
    const stringsOf = Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.stringValue ?? '']));
    const again = new RecordMessage(queue, { ...record(stringsOf), messageId: 'm-2' }, log(), {
      receivedAt: RECEIVED_AT,
      now,
    });
    expect(again.identity).toMatchObject({ messageId: 'm-2', originId: 'm-0', life: 2 });
  });
});
