import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { keyFingerprint } from '../../../shared/core/model/conflict.ts';
import { defineTable } from '../../../shared/core/model/table.ts';
import { PermanentJobError, TransientJobError } from '../../../shared/errors.ts';
import { defineJob } from '../../../shared/jobs/define-job.ts';
import { runJob } from '../../../shared/testing/index.ts';

// `runJob` (leaseq/testing) drives the real processor on the in-memory stores: these are the jobs of
// docs/jobs.md's testing section (`order.charge`: a step and a row; `stock.reserve`: a versionedPut and
// a permanent error), and what the harness reports for each way a job can end.

const orders = defineTable('orders', { partitionKey: 'orderId' });
const stock = defineTable('stock', { partitionKey: 'sku' });
const charged: string[] = [];

const charge = defineJob({
  type: 'order.charge',
  payload: z.object({ orderId: z.string(), cents: z.number().int() }),
  tables: { orders },
  async run(ctx, p) {
    const chargeId = await ctx.step('charge', async () => {
      charged.push(ctx.idempotencyKey('charge'));
      return { data: `ch_${p.orderId}` };
    });
    return {
      effects: [ctx.tables.orders.put({ orderId: p.orderId, cents: p.cents, chargeId, status: 'PAID' })],
      result: { chargeId },
    };
  },
});

const reserve = defineJob({
  type: 'stock.reserve',
  payload: z.object({ sku: z.string(), qty: z.number().int().positive() }),
  tables: { stock },
  async run(ctx, p) {
    const row = await ctx.tables.stock.get<{ qty: number; version: number }>({ sku: p.sku });
    if (!row || row.qty < p.qty) throw new PermanentJobError(`not enough ${p.sku}`);
    return {
      effects: [
        ctx.tables.stock.versionedPut({
          key: { sku: p.sku },
          seenVersion: row.version,
          item: { qty: row.qty - p.qty },
        }),
      ],
    };
  },
});

