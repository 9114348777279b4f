import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../shared/core/envelope.ts';
import { JobProcessor, type JobProcessorOptions } from '../../../shared/core/processor.ts';
import { JobRegistry } from '../../../shared/core/registry.ts';
import { JobStatus } from '../../../shared/core/statuses.ts';
import { defineJob } from '../../../shared/jobs/define-job.ts';
import { InMemoryJobStore } from '../../../shared/testing/in-memory-job-store.ts';
import { InMemoryQueue } from '../../../shared/testing/in-memory-queue.ts';

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
  const store = new InMemoryJobStore();
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
  return { runs, store, queue, processor, body };
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

describe('scratch', () => {
  it('F4: near the deadline the job runs to leaseUntil itself: no safety margin', async () => {
    const { runs, store, queue, processor, body } = setup(10_000);
    queue.send(body);
    const [record] = queue.receive(1);
    if (!record) throw new Error('no record');
    const t0 = Date.now();
    const outcome = processor('w-a').process(record, { deadline: t0 + 2500 });
    let maxLease = 0;
    for (let i = 0; i < 30; i++) { await vi.advanceTimersByTimeAsync(100); maxLease = Math.max(maxLease, (await store.get('job-1'))?.leaseUntil ?? 0); }
    const o = await outcome;
    console.log(o.action, 'abortAt', (runs[0]?.end ?? 0) - t0, 'leaseUntil', maxLease - t0, 'safety would stop at', maxLease - t0 - 250);
    expect((runs[0]?.end ?? 0) - t0).toBeGreaterThan(maxLease - t0 - 250);
  });
  it('F6: a healthy but slow commit in flight at the deadline is abandoned and the job re-run (old code completed it)', async () => {
    const { runs, store, queue, processor, body } = setup(2000);
    queue.send(body);
    const [record] = queue.receive(1);
    if (!record) throw new Error('no record');
    const t0 = Date.now();
    store.faults.delayNext('complete', 800, { when: 'before' }); // e.g. SDK retrying a throttle
    const outcome = processor('w-a').process(record, { deadline: t0 + 2500 });
    await vi.advanceTimersByTimeAsync(5000);
    const o = await outcome;
    console.log(o, (await store.get('job-1'))?.status, runs);
    expect(o.action).toBe('deadline');
  });
});
