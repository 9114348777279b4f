import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { JobProcessor, type JobProcessorOptions } from '../../../../shared/core/pipeline/processor.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

// The processor on the in-memory store and queue under fake timers: each test drives the clock itself, so
// lease arithmetic (3 s leases, 2.6 s answers) is exact and the suite runs in milliseconds.

const LEASE_MS = 3000;

/** One run of the `test.work` job: when it started and ended (fake-clock ms), and whether it was aborted. */
interface Run {
  readonly worker: string;
  readonly start: number;
  end?: number;
  aborted?: boolean;
}

function setup(jobMs: number) {
  const runs: Run[] = [];
  const work = defineJob({
    type: 'test.work',
    payload: z.object({ n: z.number() }),
    async run(ctx) {
      const run: Run = { worker: ctx.worker, start: Date.now() };
      runs.push(run);
      ctx.signal.addEventListener('abort', () => {
        run.aborted = true;
        run.end ??= Date.now();
      });
      await new Promise((resolve) => setTimeout(resolve, jobMs));
      run.end ??= Date.now();
      return { result: 'done' };
    },
  });
  const { doc, store } = memoryStores();
  const queue = new InMemoryQueue({ visibilitySeconds: 4 });
  const registry = JobRegistry.of([work]);
  const processor = (worker: string, options: Partial<JobProcessorOptions> = {}) =>
    new JobProcessor({
      store,
      queue,
      registry,
      worker,
      logger: new Logger({ logLevel: 'SILENT' }),
      leaseMs: LEASE_MS,
      backoff: { baseSeconds: 1, capSeconds: 1 },
      random: () => 0.5,
      ...options,
    });
  const body = JSON.stringify(
    makeEnvelope({ id: 'e-1', type: 'test.work', dedupKey: 'job-1', payload: { n: 1 } }),
  );
  return { runs, doc, store, queue, processor, body };
}

/** Two copies of one job (a duplicate send) received as two records. */
function twoCopies(queue: InMemoryQueue, body: string): [SQSRecord, SQSRecord] {
  queue.send(body);
  queue.send(body);
  const [a, b] = queue.receive(2);
  if (!a || !b) throw new Error('expected two records');
  return [a, b];
}

