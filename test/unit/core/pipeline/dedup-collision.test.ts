import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { versionedPut } from '../../../../shared/core/decisions/optimistic.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { CompletedCache } from '../../../../shared/core/pipeline/completed-cache.ts';
import { JobProcessor, type RecordOutcome } from '../../../../shared/core/pipeline/processor.ts';
import { TransientJobError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

// Issue 18, defect 1: a message of another type with the same dedupKey must never take an unfinished
// job over (the claim's condition checks the type), and a bad payload is refused before any claim. On
// the in-memory store and queue under fake timers; the emulator twin is
// test/integration/core/pipeline/dedup-collision.test.ts.

const KEY = 'tx-1';

function setup(options: { cache?: boolean } = {}) {
  const { store, row } = memoryStores({ tables: { ledger: 'account' } });
  const queue = new InMemoryQueue({ visibilitySeconds: 10 });
  const ran: string[] = [];
  const balance = (account: string) =>
    (row('ledger', { account }) as { balance: number; version: number } | undefined)?.balance ?? 0;
  const move = (account: string, delta: number) => {
    const stored = row('ledger', { account }) as { balance: number; version: number } | undefined;
    return versionedPut({
      tableName: 'ledger',
      key: { account },
      seenVersion: stored?.version,
      item: { balance: (stored?.balance ?? 0) + delta },
    });
  };
  // Debits in one step, then fails on its first attempt before the credit: the job waits in RETRY_WAIT
  // with the debit committed, and only its own second attempt may credit.
  const transfer = defineJob({
    type: 'ledger.transfer',
    payload: z.object({ from: z.string(), to: z.string(), amount: z.number().positive() }),
    async run(ctx, p) {
      ran.push(`transfer#${ctx.attempt}`);
      await ctx.step('debit', async () => ({ effects: [move(p.from, -p.amount)] }));
      if (ctx.attempt === 1) throw new TransientJobError('credit service down');
      await ctx.step('credit', async () => ({ effects: [move(p.to, p.amount)] }));
      return { result: 'moved' };
    },
  });
  const report = defineJob({
    type: 'report.send',
    payload: z.object({ n: z.number() }),
    async run() {
      ran.push('report');
      return { result: 'sent' };
    },
  });
  const fastReport = defineJob({
    type: 'report.fast',
    fastPath: true,
    payload: z.object({ n: z.number() }),
    async run() {
      ran.push('report.fast');
      return { result: 'sent' };
    },
  });
  const cache = options.cache ? new CompletedCache() : undefined;
  const processor = (worker: string) =>
    new JobProcessor({
      store,
      queue,
      registry: JobRegistry.of([transfer, report, fastReport]),
      worker,
      logger: new Logger({ logLevel: 'SILENT' }),
      leaseMs: 3000,
      backoff: { baseSeconds: 1, capSeconds: 1 },
      random: () => 0.5,
      ...(cache ? { cache } : {}),
    });
  const body = (type: string, payload: unknown, id = `e-${type}`) =>
    JSON.stringify(makeEnvelope({ id, type, dedupKey: KEY, payload }));
  const transferBody = body('ledger.transfer', { from: 'a', to: 'b', amount: 5 });
  return { store, queue, ran, balance, processor, body, transferBody };
}

/** Processes one record to its end (the clock advanced meanwhile) and deletes it when its outcome says so. */
async function settle(
  queue: InMemoryQueue,
  processor: JobProcessor,
  record: SQSRecord,
): Promise<RecordOutcome> {
  const pending = processor.process(record);
  await vi.advanceTimersByTimeAsync(50);
  const done = await pending;
  if (done.disposition === 'delete') await queue.delete(record.receiptHandle);
  return done;
}

/** Receives the visible message with `messageId` (others received stay hidden until their visibility ends). */
function receive(queue: InMemoryQueue, messageId: string): SQSRecord {
  const [record] = queue.receive(1, { pick: (visible) => visible.filter((m) => m.messageId === messageId) });
  if (!record) throw new Error(`message ${messageId} is not visible`);
  return record;
}

/** The transfer's first attempt: debit committed, then it fails and waits in RETRY_WAIT (backoff 1 s). */
async function transferWaitsForRetry(t: ReturnType<typeof setup>): Promise<string> {
  const id = t.queue.send(t.transferBody);
  const first = await settle(t.queue, t.processor('w-a'), receive(t.queue, id));
  expect(first.action).toBe('retry');
  const item = await t.store.get(KEY);
  expect(item).toMatchObject({ status: JobStatus.RetryWait, type: 'ledger.transfer' });
  expect(item?.checkpoint?.done).toEqual(['debit']);
  expect(t.balance('a')).toBe(-5);
  // Past the backoff: the job is claimable again.
  await vi.advanceTimersByTimeAsync(2000);
  return id;
}

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Another type under the same dedupKey (issue 18, defect 1)', () => {
  it('never takes over an unfinished job: it is dead-lettered as dedup-key-collision, and the transfer still credits', async () => {
    const t = setup();
    const transferId = await transferWaitsForRetry(t);
    const before = await t.store.get(KEY);

    // Another type with the same key arrives after the backoff, before the transfer's own message.
    const otherId = t.queue.send(t.body('report.send', { n: 1 }));
    const other = await settle(t.queue, t.processor('w-b'), receive(t.queue, otherId));

    expect(other.action).toBe('dead-lettered');
    expect(t.ran).not.toContain('report');
    expect(t.queue.deadLetters.map((l) => l.reason)).toEqual([
      expect.objectContaining({
        reason: 'dedup-key-collision',
        attempts: 0,
        dedupKey: KEY,
        type: 'report.send',
      }),
    ]);
    // The transfer's item is untouched: no fence bump, no attempt used, its checkpoint kept.
    expect(await t.store.get(KEY)).toEqual(before);

    const again = await settle(t.queue, t.processor('w-a'), receive(t.queue, transferId));
    expect(again.action).toBe('completed');
    expect(t.balance('a')).toBe(-5);
    expect(t.balance('b')).toBe(5);
    expect(await t.store.get(KEY)).toMatchObject({ status: JobStatus.Completed, type: 'ledger.transfer' });
  });

  it('a fast-path type with the same key does not commit over the waiting job either', async () => {
    const t = setup();
    const transferId = await transferWaitsForRetry(t);
    const before = await t.store.get(KEY);

    const otherId = t.queue.send(t.body('report.fast', { n: 1 }));
    const other = await settle(t.queue, t.processor('w-b'), receive(t.queue, otherId));

    expect(other.action).toBe('dead-lettered');
    expect(t.queue.deadLetters[0]?.reason.reason).toBe('dedup-key-collision');
    expect(await t.store.get(KEY)).toEqual(before);
    expect((await settle(t.queue, t.processor('w-a'), receive(t.queue, transferId))).action).toBe(
      'completed',
    );
    expect(t.balance('b')).toBe(5);
  });

  it('a copy of a completed or dead job with another type is dead-lettered as a collision, not dropped', async () => {
    const t = setup({ cache: true });
    const transferId = await transferWaitsForRetry(t);
    expect((await settle(t.queue, t.processor('w-a'), receive(t.queue, transferId))).action).toBe(
      'completed',
    );
    const done = await t.store.get(KEY);

    // The same worker (its cache knows the key COMPLETED) and another one.
    for (const worker of ['w-a', 'w-b']) {
      const id = t.queue.send(t.body('report.send', { n: 1 }, `e-${worker}`));
      expect((await settle(t.queue, t.processor(worker), receive(t.queue, id))).action).toBe('dead-lettered');
    }
    expect(t.queue.deadLetters.map((l) => l.reason.reason)).toEqual([
      'dedup-key-collision',
      'dedup-key-collision',
    ]);
    expect(t.ran).not.toContain('report');
    expect(await t.store.get(KEY)).toEqual(done);
    // A true copy (same type) is still a duplicate.
    const copy = t.queue.send(t.transferBody);
    expect((await settle(t.queue, t.processor('w-b'), receive(t.queue, copy))).action).toBe('duplicate');
  });
});

