import type { SQSRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { processBatch } from '../../../../shared/core/pipeline/batch.ts';
import type { JobProcessor, RecordOutcome } from '../../../../shared/core/pipeline/processor.ts';

const STANDARD_ARN = 'arn:aws:sqs:us-east-1:000000000000:jobs';
const FIFO_ARN = 'arn:aws:sqs:us-east-1:000000000000:jobs.fifo';

function record(
  messageId: string,
  group?: string,
  eventSourceARN = group ? FIFO_ARN : STANDARD_ARN,
): SQSRecord {
  return {
    messageId,
    receiptHandle: `rh-${messageId}`,
    body: '{}',
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: '0',
      SenderId: 'x',
      ApproximateFirstReceiveTimestamp: '0',
      ...(group ? { MessageGroupId: group } : {}),
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN,
    awsRegion: 'us-east-1',
  };
}

/** A processor stand-in whose outcome per message id is scripted; it records the order it was called in. */
function scripted(retain: Set<string>, delayMs = 0) {
  const calls: string[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const deferred: string[] = [];
  const processor = {
    async defer(r: SQSRecord): Promise<RecordOutcome> {
      deferred.push(r.messageId);
      return { messageId: r.messageId, action: 'deferred', disposition: 'retain' };
    },
    async process(r: SQSRecord): Promise<RecordOutcome> {
      calls.push(r.messageId);
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      inFlight -= 1;
      return retain.has(r.messageId)
        ? { messageId: r.messageId, action: 'retry', disposition: 'retain' }
        : { messageId: r.messageId, action: 'completed', disposition: 'delete' };
    },
  } as unknown as JobProcessor;
  return { processor, calls, deferred, maxInFlight: () => maxInFlight };
}

describe('Function: processBatch', () => {
  it('runs a hand-built record without eventSourceARN as a standard batch instead of throwing', async () => {
    const { processor, calls } = scripted(new Set());
    const bare = { ...record('a'), eventSourceARN: undefined } as unknown as SQSRecord;
    await expect(processBatch([bare], processor)).resolves.toMatchObject({
      response: { batchItemFailures: [] },
    });
    expect(calls).toEqual(['a']);
  });

  it('reports only the retained records, each record on its own', async () => {
    const { processor } = scripted(new Set(['b']));
    const { response } = await processBatch([record('a'), record('b'), record('c')], processor);
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'b' }]);
  });

  it('bounds concurrency on a standard queue', async () => {
    const s = scripted(new Set(), 5);
    await processBatch(
      Array.from({ length: 10 }, (_, i) => record(`m${i}`)),
      s.processor,
      { concurrency: 3 },
    );
    expect(s.calls).toHaveLength(10);
    expect(s.maxInFlight()).toBe(3);
  });

  it('on FIFO stops a group at its first failure and fails the rest of that group, other groups go on', async () => {
    const s = scripted(new Set(['g1-2']));
    const records = [
      record('g1-1', 'g1'),
      record('g2-1', 'g2'),
      record('g1-2', 'g1'),
      record('g1-3', 'g1'),
      record('g2-2', 'g2'),
    ];
    const { response, outcomes } = await processBatch(records, s.processor);
    expect(response.batchItemFailures.map((f) => f.itemIdentifier)).toEqual(['g1-2', 'g1-3']);
    expect(s.calls).not.toContain('g1-3');
    expect(s.deferred).toEqual(['g1-3']);
    expect(s.calls.filter((c) => c.startsWith('g1'))).toEqual(['g1-1', 'g1-2']);
    expect(s.calls.filter((c) => c.startsWith('g2'))).toEqual(['g2-1', 'g2-2']);
    expect(outcomes.map((o) => o.messageId)).toEqual(records.map((r) => r.messageId));
  });

  it('runs a standard fair queue as a standard batch: records of one MessageGroupId run at once, none deferred', async () => {
    // SQS fair queues set MessageGroupId on standard queues; only a `.fifo` queue promises group order.
    const s = scripted(new Set(['t-1']), 5);
    const records = ['t-1', 't-2', 't-3', 't-4'].map((id) => record(id, 'tenant-a', STANDARD_ARN));
    const { response } = await processBatch(records, s.processor);
    expect(s.calls.sort()).toEqual(['t-1', 't-2', 't-3', 't-4']);
    expect(s.deferred).toEqual([]);
    expect(s.maxInFlight()).toBe(4);
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 't-1' }]);
  });

  it('keeps group order on a FIFO queue, told by its `.fifo` name', async () => {
    const s = scripted(new Set(), 5);
    const records = ['f-1', 'f-2', 'f-3'].map((id) => record(id, 'g', FIFO_ARN));
    await processBatch(records, s.processor);
    expect(s.calls).toEqual(['f-1', 'f-2', 'f-3']);
    expect(s.maxInFlight()).toBe(1);
  });
});
