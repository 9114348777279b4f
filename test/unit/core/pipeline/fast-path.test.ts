import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import type { JobStore } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { versionedPut } from '../../../../shared/core/decisions/optimistic.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { defineTable } from '../../../../shared/core/model/table.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics } from '../../../../shared/core/observe/metrics.ts';
import { JobProcessor, type RecordOutcome } from '../../../../shared/core/pipeline/processor.ts';
import { LIFE_ATTRIBUTE } from '../../../../shared/core/pipeline/record-message.ts';
import { PermanentJobError, TransientJobError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { EffectTables } from '../../../../shared/jobs/effect-tables.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { JOBS_TABLE, memoryStores } from '../../../support/memory-stores.ts';

// The one-write fast path (docs/protocol.md, "Fast path") on the in-memory store and queue under fake
// timers: which store calls a job costs, racing copies, and every way a fast attempt can end.

const LEASE_MS = 3000;

type Behaviour =
  | 'ok'
  | 'transient'
  | 'permanent'
  | 'step'
  | 'step-sometimes'
  | 'slow'
  | 'conflict-once'
  | 'flaky-twice'
  | 'too-large';

function setup(behaviour: Behaviour = 'ok', options: { fastPath?: boolean; maxAttempts?: number } = {}) {
  const { doc, store, row } = memoryStores({ tables: { ledger: 'account' } });
  const queue = new InMemoryQueue({ visibilitySeconds: 10 });
  const metrics = new InMemoryMetrics();
  const calls: string[] = [];
  let runs = 0;
  const credit = defineJob({
    type: 'test.credit',
    fastPath: options.fastPath ?? true,
    payload: z.object({ amount: z.number() }),
    async run(ctx, p) {
      runs += 1;
      if (behaviour === 'transient' && ctx.attempt === 1 && runs === 1) throw new TransientJobError('flaky');
      if (behaviour === 'permanent') throw new PermanentJobError('never');
      if (behaviour === 'flaky-twice' && runs <= 2) throw new TransientJobError(`flaky (run ${runs})`);
      if (behaviour === 'step') await ctx.step('one', async () => ({}));
      if (behaviour === 'step-sometimes' && p.amount > 3) await ctx.step('big', async () => ({}));
      if (behaviour === 'slow' && runs === 1) await new Promise((r) => setTimeout(r, 10 * LEASE_MS));
      const stored = row('ledger', { account: 'a' }) as { balance: number; version: number } | undefined;
      // The first run of 'conflict-once' commits against a version that is already gone.
      const seen = behaviour === 'conflict-once' && runs === 1 ? 99 : stored?.version;
      return {
        effects: [
          versionedPut({
            tableName: 'ledger',
            key: { account: 'a' },
            seenVersion: seen,
            item: { balance: (stored?.balance ?? 0) + p.amount },
          }),
        ],
        result: behaviour === 'too-large' ? 'r'.repeat(401 * 1024) : 'ok',
      };
    },
  });
  // Every store call the processor makes, by method name.
  const counted = new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== 'function' || typeof name !== 'string') return value;
      return (...args: unknown[]) => {
        calls.push(name);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as JobStore;
  const processor = (worker: string) =>
    new JobProcessor({
      store: counted,
      queue,
      registry: JobRegistry.of([credit]),
      worker,
      logger: new Logger({ logLevel: 'SILENT' }),
      metrics,
      leaseMs: LEASE_MS,
      ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
      backoff: { baseSeconds: 1, capSeconds: 1 },
      random: () => 0.5,
    });
  const body = JSON.stringify(
    makeEnvelope({ id: 'e-1', type: 'test.credit', dedupKey: 'job-1', payload: { amount: 5 } }),
  );
  const balance = () => (row('ledger', { account: 'a' }) as { balance: number } | undefined)?.balance;
  return { doc, store, queue, metrics, calls, processor, body, balance, runs: () => runs };
}

/** Processes a record and, like the event source, deletes it when its outcome says so. */
async function settle(
  queue: InMemoryQueue,
  outcome: Promise<RecordOutcome>,
  record: SQSRecord,
): Promise<RecordOutcome> {
  const done = await outcome;
  if (done.disposition === 'delete') await queue.delete(record.receiptHandle);
  return done;
}

function receiveOne(queue: InMemoryQueue): SQSRecord {
  const [record] = queue.receive(1);
  if (!record) throw new Error('no visible message');
  return record;
}

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('The one-write fast path (in memory, fake timers)', () => {
  it('commits a unique job with one store call and nothing else', async () => {
    const { queue, store, calls, processor, body, balance } = setup();
    queue.send(body);
    const record = receiveOne(queue);

    const outcome = await settle(queue, processor('w-a').process(record), record);

    expect(outcome).toMatchObject({ action: 'completed', disposition: 'delete' });
    expect(calls).toEqual(['claimAndComplete']);
    expect(balance()).toBe(5);
    expect(await store.get('job-1')).toMatchObject({
      status: JobStatus.Completed,
      owner: 'w-a',
      attempts: 1,
    });
    expect(queue.size).toBe(0);
  });

  it('lets racing copies both run, applies one effect, and drops the loser as a duplicate', async () => {
    const { queue, metrics, processor, body, balance, runs } = setup();
    queue.send(body);
    queue.send(body);
    const [a, b] = queue.receive(2);
    if (!a || !b) throw new Error('expected two records');

    const outcomes = await Promise.all([
      settle(queue, processor('w-a').process(a), a),
      settle(queue, processor('w-b').process(b), b),
    ]);

    expect(runs()).toBe(2);
    expect(outcomes.map((o) => o.action).sort()).toEqual(['completed', 'duplicate']);
    expect(balance()).toBe(5);
    expect(metrics.get(MetricName.DuplicateSkipped, undefined)).toBe(1);
    expect(queue.size).toBe(0);
  });

  it('drops a later duplicate after one refused write, without applying its effect', async () => {
    const { queue, calls, processor, body, balance } = setup();
    queue.send(body);
    const first = receiveOne(queue);
    await settle(queue, processor('w-a').process(first), first);
    queue.send(body);
    const copy = receiveOne(queue);

    const outcome = await settle(queue, processor('w-b').process(copy), copy);

    expect(outcome).toMatchObject({ action: 'duplicate', disposition: 'delete' });
    expect(calls).toEqual(['claimAndComplete', 'claimAndComplete']);
    expect(balance()).toBe(5);
  });

  it("drops a redrive's message of an earlier life of its key at its fast commit, its effect not applied", async () => {
    // Prepare: job-1 is a later life (a fresh send reset the key) waiting for its retry; a redrive's
    // message of life 0 whose letter named no message (the queue's own redrive moved it) comes first-time.
    const { doc, queue, processor, body, balance } = setup();
    const now = Date.now();
    const waiting = {
      dedupKey: 'job-1',
      status: JobStatus.RetryWait,
      leaseUntil: now - 1,
      token: 9,
      attempts: 1,
    };
    doc.seed(JOBS_TABLE, { ...waiting, version: 4, messageId: 'm-0', type: 'test.credit', life: 1 });
    queue.send(body, { attributes: { [LIFE_ATTRIBUTE]: { dataType: 'String', stringValue: '0' } } });
    const record = receiveOne(queue);

    // Act
    const outcome = await settle(queue, processor('w-a').process(record), record);

    // Assess: refused by the life, dropped; the waiting job is as it was, no credit applied.
    expect(outcome).toMatchObject({ action: 'other-life-copy', disposition: 'delete' });
    expect(balance()).toBeUndefined();
    expect(doc.item(JOBS_TABLE, { dedupKey: 'job-1' })).toMatchObject({ ...waiting, life: 1 });
  });

  it('reads first from the first copy met: a later copy then costs one read and does not run', async () => {
    const { queue, calls, processor, body, balance, runs, store } = setup();
    queue.send(body);
    const first = receiveOne(queue);
    await settle(queue, processor('w-a').process(first), first);
    // One worker (no local cache here) meets copy after copy of the finished job.
    const worker = processor('w-b');
    const reads: unknown[] = [];
    const get = store.get.bind(store);
    store.get = (key, options) => {
      reads.push(options?.consistent);
      return get(key, options);
    };
    const copies: string[] = [];
    for (let i = 0; i < 5; i++) {
      queue.send(body);
      const copy = receiveOne(queue);
      copies.push((await settle(queue, worker.process(copy), copy)).action);
    }

    expect(copies).toEqual(['duplicate', 'duplicate', 'duplicate', 'duplicate', 'duplicate']);
    // The first copy ran and was refused at the commit (the worker had met no copy); from then on a
    // copy is read first (eventually consistent, half a strong read's price) and dropped unrun.
    expect(calls).toEqual(['claimAndComplete', 'claimAndComplete', 'get', 'get', 'get', 'get']);
    expect(reads).toEqual([false, false, false, false]);
    expect(runs()).toBe(2);
    expect(balance()).toBe(5);

    // A new job in that mode: the read finds nothing, the job runs fast and commits in one write.
    queue.send(
      JSON.stringify(
        makeEnvelope({ id: 'e-2', type: 'test.credit', dedupKey: 'job-2', payload: { amount: 2 } }),
      ),
    );
    const fresh = receiveOne(queue);
    expect((await settle(queue, worker.process(fresh), fresh)).action).toBe('completed');
    expect(calls.slice(6)).toEqual(['get', 'claimAndComplete']);
    expect(balance()).toBe(7);
    expect(queue.size).toBe(0);
  });

  it('counts a message read first once: read-first lasts until copies fall under a fortieth', async () => {
    const { queue, calls, processor, body } = setup();
    queue.send(body);
    const first = receiveOne(queue);
    await settle(queue, processor('w-a').process(first), first);
    const worker = processor('w-b');
    queue.send(body);
    const copy = receiveOne(queue);
    await settle(queue, worker.process(copy), copy);
    // Fresh jobs now, each read first while the one copy weighs at least a fortieth of the messages
    // met (copy-share.test.ts: 36 of them); counted twice, they would end it after 18.
    for (let i = 0; i < 40; i++) {
      queue.send(
        JSON.stringify(
          makeEnvelope({ id: `f-${i}`, type: 'test.credit', dedupKey: `fresh-${i}`, payload: { amount: 1 } }),
        ),
      );
      const fresh = receiveOne(queue);
      expect((await settle(queue, worker.process(fresh), fresh)).action).toBe('completed');
    }

    expect(calls.filter((c) => c === 'get')).toHaveLength(36);
  });

  it('ends read-first mode as fast when the reads fail: a fast run then notes what its commit found', async () => {
    const { queue, calls, processor, body, store } = setup();
    queue.send(body);
    const first = receiveOne(queue);
    await settle(queue, processor('w-a').process(first), first);
    const worker = processor('w-b');
    queue.send(body);
    const copy = receiveOne(queue);
    await settle(queue, worker.process(copy), copy);
    // Every eventually consistent read fails now (throttled reads, say); the commits still work.
    const get = store.get.bind(store);
    store.get = (key, options) =>
      options?.consistent === false ? Promise.reject(new Error('read throttled')) : get(key, options);
    for (let i = 0; i < 40; i++) {
      queue.send(
        JSON.stringify(
          makeEnvelope({ id: `f-${i}`, type: 'test.credit', dedupKey: `fresh-${i}`, payload: { amount: 1 } }),
        ),
      );
      const fresh = receiveOne(queue);
      expect((await settle(queue, worker.process(fresh), fresh)).action).toBe('completed');
    }

    // As many reads as when they answer (above): a failed read does not keep the mode on for good.
    expect(calls.filter((c) => c === 'get')).toHaveLength(36);
  });

  it('in read-first mode sends a job the read finds unfinished straight to the claim, without a fast run', async () => {
    const { queue, calls, processor, body, store, runs } = setup();
    queue.send(body);
    const first = receiveOne(queue);
    await settle(queue, processor('w-a').process(first), first);
    const worker = processor('w-b');
    queue.send(body);
    const met = receiveOne(queue);
    await settle(queue, worker.process(met), met);
    // Another job, claimed by a leased attempt that is still running (its lease live).
    const other = { dedupKey: 'job-3', owner: 'w-x', messageId: 'm-x', type: 'test.credit' };
    await store.claim({ ...other, createdAt: new Date().toISOString(), now: Date.now(), leaseMs: LEASE_MS });
    queue.send(
      JSON.stringify(
        makeEnvelope({ id: 'e-3', type: 'test.credit', dedupKey: 'job-3', payload: { amount: 1 } }),
      ),
    );
    const copy = receiveOne(queue);
    const before = runs();

    const outcome = await settle(queue, worker.process(copy), copy);

    expect(outcome.action).toBe('duplicate');
    expect(calls.slice(2)).toEqual(['get', 'claim']);
    expect(runs()).toBe(before);
  });

  describe('read-first mode: what the read finds', () => {
    /** A worker that met copies of job-1 (the first ran, the rest were read first) and so reads first. */
    async function readingFirst(t: ReturnType<typeof setup>) {
      t.queue.send(t.body);
      const first = receiveOne(t.queue);
      await settle(t.queue, t.processor('w-a').process(first), first);
      const worker = t.processor('w-b');
      for (let i = 0; i < 4; i++) {
        t.queue.send(t.body);
        const copy = receiveOne(t.queue);
        expect((await settle(t.queue, worker.process(copy), copy)).action).toBe('duplicate');
      }
      t.calls.length = 0;
      return worker;
    }
    const job = (dedupKey: string, type = 'test.credit') =>
      JSON.stringify(makeEnvelope({ id: `e-${dedupKey}`, type, dedupKey, payload: { amount: 1 } }));
    const request = (dedupKey: string, type = 'test.credit') => ({
      dedupKey,
      owner: 'w-x',
      messageId: `m-${dedupKey}`,
      type,
      createdAt: new Date().toISOString(),
      now: Date.now(),
      leaseMs: LEASE_MS,
    });

    it('runs the job fast when the read fails, without counting a failed attempt', async () => {
      const t = setup();
      const worker = await readingFirst(t);
      t.doc.faults.failNext('get');
      t.queue.send(job('job-r'));
      const record = receiveOne(t.queue);

      const outcome = await settle(t.queue, worker.process(record), record);

      expect(outcome.action).toBe('completed');
      expect(t.calls).toEqual(['get', 'claimAndComplete']);
      expect(await t.store.get('job-r')).toMatchObject({ status: JobStatus.Completed, attempts: 1 });
      expect(t.queue.size).toBe(0);
    });

    it('hands the job back unrun when its read leaves less than a minimum lease before the deadline', async () => {
      const t = setup();
      const worker = await readingFirst(t);
      const before = t.runs();
      // 1.8 s left: a lease of 1.8 s at the start; the read then takes 0.9 s of it.
      t.doc.faults.delayNext('get', 900);
      t.queue.send(job('job-d'));
      const record = receiveOne(t.queue);

      const processing = worker.process(record, { deadline: Date.now() + 1800 });
      await vi.advanceTimersByTimeAsync(900);
      const outcome = await processing;

      expect(outcome.action).toBe('deadline');
      expect(t.runs()).toBe(before);
      expect(t.calls).toEqual(['get']);
      expect(await t.store.get('job-d')).toBeUndefined();
    });

    it('dead-letters a message whose key a COMPLETED job of another type holds, as a collision', async () => {
      const t = setup();
      const worker = await readingFirst(t);
      const claimed = await t.store.claim(request('job-c', 'test.other'));
      if (!claimed.claimed) throw new Error('expected a claim');
      await t.store.complete(claimed.lease, 'theirs');
      const before = t.runs();
      t.queue.send(job('job-c'));
      const record = receiveOne(t.queue);

      const outcome = await settle(t.queue, worker.process(record), record);

      expect(outcome.action).toBe('dead-lettered');
      expect(t.runs()).toBe(before);
      expect(await t.store.get('job-c')).toMatchObject({ status: JobStatus.Completed, type: 'test.other' });
    });

    it('drops a copy of a DEAD job without running it', async () => {
      const t = setup();
      const worker = await readingFirst(t);
      const claimed = await t.store.claim(request('job-x'));
      if (!claimed.claimed) throw new Error('expected a claim');
      await t.store.markDead(claimed.lease, { message: 'gone', errorClass: 'PermanentJobError' });
      const before = t.runs();
      t.queue.send(job('job-x'));
      const record = receiveOne(t.queue);

      const outcome = await settle(t.queue, worker.process(record), record);

      expect(outcome.action).toBe('dead-copy');
      expect(t.runs()).toBe(before);
    });

    it('drops a copy of a job waiting for its retry without running it or counting an attempt', async () => {
      const t = setup();
      const worker = await readingFirst(t);
      const claimed = await t.store.claim(request('job-w'));
      if (!claimed.claimed) throw new Error('expected a claim');
      await t.store.release(claimed.lease, Date.now() + 60_000, { message: 'flaky', errorClass: 'E' });
      const before = t.runs();
      t.queue.send(job('job-w'));
      const record = receiveOne(t.queue);

      const outcome = await settle(t.queue, worker.process(record), record);

      expect(outcome.action).toBe('duplicate');
      expect(t.runs()).toBe(before);
      expect(await t.store.get('job-w')).toMatchObject({ status: JobStatus.RetryWait, attempts: 1 });
    });

    it('finishes a dead-lettering recorded on the item (deadReason) instead of running the job', async () => {
      const t = setup();
      const worker = await readingFirst(t);
      const claimed = await t.store.claim(request('job-f'));
      if (!claimed.claimed) throw new Error('expected a claim');
      const cause = {
        reason: 'permanent-error',
        errorClass: 'PermanentJobError',
        errorMessage: 'never',
      } as const;
      await t.store.renew(claimed.lease, 100, Date.now(), { deadLetter: cause });
      vi.advanceTimersByTime(200);
      const before = t.runs();
      t.queue.send(job('job-f'));
      const record = receiveOne(t.queue);

      const outcome = await settle(t.queue, worker.process(record), record);

      expect(outcome.action).toBe('dead-lettered');
      expect(t.runs()).toBe(before);
      expect(await t.store.get('job-f')).toMatchObject({ status: JobStatus.Dead });
    });
  });

  it('records a failed fast attempt under a lease, backs off, and runs the redelivery leased', async () => {
    const { queue, store, metrics, calls, processor, body, balance } = setup('transient');
    queue.send(body);
    const record = receiveOne(queue);

    const failed = await settle(queue, processor('w-a').process(record), record);

    expect(failed).toMatchObject({ action: 'retry', disposition: 'retain' });
    expect(calls).toEqual(['claim', 'release']);
    expect(await store.get('job-1')).toMatchObject({
      status: JobStatus.RetryWait,
      attempts: 1,
      lastErrorClass: 'TransientJobError',
    });
    expect(metrics.get(MetricName.FastPathFallback, undefined)).toBe(1);
    expect(metrics.get(MetricName.JobClaimed, undefined)).toBe(1);
    await vi.advanceTimersByTimeAsync(1500);
    const again = receiveOne(queue);
    const retried = await settle(queue, processor('w-b').process(again), again);
    expect(retried.action).toBe('completed');
    expect(calls.slice(2)).toEqual(['claim', 'complete']);
    expect(balance()).toBe(5);
    expect(await store.get('job-1')).toMatchObject({ status: JobStatus.Completed, attempts: 2 });
  });

  it('dead-letters a permanent failure through a claim, with its reason', async () => {
    const { queue, store, processor, body, balance } = setup('permanent');
    queue.send(body);
    const record = receiveOne(queue);

    const outcome = await settle(queue, processor('w-a').process(record), record);

    expect(outcome).toMatchObject({ action: 'dead-lettered', disposition: 'delete' });
    expect(queue.deadLetters.map((l) => l.reason.reason)).toEqual(['permanent-error']);
    expect(await store.get('job-1')).toMatchObject({ status: JobStatus.Dead });
    expect(balance()).toBeUndefined();
  });

  it('dead-letters a commit DynamoDB can never take after one run, naming the limit, without a request', async () => {
    const { queue, store, processor, body, balance, calls, runs } = setup('too-large');
    queue.send(body);
    const record = receiveOne(queue);

    const outcome = await settle(queue, processor('w-a').process(record), record);

    expect(outcome).toMatchObject({ action: 'dead-lettered', disposition: 'delete' });
    expect(queue.deadLetters.map((l) => l.reason.reason)).toEqual(['store-item-too-large']);
    expect(runs()).toBe(1);
    expect(await store.get('job-1')).toMatchObject({ status: JobStatus.Dead });
    expect(balance()).toBeUndefined();
    // The refused commit was checked before any write: the claim found no item (a fresh claim), then
    // the fence, the DEAD item.
    expect(calls).toEqual(['claimAndComplete', 'claim', 'renew', 'markDead']);
  });

  it('runs a job that needs a lease (ctx.step) leased at once, without counting an attempt for it', async () => {
    const { queue, store, metrics, calls, processor, body, balance, runs } = setup('step-sometimes');
    queue.send(body);
    const record = receiveOne(queue);

    const outcome = await settle(queue, processor('w-a').process(record), record);

    expect(outcome).toMatchObject({ action: 'completed', disposition: 'delete' });
    expect(runs()).toBe(2);
    expect(calls).toEqual(['claim', 'checkpoint', 'complete']);
    expect(await store.get('job-1')).toMatchObject({ status: JobStatus.Completed, attempts: 1 });
    expect(metrics.get(MetricName.FastPathFallback, { jobType: 'test.credit' })).toBe(1);
    expect(balance()).toBe(5);
  });

  it('runs a checkpointed job leased at once instead of handing it back (no ping-pong)', async () => {
    const { queue, store, calls, processor, body, balance } = setup();
    // A leased attempt checkpointed, then its worker died; its lease is over.
    const claim = await store.claim({
      dedupKey: 'job-1',
      owner: 'w-dead',
      messageId: 'old',
      type: 'test.credit',
      createdAt: new Date().toISOString(),
      leaseMs: LEASE_MS,
      now: Date.now(),
    });
    if (!claim.claimed) throw new Error('expected a claim');
    await store.checkpoint(claim.lease, { step: 'one', done: ['one'], at: Date.now() });
    await vi.advanceTimersByTimeAsync(LEASE_MS + 1);
    calls.length = 0;
    queue.send(body);
    const record = receiveOne(queue);

    const outcome = await settle(queue, processor('w-a').process(record), record);

    expect(outcome.action).toBe('completed');
    expect(calls).toEqual(['claimAndComplete', 'claim', 'complete']);
    expect(balance()).toBe(5);
  });

  it('takes the leased path when the receive count is missing', async () => {
    const { queue, calls, processor, body } = setup();
    queue.send(body);
    const record = receiveOne(queue);
    const bare = { ...record, attributes: { ...record.attributes } } as SQSRecord;
    delete (bare.attributes as { ApproximateReceiveCount?: string }).ApproximateReceiveCount;

    expect((await processor('w-a').process(bare)).action).toBe('completed');
    expect(calls).toEqual(['claim', 'complete']);
  });

  it('counts a lost commit answer as a duplicate when a racing copy did the completing', async () => {
    const { queue, metrics, processor, body, doc } = setup();
    queue.send(body);
    const first = receiveOne(queue);
    await settle(queue, processor('w-a').process(first), first);
    queue.send(body);
    const copy = receiveOne(queue);
    doc.faults.failNext('claim-and-complete', undefined, { when: 'after' });

    const outcome = await settle(queue, processor('w-b').process(copy), copy);

    expect(outcome).toMatchObject({ action: 'duplicate', disposition: 'delete' });
    expect(metrics.get(MetricName.JobSucceeded, { jobType: 'test.credit' })).toBe(1);
  });

  it('treats a lost commit answer as done once one read shows the job COMPLETED', async () => {
    const { queue, calls, processor, body, balance, doc } = setup();
    doc.faults.failNext('claim-and-complete', undefined, { when: 'after' });
    queue.send(body);
    const record = receiveOne(queue);

    const outcome = await settle(queue, processor('w-a').process(record), record);

    expect(outcome).toMatchObject({ action: 'completed', disposition: 'delete' });
    expect(calls).toEqual(['claimAndComplete', 'get']);
    expect(balance()).toBe(5);
  });

  it('gives the message back when the store is out at the commit; the redelivery completes leased', async () => {
    const { queue, store, calls, processor, body, balance, doc } = setup();
    doc.faults.failNext('claim-and-complete');
    queue.send(body);
    const record = receiveOne(queue);

    const outcome = await settle(queue, processor('w-a').process(record), record);

    expect(outcome).toMatchObject({ action: 'store-unavailable', disposition: 'retain' });
    expect(await store.get('job-1')).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1500);
    const again = receiveOne(queue);
    expect((await settle(queue, processor('w-b').process(again), again)).action).toBe('completed');
    expect(calls).toEqual(['claimAndComplete', 'get', 'claim', 'complete']);
    expect(balance()).toBe(5);
  });

  it('stops a run past its lease budget and gives it back to run leased, without using an attempt', async () => {
    const { queue, store, calls, processor, body, balance } = setup('slow');
    queue.send(body);
    const record = receiveOne(queue);
    let settledAt = 0;
    const started = Date.now();
    const outcome = settle(queue, processor('w-a').process(record), record).then((o) => {
      settledAt = Date.now();
      return o;
    });
    await vi.advanceTimersByTimeAsync(LEASE_MS + 100);

    expect((await outcome).action).toBe('deadline');
    expect(settledAt - started).toBeLessThanOrEqual(LEASE_MS);
    // Nothing was written: the redelivery's claim is the job's first attempt.
    expect(calls).toEqual([]);
    expect(await store.get('job-1')).toBeUndefined();
    const again = receiveOne(queue);
    const retried = settle(queue, processor('w-b').process(again), again);
    await vi.advanceTimersByTimeAsync(100);
    expect((await retried).action).toBe('completed');
    // The abandoned first run finishes later; its effect was never committed.
    await vi.advanceTimersByTimeAsync(10 * LEASE_MS);
    expect(balance()).toBe(5);
    expect(await store.get('job-1')).toMatchObject({ status: JobStatus.Completed, attempts: 1 });
  });

  it('re-runs the job on an optimistic conflict and commits the second run', async () => {
    const { queue, metrics, calls, processor, body, balance, runs } = setup('conflict-once');
    queue.send(body);
    const record = receiveOne(queue);

    const outcome = settle(queue, processor('w-a').process(record), record);
    await vi.advanceTimersByTimeAsync(1000);

    expect((await outcome).action).toBe('completed');
    expect(runs()).toBe(2);
    expect(calls).toEqual(['claimAndComplete', 'claimAndComplete']);
    expect(metrics.get(MetricName.OptimisticConflict, undefined)).toBe(1);
    expect(balance()).toBe(5);
  });

  it('takes over a job whose leased owner stalled past its lease; the stalled commit is fenced out', async () => {
    const { queue, store, processor, body, balance } = setup();
    // A leased claim by a worker that then stalls (its lease runs out without a renewal).
    const stalled = await store.claim({
      dedupKey: 'job-1',
      owner: 'w-stalled',
      messageId: 'other',
      type: 'test.credit',
      createdAt: new Date().toISOString(),
      leaseMs: LEASE_MS,
      now: Date.now(),
    });
    if (!stalled.claimed) throw new Error('expected a claim');
    await vi.advanceTimersByTimeAsync(LEASE_MS + 1);
    queue.send(body);
    const record = receiveOne(queue);

    const outcome = await settle(queue, processor('w-a').process(record), record);

    expect(outcome.action).toBe('completed');
    await expect(store.complete(stalled.lease, 'late')).rejects.toMatchObject({ name: 'LeaseLostError' });
    expect(balance()).toBe(5);
  });

  describe('D2 (found by the interleaving model): the attempt budget of a job dead-lettered but not marked DEAD', () => {
    /**
     * Both attempts of a job (maxAttempts 2) fail; the second is dead-lettered (the letter is sent), but
     * marking the item DEAD fails (an outage), so the item stays IN_PROGRESS under that attempt's lease
     * and the message is kept: "its next delivery finishes the dead-lettering" (dead-letterer.ts), since
     * that claim finds attempts > maxAttempts. Then a duplicate send (a new message, first receive)
     * arrives after the lease ended. Returns the job's item, the letters and the runs once it is handled.
     */
    async function exhaustThenDuplicate(fastPath: boolean) {
      const { queue, store, processor, body, balance, runs, doc } = setup('flaky-twice', {
        fastPath,
        maxAttempts: 2,
      });
      const worker = processor('w-a');
      queue.send(body);
      const first = receiveOne(queue);
      expect((await settle(queue, worker.process(first), first)).action).toBe('retry');
      await vi.advanceTimersByTimeAsync(1500);
      doc.faults.failNext('mark-dead');
      const second = receiveOne(queue);
      expect((await settle(queue, worker.process(second), second)).action).toBe('store-unavailable');
      expect(queue.deadLetters).toHaveLength(1);
      expect(await store.get('job-1')).toMatchObject({ status: JobStatus.InProgress, attempts: 2 });
      // The kept message is hidden for now; the duplicate is first received once the lease has ended.
      await vi.advanceTimersByTimeAsync(LEASE_MS + 1);
      queue.send(body);
      const duplicate = queue.receive(10).find((r) => r.attributes.ApproximateReceiveCount === '1');
      if (!duplicate) throw new Error('expected the duplicate on its first receive');
      await settle(queue, processor('w-b').process(duplicate), duplicate);
      return { item: await store.get('job-1'), letters: queue.deadLetters.length, runs: runs(), balance };
    }

    it('leased job type: the duplicate finishes the dead-lettering without a third run', async () => {
      const { item, letters, runs, balance } = await exhaustThenDuplicate(false);
      expect(item?.status).toBe(JobStatus.Dead);
      expect(letters).toBeGreaterThanOrEqual(1);
      expect(runs).toBe(2);
      expect(balance()).toBeUndefined();
    });

    // Failed before the fix: the fast commit's condition did not look at the attempts, so the duplicate
    // committed the job COMPLETED, with its effect, while the DLQ held a letter for it. Now the commit
    // refuses an item whose attempts are used up, and the worker claims it at once to dead-letter it.
    // (The fast run itself happens before its commit is refused: a third run, with no effect.)
    it('fast job type: the duplicate does not commit the job past its attempt budget (ends DEAD, no effect)', async () => {
      const { item, letters, runs, balance } = await exhaustThenDuplicate(true);
      expect(item?.status).toBe(JobStatus.Dead);
      expect(letters).toBeGreaterThanOrEqual(1);
      expect(runs).toBe(3);
      expect(balance()).toBeUndefined();
    });
  });
});

