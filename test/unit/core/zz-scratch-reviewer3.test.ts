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
  it('F3: a commit that landed but is abandoned at lease run-out is reported lease-lost (retain, LeaseLost), not completed', async () => {
    const { store, queue, processor, body } = setup(2000);
    queue.send(body);
    const [record] = queue.receive(1);
    if (!record) throw new Error('no record');
    store.faults.failNext('renew', undefined, { times: 100 });
    store.faults.delayNext('complete', 1000, { when: 'after' }); // applied at 2000, answer at 3000
    const counts: string[] = [];
    const outcome = processor('w-a', { metrics: { count: (n: string) => counts.push(n), observe() {} } as never }).process(record);
    await vi.advanceTimersByTimeAsync(5000);
    const o = await outcome;
    console.log(o, counts, (await store.get('job-1'))?.status);
    expect((await store.get('job-1'))?.status).toBe(JobStatus.Completed);
    expect(o.action).toBe('lease-lost');
  });
  it('F5: heartbeatMs between lease-safety and lease (accepted by leaseTiming) now kills every job at its first beat', async () => {
    const { store, queue, processor, body } = setup(4000);
    queue.send(body);
    const [record] = queue.receive(1);
    if (!record) throw new Error('no record');
    const outcome = processor('w-a', { heartbeatMs: 2800 }).process(record); // lease 3000, safety 300
    await vi.advanceTimersByTimeAsync(6000);
    const o = await outcome;
    console.log(o, await store.get('job-1'));
    expect(o.action).toBe('lease-lost');
  });
});
