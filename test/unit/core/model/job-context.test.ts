import { Logger } from '@aws-lambda-powertools/logger';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { versionedPut } from '../../../../shared/core/decisions/optimistic.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { TransientJobError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

// Steps and named leases of a job, on the in-memory stores under fake timers.

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

function world() {
  const { doc, store, leases, row } = memoryStores({ tables: { ledger: 'account' } });
  const queue = new InMemoryQueue({ visibilitySeconds: 30 });
  /** An effect adding `delta` to an account, against the version read now. */
  const add = (account: string, delta: number) => {
    const stored = row('ledger', { account }) as { balance: number; version: number } | undefined;
    return versionedPut({
      tableName: 'ledger',
      key: { account },
      seenVersion: stored?.version,
      item: { balance: (stored?.balance ?? 0) + delta },
    });
  };
  const balance = (account: string) =>
    (row('ledger', { account }) as { balance?: number } | undefined)?.balance;
  const processor = (registry: JobRegistry, worker: string) =>
    new JobProcessor({
      store,
      queue,
      registry,
      worker,
      leases,
      logger: new Logger({ logLevel: 'SILENT' }),
      leaseMs: 3000,
      backoff: { baseSeconds: 1, capSeconds: 1 },
      random: () => 0.5,
    });
  /** Receives the job's message (after its backoff) and runs it to the end. */
  const deliver = async (registry: JobRegistry, worker: string) => {
    await vi.advanceTimersByTimeAsync(2000);
    const [record] = queue.receive(1);
    if (!record) throw new Error('no message to deliver');
    const outcome = processor(registry, worker).process(record);
    await vi.advanceTimersByTimeAsync(10_000);
    return outcome;
  };
  return { doc, leases, store, queue, add, balance, deliver, processor };
}

const send = (queue: InMemoryQueue, type: string) =>
  queue.send(JSON.stringify(makeEnvelope({ id: 'e-1', dedupKey: 'job-1', type, payload: {} })));

