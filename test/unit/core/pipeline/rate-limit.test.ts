import { Logger } from '@aws-lambda-powertools/logger';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { InMemoryMetrics } from '../../../../shared/core/observe/metrics.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { LIFE_ATTRIBUTE, RESENT_FROM_ATTRIBUTE } from '../../../../shared/core/pipeline/record-message.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { LEASES_TABLE, memoryStores } from '../../../support/memory-stores.ts';

// The pipeline's rate step on the in-memory stores (real timers: the waits are short).

function setup(rateLimit: { limit: number; perSeconds: number }) {
  const starts: number[] = [];
  const job = defineJob({
    type: 'test.paced',
    payload: z.object({ n: z.number() }),
    rateLimit,
    run: async () => {
      starts.push(Date.now());
      return {};
    },
  });
  const { doc, store, rates } = memoryStores();
  const queue = new InMemoryQueue();
  const processor = new JobProcessor({
    store,
    queue,
    registry: JobRegistry.of([job]),
    rates,
    worker: 'w',
    logger: new Logger({ logLevel: 'SILENT' }),
  });
  const send = (n: number) =>
    queue.send(
      JSON.stringify(makeEnvelope({ id: `e-${n}`, type: 'test.paced', dedupKey: `k-${n}`, payload: { n } })),
    );
  return { starts, doc, store, queue, rates, processor, send, job };
}