describe('A bad payload is refused before the claim (issue 18)', () => {
  it('a bad-payload copy arriving between attempts does not take the good job over or mark it DEAD', async () => {
    const t = setup();
    const transferId = await transferWaitsForRetry(t);
    const before = await t.store.get(KEY);

    const badId = t.queue.send(t.body('ledger.transfer', { from: 'a', to: 'b', amount: -1 }, 'e-bad'));
    const bad = await settle(t.queue, t.processor('w-b'), receive(t.queue, badId));

    expect(bad.action).toBe('dead-lettered');
    expect(t.queue.deadLetters.map((l) => l.reason)).toEqual([
      expect.objectContaining({ reason: 'invalid-bad-payload', attempts: 0, type: 'ledger.transfer' }),
    ]);
    expect(await t.store.get(KEY)).toEqual(before);
    expect((await settle(t.queue, t.processor('w-a'), receive(t.queue, transferId))).action).toBe(
      'completed',
    );
    expect(t.balance('b')).toBe(5);
  });

  it('leaves no job item behind, so a corrected resend with the same dedupKey runs', async () => {
    const t = setup();
    const badId = t.queue.send(t.body('report.send', { n: 'one' }, 'e-bad'));
    const bad = await settle(t.queue, t.processor('w-a'), receive(t.queue, badId));

    expect(bad.action).toBe('dead-lettered');
    expect(t.queue.deadLetters[0]?.reason).toMatchObject({ reason: 'invalid-bad-payload', attempts: 0 });
    expect(await t.store.get(KEY)).toBeUndefined();
    expect(t.ran).toEqual([]);

    const fixedId = t.queue.send(t.body('report.send', { n: 1 }, 'e-fixed'));
    expect((await settle(t.queue, t.processor('w-a'), receive(t.queue, fixedId))).action).toBe('completed');
    expect(t.ran).toEqual(['report']);
  });

  it('a schema that throws (rather than refuses) claims nothing and keeps the message for a retry', async () => {
    const { store } = memoryStores();
    const queue = new InMemoryQueue({ visibilitySeconds: 10 });
    let ran = 0;
    const broken = defineJob({
      type: 'broken.schema',
      payload: {
        '~standard': {
          version: 1,
          vendor: 'test',
          validate: () => {
            throw new Error('schema bug');
          },
        },
      },
      async run() {
        ran += 1;
      },
    });
    const processor = new JobProcessor({
      store,
      queue,
      registry: JobRegistry.of([broken]),
      worker: 'w-a',
      logger: new Logger({ logLevel: 'SILENT' }),
      backoff: { baseSeconds: 1, capSeconds: 1 },
      random: () => 0.5,
    });
    const id = queue.send(
      JSON.stringify(makeEnvelope({ id: 'e', type: 'broken.schema', dedupKey: KEY, payload: 1 })),
    );

    const outcome = await settle(queue, processor, receive(queue, id));

    expect(outcome).toMatchObject({ action: 'retry', disposition: 'retain' });
    expect(ran).toBe(0);
    expect(await store.get(KEY)).toBeUndefined();
    expect(queue.deadLetters).toEqual([]);
    expect(queue.size).toBe(1);
  });
});