// An optimistic conflict that outlasts its tries is explained by one read of the refused item (up to 2 s).
// Failed before the fix: a read-back that ran past the attempt's time (the fast path's budget, or the
// invocation deadline of a leased run) turned the attempt into a 'deadline' hand-back, not counted, where
// the same conflict without the read-back is a failed attempt, recorded and retried.
describe('The conflict read-back does not change how an attempt ends', () => {
  async function conflictNearTheEnd(readMs: number, fastPath: boolean, deadlineMs?: number) {
    const { doc, store, row } = memoryStores({ tables: { ledger: 'account' } });
    doc.seed('ledger', { account: 'a', balance: 0, version: 1 });
    const queue = new InMemoryQueue({ visibilitySeconds: 10 });
    let runs = 0;
    const stale = defineJob({
      type: 'test.stale',
      fastPath,
      payload: z.object({}),
      tables: { ledger: defineTable('ledger', { partitionKey: 'account' }) },
      async run(ctx) {
        runs += 1;
        // The first run ends near the attempt's time; every commit expects a version long gone.
        if (runs === 1) await new Promise((r) => setTimeout(r, 2400));
        const put = ctx.tables.ledger.versionedPut({
          key: { account: 'a' },
          seenVersion: 0,
          item: { balance: 1 },
        });
        return { effects: [put] };
      },
    });
    // The table read of ctx.tables (and of the read-back), answered after `readMs`.
    const slowReads = {
      send: async (command: { input: { Key: Record<string, unknown> } }) => {
        await new Promise((r) => setTimeout(r, readMs));
        return { Item: row('ledger', command.input.Key) };
      },
    };
    const processor = new JobProcessor({
      store,
      queue,
      registry: JobRegistry.of([stale]),
      tables: new EffectTables(slowReads as never, { ledger: 'ledger' }),
      worker: 'w-a',
      logger: new Logger({ logLevel: 'SILENT' }),
      metrics: new InMemoryMetrics(),
      leaseMs: LEASE_MS,
      backoff: { baseSeconds: 1, capSeconds: 1 },
      random: () => 0.5,
    });
    queue.send(
      JSON.stringify(makeEnvelope({ id: 'e-1', type: 'test.stale', dedupKey: 'job-1', payload: {} })),
    );
    const record = receiveOne(queue);
    const options = deadlineMs === undefined ? {} : { deadline: Date.now() + deadlineMs };
    const outcome = processor.process(record, options);
    await vi.advanceTimersByTimeAsync(10 * LEASE_MS);
    const item = await store.get('job-1');
    return {
      action: (await outcome).action,
      status: item?.status,
      attempts: item?.attempts,
      conflicts: item?.conflicts,
      error: item?.lastError,
    };
  }

  it('fast path: a read-back past the budget still ends as the recorded conflict', async () => {
    const quick = await conflictNearTheEnd(0, true);
    const slow = await conflictNearTheEnd(1500, true);

    expect(quick).toMatchObject({ action: 'retry', status: JobStatus.RetryWait, attempts: 0, conflicts: 1 });
    expect(quick.error).toContain('expected version 0, found version 1');
    expect(slow).toMatchObject({ action: 'retry', status: JobStatus.RetryWait, attempts: 0, conflicts: 1 });
    expect(slow.error).toContain('expected version 0, and the item could not be read back');
  });

  it('leased run: a read-back past the invocation deadline still ends as the recorded conflict', async () => {
    const quick = await conflictNearTheEnd(0, false, 2800);
    const slow = await conflictNearTheEnd(1500, false, 2800);

    expect(quick).toMatchObject({ action: 'retry', status: JobStatus.RetryWait, attempts: 0, conflicts: 1 });
    expect(slow).toMatchObject({ action: 'retry', status: JobStatus.RetryWait, attempts: 0, conflicts: 1 });
    expect(slow.error).toContain('could not be read back');
  });
});