describe('Rate limits in the pipeline', () => {
  it('refuses to build a processor for a rate-limited type without a rate store', () => {
    const { job } = setup({ limit: 1, perSeconds: 1 });
    expect(
      () =>
        new JobProcessor({
          store: memoryStores().store,
          queue: new InMemoryQueue(),
          registry: JobRegistry.of([job]),
          worker: 'w',
          logger: new Logger({ logLevel: 'SILENT' }),
        }),
    ).toThrow('job type test.paced has a rateLimit, but the processor has no rate store (option rates)');
  });

  it('gives a job over the rate back until its permit, without touching its job item', async () => {
    // Prepare
    const { processor, queue, store, send } = setup({ limit: 1, perSeconds: 60 });
    send(1);
    send(2);
    const [a, b] = queue.receive(2);
    if (!a || !b) throw new Error('expected two records');

    // Act
    const first = await processor.process(a);
    const before = Date.now();
    const second = await processor.process(b);

    // Assess
    expect(first.action).toBe('completed');
    expect(second).toMatchObject({ action: 'limited', disposition: 'retain' });
    expect(await store.get('k-2')).toBeUndefined();
    const back = queue.messages().find((m) => m.messageId === b.messageId);
    expect(((back?.visibleAt ?? 0) - before) / 1000).toBeGreaterThanOrEqual(59);
    expect(((back?.visibleAt ?? 0) - before) / 1000).toBeLessThanOrEqual(62);
  });

  it('waits in the worker for a permit due within a second, then runs the job', async () => {
    // Prepare
    const { processor, queue, store, send, starts } = setup({ limit: 1, perSeconds: 0.3 });
    send(1);
    send(2);
    const records = queue.receive(2);

    // Act
    const outcomes = await Promise.all(records.map((r) => processor.process(r)));

    // Assess
    expect(outcomes.map((o) => o.action)).toEqual(['completed', 'completed']);
    expect(Math.abs((starts[1] ?? 0) - (starts[0] ?? 0))).toBeGreaterThanOrEqual(290);
    expect((await store.get('k-2'))?.attempts).toBe(1);
  });

  it('gives the message back when the rate store is out, and claims nothing', async () => {
    // Prepare
    const { processor, queue, store, send, doc } = setup({ limit: 5, perSeconds: 1 });
    doc.faults.failNext('rate-take');
    send(1);
    const [record] = queue.receive(1);
    if (!record) throw new Error('expected a record');

    // Act
    const outcome = await processor.process(record);

    // Assess
    expect(outcome).toMatchObject({ action: 'store-unavailable', disposition: 'retain' });
    expect(await store.get('k-1')).toBeUndefined();
  });

  it('spends no permit on a job its concurrency limit bounces: permits count starts', async () => {
    // Prepare: one slot, 2 starts a minute; the first job holds the slot until released.
    let release: () => void = () => undefined;
    const gate = new Promise<void>((done) => {
      release = done;
    });
    const job = defineJob({
      type: 'test.both',
      payload: z.object({ n: z.number() }),
      concurrency: { limit: 1 },
      rateLimit: { limit: 2, perSeconds: 60 },
      run: async () => {
        await gate;
        return {};
      },
    });
    const queue = new InMemoryQueue();
    const { store, leases, rates, row } = memoryStores();
    const processor = new JobProcessor({
      store,
      queue,
      leases,
      registry: JobRegistry.of([job]),
      rates,
      worker: 'w',
      logger: new Logger({ logLevel: 'SILENT' }),
    });
    for (const n of [1, 2, 3]) {
      queue.send(
        JSON.stringify(makeEnvelope({ id: `e-${n}`, type: 'test.both', dedupKey: `k-${n}`, payload: { n } })),
      );
    }
    const [r1, r2, r3] = queue.receive(3);
    if (!r1 || !r2 || !r3) throw new Error('expected three records');
    const first = processor.process(r1);
    await new Promise((done) => setTimeout(done, 20));

    // Act: two jobs find the slot busy while the first runs; then the first ends and the second retries.
    const bounced = [await processor.process(r2), await processor.process(r3)];
    release();
    await first;
    const retried = await processor.process(r2);

    // Assess: the bounces took no permit, so the second start of the minute is allowed.
    expect(bounced.map((o) => o.action)).toEqual(['limited', 'limited']);
    expect(retried.action).toBe('completed');
    expect(row(LEASES_TABLE, { leaseKey: 'rate:test.both:*' })?.g).toHaveLength(2);
  });

  it('counts a rate store outage as a hand-back, as a claim outage is', async () => {
    // Prepare
    const { job } = setup({ limit: 5, perSeconds: 1 });
    const queue = new InMemoryQueue();
    const { doc, store, rates } = memoryStores();
    const metrics = new InMemoryMetrics();
    const processor = new JobProcessor({
      store,
      queue,
      registry: JobRegistry.of([job]),
      rates,
      metrics,
      worker: 'w',
      logger: new Logger({ logLevel: 'SILENT' }),
    });
    doc.faults.failNext('rate-take');
    queue.send(
      JSON.stringify(makeEnvelope({ id: 'e', type: 'test.paced', dedupKey: 'k', payload: { n: 1 } })),
    );
    const [record] = queue.receive(1);
    if (!record) throw new Error('expected a record');

    // Act
    const outcome = await processor.process(record);

    // Assess
    expect(outcome.action).toBe('store-unavailable');
    expect(metrics.counters.get('StoreUnavailable')).toBe(1);
    expect(metrics.counters.get('HandBack')).toBe(1);
  });
});

