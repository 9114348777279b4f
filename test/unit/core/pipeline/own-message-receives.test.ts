// A job that runs past its message's 12 hours of visibility (visibility-budget.ts) keeps its lease; its
// message shows again and each receive finds the live lease and hides it (own-message-early). Those
// receives are no attempt: they must not carry the message to the queue's redrive count, or SQS moves a
// healthy job's message to the DLQ while it runs (and a retry it then releases has no message).
import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { resendAtReceives } from '../../../../shared/core/pipeline/limit-bounce.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

const MAX_RECEIVE_COUNT = 6;

describe("Processor: the job's own message back while its lease runs", () => {
  it('is re-sent, not hidden again, once its receives near the redrive count (standard queue)', async () => {
    // Prepare: w0 holds the job's lease (a long job past the budget, beating); the message is back.
    const job = defineJob({ type: 't.long', payload: z.object({}), run: async () => ({ result: 'ok' }) });
    const { store } = memoryStores({});
    const queue = new InMemoryQueue();
    const processor = new JobProcessor({
      store,
      queue,
      registry: JobRegistry.of([job]),
      worker: 'w1',
      logger: new Logger({ logLevel: 'SILENT' }),
      leaseMs: 3000,
      maxAttempts: 1,
      maxReceiveCount: MAX_RECEIVE_COUNT,
    });
    const first = queue.send(
      JSON.stringify(makeEnvelope({ id: 'long', type: 't.long', dedupKey: 'long', payload: {} })),
    );
    const held = await store.claim({
      dedupKey: 'long',
      owner: 'w0',
      messageId: first,
      type: 't.long',
      createdAt: new Date().toISOString(),
      leaseMs: 60_000,
      now: Date.now(),
    });
    expect(held.claimed).toBe(true);
    const at = resendAtReceives(false, MAX_RECEIVE_COUNT);
    let record: SQSRecord | undefined;
    while (Number(record?.attributes.ApproximateReceiveCount ?? 0) < at) {
      [record] = queue.receive(1, { visibilitySeconds: 0 });
    }
    if (!record) throw new Error('no message received');

    // Act
    const outcome = await processor.process(record);

    // Assess: kept as the job's own message, under a new message whose receives start again.
    expect(outcome.action).toBe('own-message-early');
    const left = queue.messages();
    expect(left).toHaveLength(1);
    expect(left[0]?.messageId).not.toBe(first);
  });
});