/** True when two runs overlapped in time (two workers ran one job at once). */
function overlapping(runs: readonly Run[]): boolean {
  return runs.some((a, i) =>
    runs.some(
      (b, j) =>
        i < j &&
        a.start < (b.end ?? Number.POSITIVE_INFINITY) &&
        b.start < (a.end ?? Number.POSITIVE_INFINITY),
    ),
  );
}

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Class: JobProcessor (in memory, fake timers)', () => {
  describe('A slow store never lets two workers run one job', () => {
    it('renews at once when the claim answer arrives late, so a duplicate cannot take the job over meanwhile', async () => {
      const { runs, queue, processor, body, doc } = setup(2000);
      const [first, copy] = twoCopies(queue, body);
      // The claim lands at once but its answer takes 2.6 s of the 3 s lease.
      doc.faults.delayNext('claim', 2600, { when: 'after' });
      const owner = processor('w-a').process(first);
      await vi.advanceTimersByTimeAsync(3100);
      // The copy arrives just after the lease the claim wrote would have ended without a renewal.
      const duplicate = processor('w-b').process(copy);
      await vi.advanceTimersByTimeAsync(10_000);

      expect((await owner).action).toBe('completed');
      expect((await duplicate).disposition).toBe('delete');
      expect(runs.map((r) => r.worker)).toEqual(['w-a']);
      expect(overlapping(runs)).toBe(false);
    });

    it('abandons a claim whose answer would outlast the lease: the job is not run then, and runs once later', async () => {
      const { runs, queue, processor, body, doc } = setup(100);
      queue.send(body);
      const [record] = queue.receive(1);
      if (!record) throw new Error('no record');
      doc.faults.delayNext('claim', 20_000, { when: 'after' });
      const started = Date.now();
      let settledAt = 0;
      const outcome = processor('w-a')
        .process(record)
        .then((o) => {
          settledAt = Date.now();
          return o;
        });
      await vi.advanceTimersByTimeAsync(25_000);

      expect((await outcome).action).toBe('store-unavailable');
      expect(settledAt - started).toBeLessThanOrEqual(LEASE_MS);
      expect(runs).toHaveLength(0);
      // The message comes back after its backoff and the job runs once.
      const [again] = queue.receive(1);
      if (!again) throw new Error('the message did not come back');
      const second = processor('w-b').process(again);
      await vi.advanceTimersByTimeAsync(5000);
      expect((await second).action).toBe('completed');
      expect(runs).toHaveLength(1);
    });

    it('stops the job by the end of its lease when a renewal hangs, before anyone can take it over', async () => {
      const { runs, store, queue, processor, body, doc } = setup(10_000);
      const [first, copy] = twoCopies(queue, body);
      const owner = processor('w-a').process(first);
      await vi.advanceTimersByTimeAsync(10);
      // The next renewal is stuck in the network for 20 s (SDK retries against a black-holed store).
      doc.faults.delayNext('renew', 20_000, { when: 'before' });
      await vi.advanceTimersByTimeAsync(LEASE_MS + 500);
      const duplicate = processor('w-b').process(copy);
      await vi.advanceTimersByTimeAsync(30_000);

      // Nobody took the job: the stopped owner released it (attempt refunded); the copy finds it waiting
      // for its retry and is dropped; the owner's own message runs it later.
      expect((await owner).action).toBe('lease-ran-out');
      expect((await duplicate).action).toBe('duplicate');
      expect(runs[0]?.aborted).toBe(true);
      // The first run stopped before the lease ended.
      expect(runs[0]?.end).toBeLessThanOrEqual((runs[0]?.start ?? 0) + LEASE_MS);
      const [again] = queue.receive(1);
      if (!again) throw new Error('the message did not come back');
      const retry = processor('w-b').process(again);
      await vi.advanceTimersByTimeAsync(15_000);
      expect((await retry).action).toBe('completed');
      expect(overlapping(runs)).toBe(false);
      expect((await store.get('job-1'))?.status).toBe(JobStatus.Completed);
    });
  });

  describe('Missing edges of the state machine', () => {
    it('a commit whose answer is lost ends as completed: the release is refused by our own COMPLETED item', async () => {
      const { runs, store, queue, processor, body, doc } = setup(10);
      queue.send(body);
      const [record] = queue.receive(1);
      if (!record) throw new Error('no record');
      doc.faults.failNext('complete', undefined, { when: 'after' });
      const outcome = processor('w-a').process(record);
      await vi.advanceTimersByTimeAsync(1000);
      expect(await outcome).toMatchObject({ action: 'completed', disposition: 'delete' });
      expect(runs).toHaveLength(1);
      expect((await store.get('job-1'))?.status).toBe(JobStatus.Completed);
    });

    it('own message back early: the stale receipt does not stop the owner, and the copy is hidden, not run', async () => {
      const { runs, store, queue, processor, body } = setup(9000);
      queue.send(body);
      const [first] = queue.receive(1, { visibilitySeconds: 1.5 });
      if (!first) throw new Error('no record');
      // The first beat renews the lease but cannot move the visibility (an SQS blip): the message shows
      // again at 1.5 s and is received again, so the owner's receipt is stale from then on.
      queue.faults.failNext('change-visibility');
      const owner = processor('w-a').process(first);
      await vi.advanceTimersByTimeAsync(1600);
      const [again] = queue.receive(1);
      if (!again) throw new Error('the message did not show again');
      const early = processor('w-b').process(again);
      await vi.advanceTimersByTimeAsync(12_000);

      expect((await early).action).toBe('own-message-early');
      expect((await owner).action).toBe('completed');
      expect(runs.map((r) => r.worker)).toEqual(['w-a']);
      expect(runs[0]?.aborted).toBeUndefined();
      expect((await store.get('job-1'))?.attempts).toBe(1);
    });

    it('an owner whose renewals keep failing stops by its lease end and releases the job, its attempt refunded', async () => {
      const { runs, store, queue, processor, body, doc } = setup(60_000);
      queue.send(body);
      const [first] = queue.receive(1, { visibilitySeconds: 4 });
      if (!first) throw new Error('no record');
      // Every renewal fails (a network partition between this worker and the store).
      doc.faults.failNext('renew', undefined, { times: 100 });
      void processor('w-a').process(first);
      await vi.advanceTimersByTimeAsync(4100);
      const [again] = queue.receive(1);
      if (!again) throw new Error('the message did not come back');
      expect(again.attributes.ApproximateReceiveCount).toBe('2');
      doc.faults.clear();
      const second = processor('w-b', { leaseMs: 3000 }).process(again);
      await vi.advanceTimersByTimeAsync(1000);
      const item = await store.get('job-1');
      expect(item?.owner).toBe('w-b');
      // The stopped owner released the job when its lease ran out: that attempt was refunded.
      expect(item?.attempts).toBe(1);
      expect(runs.map((r) => r.worker)).toEqual(['w-a', 'w-b']);
      // The first run was stopped when its lease ran out, before the takeover.
      expect(runs[0]?.aborted).toBe(true);
      expect(runs[0]?.end).toBeLessThanOrEqual(runs[1]?.start ?? 0);
      void second;
    });
  });

  describe('Racing copies', () => {
    it('deletes a copy of a running job at once, after hiding it: nothing of it stays in flight (gap 15)', async () => {
      const { runs, queue, processor, body } = setup(2000);
      const [first, copy] = twoCopies(queue, body);
      const owner = processor('w-a').process(first);
      await vi.advanceTimersByTimeAsync(10);

      const duplicate = await processor('w-b').process(copy);

      expect(duplicate).toMatchObject({ action: 'duplicate', disposition: 'delete' });
      // Only the owner's message is left, before any batch deleted anything.
      expect(queue.messages().map((m) => m.messageId)).toEqual([first.messageId]);
      await vi.advanceTimersByTimeAsync(3000);
      expect((await owner).action).toBe('completed');
      expect(runs).toHaveLength(1);
    });

    it('keeps the hide when the immediate delete fails, so the batch can still delete the copy safely', async () => {
      const { queue, processor, body } = setup(2000);
      const [first, copy] = twoCopies(queue, body);
      void processor('w-a').process(first);
      await vi.advanceTimersByTimeAsync(10);
      queue.faults.failNext('delete');

      const duplicate = await processor('w-b').process(copy);

      expect(duplicate).toMatchObject({ action: 'duplicate', disposition: 'delete' });
      const hidden = queue.messages().find((m) => m.messageId === copy.messageId);
      expect(hidden?.visibleAt).toBeGreaterThan(Date.now() + 15 * 60_000);
      await vi.advanceTimersByTimeAsync(3000);
    });
  });

  describe('Found by review of the lease-timing change (each failed before its fix)', () => {
    it('a slow visibility call neither stalls the heartbeat nor lets a copy take over', async () => {
      const { runs, queue, processor, body } = setup(10_000);
      const [first, copy] = twoCopies(queue, body);
      const owner = processor('w-a').process(first);
      await vi.advanceTimersByTimeAsync(10);
      // SQS answers the next visibility changes 20 s late.
      queue.faults.delayNext('change-visibility', 20_000, { when: 'after', times: 2 });
      await vi.advanceTimersByTimeAsync(4090);
      const duplicate = processor('w-b').process(copy);
      await vi.advanceTimersByTimeAsync(30_000);
      expect((await owner).action).toBe('completed');
      expect((await duplicate).disposition).toBe('delete');
      expect(runs.map((r) => r.worker)).toEqual(['w-a']);
      expect(runs[0]?.aborted).toBeUndefined();
    });

    it('a commit that landed but whose answer came after the lease ran out counts as completed', async () => {
      const { store, queue, processor, body, doc } = setup(2000);
      queue.send(body);
      const [record] = queue.receive(1);
      if (!record) throw new Error('no record');
      doc.faults.failNext('renew', undefined, { times: 100 });
      // Applied at 2 s, answered at 3 s: after the watchdog (2.7 s) abandoned it.
      doc.faults.delayNext('complete', 1000, { when: 'after' });
      const outcome = processor('w-a').process(record);
      await vi.advanceTimersByTimeAsync(5000);
      expect((await outcome).action).toBe('completed');
      expect((await store.get('job-1'))?.status).toBe(JobStatus.Completed);
    });

    it('a fenced commit in flight at the deadline is allowed to finish, not abandoned and re-run', async () => {
      const { runs, store, queue, processor, body, doc } = setup(2000);
      queue.send(body);
      const [record] = queue.receive(1);
      if (!record) throw new Error('no record');
      // The commit takes 800 ms (an SDK retry after throttling) and lands after the deadline at 2.5 s.
      doc.faults.delayNext('complete', 800, { when: 'before' });
      const outcome = processor('w-a').process(record, { deadline: Date.now() + 2500 });
      await vi.advanceTimersByTimeAsync(5000);
      expect((await outcome).action).toBe('completed');
      expect(runs).toHaveLength(1);
      expect((await store.get('job-1'))?.status).toBe(JobStatus.Completed);
    });
  });
});