describe('Limits and the copies of a finished job', () => {
  it("spends no rate permit on a cancelled job's copy: the next job of the key starts at once", async () => {
    // Prepare: k-1 is cancelled before its message comes (a tombstone); one permit per minute.
    const { processor, queue, store, send, starts } = setup({ limit: 1, perSeconds: 60 });
    await store.cancel('k-1', { now: Date.now(), reason: 'not wanted' });
    send(1);
    send(2);
    const [copy, next] = queue.receive(2);
    if (!copy || !next) throw new Error('expected two records');

    // Act
    const dropped = await processor.process(copy);
    const ran = await processor.process(next);

    // Assess: the copy was dropped without a permit; k-2 took the minute's only one.
    expect(dropped.action).toBe('cancelled-copy');
    expect(ran.action).toBe('completed');
    expect(starts).toHaveLength(1);
  });

  it("spends no rate permit on a redrive's message of an earlier life of its key: dropped unrun", async () => {
    // Prepare: k-1's life 0 died; a fresh send reset the key (life 1), which waits for its retry. A
    // redrive's message of life 0 comes late; one permit per minute.
    const { processor, queue, store, send, starts } = setup({ limit: 1, perSeconds: 60 });
    const t0 = Date.now();
    const claim = (messageId: string, now: number) =>
      store.claim({
        dedupKey: 'k-1',
        owner: 'w0',
        messageId,
        type: 'test.paced',
        createdAt: 'c',
        leaseMs: 3000,
        now,
      });
    const first = await claim('m-0', t0);
    if (!first.claimed) throw new Error('expected a claim');
    await store.markDead(first.lease, { message: 'no', errorClass: 'E', deadKeyTtlSeconds: 1 });
    const reset = await claim('m-2', t0 + 5_000);
    if (!reset.claimed) throw new Error('expected the reset');
    await store.release(reset.lease, t0 + 5_001, { message: 'again', errorClass: 'E' });
    queue.send(
      JSON.stringify(makeEnvelope({ id: 'e-1', type: 'test.paced', dedupKey: 'k-1', payload: { n: 1 } })),
      {
        attributes: {
          [RESENT_FROM_ATTRIBUTE]: { dataType: 'String', stringValue: 'm-0' },
          [LIFE_ATTRIBUTE]: { dataType: 'String', stringValue: '0' },
        },
      },
    );
    send(2);
    const [stale, next] = queue.receive(2);
    if (!stale || !next) throw new Error('expected two records');

    // Act
    const dropped = await processor.process(stale);
    const ran = await processor.process(next);

    // Assess: dropped before its permit; k-1 still waits at its attempt; k-2 took the minute's permit.
    expect(dropped).toMatchObject({ action: 'other-life-copy', disposition: 'delete' });
    expect(await store.get('k-1')).toMatchObject({ status: 'RETRY_WAIT', attempts: 1, life: 1 });
    expect(ran.action).toBe('completed');
    expect(starts).toHaveLength(1);
  });

  it("holds a concurrency slot for a cancelled job's copy only until its claim is refused", async () => {
    // Prepare: one slot; k-1 cancelled; its copy's store calls are slow.
    const job = defineJob({
      type: 'test.single',
      payload: z.object({ n: z.number() }),
      concurrency: { limit: 1 },
      run: async () => ({}),
    });
    const { doc, store, leases } = memoryStores();
    const queue = new InMemoryQueue();
    const processor = new JobProcessor({
      store,
      queue,
      leases,
      registry: JobRegistry.of([job]),
      worker: 'w',
      logger: new Logger({ logLevel: 'SILENT' }),
    });
    const send = (n: number) =>
      queue.send(
        JSON.stringify(
          makeEnvelope({ id: `e-${n}`, type: 'test.single', dedupKey: `k-${n}`, payload: { n } }),
        ),
      );
    await store.cancel('k-1', { now: Date.now() });
    send(1);
    send(2);
    const [copy, next] = queue.receive(2);
    if (!copy || !next) throw new Error('expected two records');
    doc.faults.delayNext('claim', 300);

    // Act: the copy first, the next job while the copy's claim is on its way, and again after.
    const dropping = processor.process(copy);
    await new Promise((done) => setTimeout(done, 50));
    const meanwhile = await processor.process(next);
    const dropped = await dropping;
    // Its next try (the same record, as its redelivery would be).
    const ran = await processor.process(next);

    // Assess: the slot was the copy's for its claim's round trip only (a bounce, no attempt), then free:
    // nothing the copy took outlives its record.
    expect(meanwhile.action).toBe('limited');
    expect(dropped.action).toBe('cancelled-copy');
    expect((await leases.get('slot:test.single:*#0'))?.owner).toBeUndefined();
    expect(ran.action).toBe('completed');
  });
});