describe('Function: runJob', () => {
  it('completes a job with a step and a row: the result, the row, the step run once', async () => {
    charged.length = 0;
    const run = await runJob(charge, { orderId: 'o-1', cents: 500 });

    expect(run).toMatchObject({ status: 'completed', result: { chargeId: 'ch_o-1' } });
    expect(run.tables.orders).toEqual([{ orderId: 'o-1', cents: 500, chargeId: 'ch_o-1', status: 'PAID' }]);
    expect(charged).toEqual(['order.charge-test#charge']);
  });

  it('retries a failed attempt or step after its backoff, without waiting for it', async () => {
    charged.length = 0;
    // The first attempt fails before the job runs; the second completes.
    const run = await runJob(
      charge,
      { orderId: 'o-2', cents: 1 },
      {
        failAttempt: { error: new TransientJobError('gateway down') },
      },
    );
    expect(run.status).toBe('completed');
    expect(run.attempts).toEqual([
      { action: 'retry', error: { name: 'TransientJobError', message: 'gateway down' }, backoffSeconds: 1 },
      { action: 'completed' },
    ]);
    expect(charged).toEqual(['order.charge-test#charge']);

    const once = await runJob(
      charge,
      { orderId: 'o-3', cents: 1 },
      {
        failStep: { name: 'charge', error: new TransientJobError('card network') },
        attempts: 1,
      },
    );
    expect(once).toMatchObject({
      status: 'retried',
      error: { name: 'TransientJobError', message: 'card network' },
      backoffSeconds: 1,
    });
    expect(once.tables.orders).toEqual([]);
  });

  it('applies a versionedPut to a seeded row and reports the version it wrote', async () => {
    const run = await runJob(
      reserve,
      { sku: 'a', qty: 2 },
      { tables: { stock: [{ sku: 'a', qty: 5, version: 0 }] } },
    );

    expect(run.status).toBe('completed');
    expect(run.tables.stock).toEqual([{ sku: 'a', qty: 3, version: 1 }]);
    expect(run.effects).toHaveLength(1);
  });

  it('dead-letters a PermanentJobError at once, writing nothing', async () => {
    const run = await runJob(
      reserve,
      { sku: 'a', qty: 9 },
      { tables: { stock: [{ sku: 'a', qty: 5, version: 0 }] } },
    );

    expect(run).toMatchObject({
      status: 'dead-lettered',
      reason: 'permanent-error',
      error: { name: 'PermanentJobError', message: 'not enough a' },
    });
    expect(run.attempts).toHaveLength(1);
    expect(run.tables.stock).toEqual([{ sku: 'a', qty: 5, version: 0 }]);
  });

  it('dead-letters max-attempts after the last retry, skipping the backoffs', async () => {
    const started = Date.now();
    const run = await runJob(
      charge,
      { orderId: 'o-4', cents: 1 },
      {
        failStep: { name: 'charge', error: new Error('still down'), times: 10 },
        maxAttempts: 3,
      },
    );

    expect(run).toMatchObject({
      status: 'dead-lettered',
      reason: 'max-attempts',
      error: { message: 'still down' },
    });
    expect(run.attempts.map((a) => a.backoffSeconds)).toEqual([1, 2, undefined]);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  // docs/jobs.md: what lib-dynamodb will not send is refused before anything is written.
  it('does not commit an effect lib-dynamodb would refuse to send (an empty set)', async () => {
    const tagged = defineJob({
      type: 'order.tag',
      payload: z.object({ orderId: z.string() }),
      tables: { orders },
      async run(ctx, p) {
        return { effects: [ctx.tables.orders.put({ orderId: p.orderId, tags: new Set<string>() })] };
      },
    });
    const run = await runJob(tagged, { orderId: 'o-5' }, { maxAttempts: 1 });

    expect(run).toMatchObject({
      status: 'dead-lettered',
      error: { message: expect.stringMatching(/non-empty set/) },
    });
    expect(run.tables.orders).toEqual([]);
  });

  it('refuses seed rows for a table the job does not declare', async () => {
    await expect(runJob(charge, { orderId: 'o' }, { tables: { stock: [] } as never })).rejects.toThrow(
      /declares no table stock \(it declares: orders\)/,
    );
  });
});

// Issue 20 item 4 in memory (the emulator twin: test/integration/core/pipeline/conflict-detail.test.ts).
describe('Optimistic conflicts say what conflicted', () => {
  it('explains a row seeded without a version attribute (the versionedPut trap)', async () => {
    const run = await runJob(
      reserve,
      { sku: 'a', qty: 1 },
      { tables: { stock: [{ sku: 'a', qty: 5 }] }, maxAttempts: 1 },
    );

    // A row without its version attribute never clears: the conflict uses the attempt.
    expect(run).toMatchObject({ status: 'dead-lettered', reason: 'max-attempts' });
    if (run.status !== 'dead-lettered') return;
    expect(run.error.message).toBe(
      `optimistic write on completion conflicted 3 times: versionedPut to table stock key ${keyFingerprint({ sku: 'a' })}: ` +
        'expected no item (seenVersion undefined), found an item without a version attribute: ' +
        'row has no version attribute: seed rows with version 0 or use put',
    );
    expect(run.tables.stock).toEqual([{ sku: 'a', qty: 5 }]);
  });

  it('names the version expected and the one found, in a step too', async () => {
    const stale = defineJob({
      type: 'stock.stale',
      payload: z.object({ sku: z.string() }),
      tables: { stock },
      async run(ctx, p) {
        await ctx.step('take', async () => ({
          effects: [ctx.tables.stock.versionedPut({ key: { sku: p.sku }, seenVersion: 3, item: { qty: 0 } })],
        }));
      },
    });
    const run = await runJob(
      stale,
      { sku: 'b' },
      { tables: { stock: [{ sku: 'b', qty: 5, version: 4 }] }, attempts: 1 },
    );

    expect(run).toMatchObject({ status: 'retried', error: { name: 'OptimisticConflictError' } });
    if (run.status !== 'retried') return;
    expect(run.error.message).toBe(
      `optimistic write on step take conflicted 3 times: versionedPut to table stock key ${keyFingerprint({ sku: 'b' })}: ` +
        'expected version 3, found version 4',
    );
  });

  it('explains it on the fast path too', async () => {
    const fast = defineJob({ ...reserve, type: 'stock.fast', fastPath: true });
    const run = await runJob(
      fast,
      { sku: 'a', qty: 1 },
      { tables: { stock: [{ sku: 'a', qty: 5 }] }, maxAttempts: 1 },
    );

    expect(run).toMatchObject({ status: 'dead-lettered', reason: 'max-attempts' });
    if (run.status === 'dead-lettered')
      expect(run.error.message).toContain(
        `: versionedPut to table stock key ${keyFingerprint({ sku: 'a' })}: expected no item`,
      );
  });

  it('names the condition of a conditional put or update that kept failing', async () => {
    const guarded = defineJob({
      type: 'stock.guarded',
      payload: z.object({ sku: z.string() }),
      tables: { stock },
      async run(ctx, p) {
        return {
          effects: [
            ctx.tables.stock.update(
              { sku: p.sku },
              { expression: 'SET qty = qty - :one', values: { ':one': 1, ':min': 1 } },
              'qty >= :min',
            ),
          ],
        };
      },
    });
    const run = await runJob(
      guarded,
      { sku: 'c' },
      { tables: { stock: [{ sku: 'c', qty: 0 }] }, attempts: 1 },
    );

    if (run.status !== 'retried') throw new Error(`expected a retry, got ${run.status}`);
    expect(run.error.message).toBe(
      `optimistic write on completion conflicted 3 times: update to table stock key ${keyFingerprint({ sku: 'c' })}: ` +
        'its condition qty >= :min failed (the item exists)',
    );
  });
});

describe('Optimistic conflicts say what conflicted, whatever the key', () => {
  it('names a bigint key (lib-dynamodb sends it as a number) instead of failing on it', async () => {
    const counters = defineTable('counters', { partitionKey: { name: 'id', type: 'number' } });
    const bump = defineJob({
      type: 'counter.bump',
      payload: z.object({}),
      tables: { counters },
      async run(ctx) {
        return {
          effects: [
            ctx.tables.counters.versionedPut({ key: { id: 2n ** 60n }, seenVersion: 1, item: { n: 1 } }),
          ],
        };
      },
    });
    const run = await runJob(
      bump,
      {},
      { tables: { counters: [{ id: 2n ** 60n, version: 2n ** 60n }] }, attempts: 1 },
    );

    if (run.status !== 'retried') throw new Error(`expected a retry, got ${run.status}`);
    expect(run.error).toMatchObject({ name: 'OptimisticConflictError' });
    expect(run.error.message).toBe(
      'optimistic write on completion conflicted 3 times: versionedPut to table counters key ' +
        `${keyFingerprint({ id: 2n ** 60n })}: expected version 1, found version 1152921504606846976`,
    );
  });
});

// docs/jobs.md, "Unit tests with runJob": the two tests as the page shows them.
describe('docs/jobs.md samples', () => {
  it('order.charge retries a failed charge, then records the order', async () => {
    const run = await runJob(
      charge,
      { orderId: 'o-1', cents: 500 },
      {
        failStep: { name: 'charge', error: new TransientJobError('gateway down') },
      },
    );
    expect(run.status).toBe('completed');
    expect(run.attempts.map((a) => a.action)).toEqual(['retry', 'completed']);
    expect(run.tables.orders).toEqual([{ orderId: 'o-1', cents: 500, chargeId: 'ch_o-1', status: 'PAID' }]);
  });

  it('stock.reserve takes stock, and dead-letters an order it cannot fill', async () => {
    const stock = [{ sku: 'a', qty: 5, version: 0 }];
    const ok = await runJob(reserve, { sku: 'a', qty: 2 }, { tables: { stock } });
    expect(ok.tables.stock).toEqual([{ sku: 'a', qty: 3, version: 1 }]);

    const short = await runJob(reserve, { sku: 'a', qty: 9 }, { tables: { stock } });
    expect(short).toMatchObject({ status: 'dead-lettered', reason: 'permanent-error' });
    expect(short.tables.stock).toEqual(stock);
  });
});