describe('Class: JobContext (in memory, fake timers)', () => {
  it('a failure after a step resumes after it: the step commits once with its checkpoint', async () => {
    const w = world();
    let stepBuilds = 0;
    let runs = 0;
    const transfer = defineJob({
      type: 'test.transfer',
      payload: z.object({}),
      async run(ctx) {
        runs += 1;
        await ctx.step('debit', async () => {
          stepBuilds += 1;
          return { effects: [w.add('a', -5)] };
        });
        if (runs === 1) throw new TransientJobError('the credit side is down');
        return { effects: [w.add('b', 5)] };
      },
    });
    const registry = JobRegistry.of([transfer]);
    send(w.queue, 'test.transfer');
    expect((await w.deliver(registry, 'w-a')).action).toBe('retry');
    expect((await w.store.get('job-1'))?.checkpoint?.done).toEqual(['debit']);
    expect((await w.deliver(registry, 'w-b')).action).toBe('completed');
    expect({ a: w.balance('a'), b: w.balance('b'), stepBuilds, runs }).toEqual({
      a: -5,
      b: 5,
      stepBuilds: 1,
      runs: 2,
    });
  });

  it("refuses a named lease under the limits' prefixes (slot:, rate:): the job fails permanently, nothing taken", async () => {
    // A lease on `slot:t:*#0` would take a concurrency slot; one on a rate item would be refused for as
    // long as the permit item exists (its leaseUntil is absent, so `< :now` never holds).
    for (const key of ['slot:test.grab:*#0', 'rate:test.grab:*']) {
      const w = world();
      const grab = defineJob({
        type: 'test.grab',
        payload: z.object({}),
        run: (ctx) => ctx.withLease(key, async () => ({})),
      });
      send(w.queue, 'test.grab');
      const outcome = await w.deliver(JobRegistry.of([grab]), 'w-a');
      expect(outcome.action).toBe('dead-lettered');
      expect((await w.store.get('job-1'))?.lastError).toMatch(/reserved/);
      expect(await w.leases.get(key)).toBeUndefined();
    }
  });

  it('a holder that lost its named lease commits nothing; the retry takes the lease and commits once', async () => {
    const w = world();
    let runs = 0;
    const locked = defineJob({
      type: 'test.locked',
      payload: z.object({}),
      async run(ctx) {
        runs += 1;
        return ctx.withLease('account#a', async () => {
          await new Promise((resolve) => setTimeout(resolve, 500));
          if (runs === 1) {
            // Someone whose clock runs far ahead takes the lock meanwhile (the lease looks expired to it).
            const taken = await w.leases.tryAcquire('account#a', 'thief', 1000, Date.now() + 3_600_000);
            if (!taken.acquired) throw new Error('the thief did not get the lease');
          }
          return { effects: [w.add('a', 7)] };
        });
      },
    });
    const registry = JobRegistry.of([locked]);
    send(w.queue, 'test.locked');
    const first = await w.deliver(registry, 'w-a');
    expect(first.action).toBe('retry');
    expect(w.balance('a')).toBeUndefined();
    // The thief's lease ends by its own clock, far ahead: it lets go before the retry can take the lock.
    const thief = await w.leases.get('account#a');
    if (thief?.owner === 'thief')
      await w.leases.release({
        key: 'account#a',
        owner: 'thief',
        token: thief.token,
        leaseUntil: thief.leaseUntil,
      });
    expect((await w.deliver(registry, 'w-b')).action).toBe('completed');
    expect(w.balance('a')).toBe(7);
    expect((await w.store.get('job-1'))?.status).toBe(JobStatus.Completed);
    expect(runs).toBe(2);
  });

  it('a job aborted at its deadline while its named-lease acquire is in flight leaves no lease behind', async () => {
    const w = world();
    const renew = vi.spyOn(w.leases, 'renew');
    const locked = defineJob({
      type: 'test.locked',
      payload: z.object({}),
      run: (ctx) => ctx.withLease('account#a', async () => ({ effects: [w.add('a', 1)] })),
    });
    const registry = JobRegistry.of([locked]);
    send(w.queue, 'test.locked');
    // The acquire lands at once; its answer takes 8 s, past the invocation's deadline.
    w.doc.faults.delayNext('lease-acquire', 8000, { when: 'after' });
    const [record] = w.queue.receive(1);
    if (!record) throw new Error('no message');
    const first = w.processor(registry, 'w-a').process(record, { deadline: Date.now() + 4000 });
    await vi.advanceTimersByTimeAsync(60_000);
    expect((await first).action).not.toBe('completed');
    expect((await w.leases.get('account#a'))?.owner).toBeUndefined();
    expect(renew).not.toHaveBeenCalled();
    // The job's own retry takes the lease at once and commits.
    expect((await w.deliver(registry, 'w-b')).action).toBe('completed');
    expect(w.balance('a')).toBe(1);
  });

  it('a job that fails while a parallel named-lease acquire is in flight leaves no lease behind', async () => {
    const w = world();
    const renew = vi.spyOn(w.leases, 'renew');
    let runs = 0;
    const locked = defineJob({
      type: 'test.locked',
      payload: z.object({}),
      async run(ctx) {
        runs += 1;
        const [, result] = await Promise.all([
          runs === 1
            ? new Promise((_, reject) =>
                setTimeout(() => reject(new TransientJobError('the other side is down')), 100),
              )
            : undefined,
          ctx.withLease('account#a', async () => ({ effects: [w.add('a', 1)] })),
        ]);
        return result;
      },
    });
    const registry = JobRegistry.of([locked]);
    send(w.queue, 'test.locked');
    w.doc.faults.delayNext('lease-acquire', 1000, { when: 'after' });
    const first = await w.deliver(registry, 'w-a');
    expect(first.action).toBe('retry');
    expect((await w.leases.get('account#a'))?.owner).toBeUndefined();
    expect(renew).not.toHaveBeenCalled();
    expect((await w.deliver(registry, 'w-b')).action).toBe('completed');
    expect(w.balance('a')).toBe(1);
  });

  it('parallel steps of one job checkpoint one after the other: both commit on the first attempt', async () => {
    const w = world();
    const parallel = defineJob({
      type: 'test.parallel',
      payload: z.object({}),
      async run(ctx) {
        await Promise.all([
          ctx.step('a', async () => ({ effects: [w.add('a', 1)], data: 'A' })),
          ctx.step('b', async () => ({ effects: [w.add('b', 2)], data: 'B' })),
        ]);
      },
    });
    const registry = JobRegistry.of([parallel]);
    send(w.queue, 'test.parallel');
    const outcome = await w.deliver(registry, 'w-a');
    expect(outcome.action).toBe('completed');
    const item = await w.store.get('job-1');
    expect(item?.attempts).toBe(1);
    expect([...(item?.checkpoint?.done ?? [])].sort()).toEqual(['a', 'b']);
    expect(item?.checkpoint?.data).toEqual({ a: 'A', b: 'B' });
    expect({ a: w.balance('a'), b: w.balance('b') }).toEqual({ a: 1, b: 2 });
  });
});
