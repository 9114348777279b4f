// A flash sale on one stock row, as a new user would write it (docs/jobs.md, the stock-reservation
// pattern): `orders` jobs each take 1 from one row, sent at once, run by real workers polling the
// emulator's queue concurrently. What it measures: attempts used per job, conflicts, dead jobs, and the
// latency from the send to the completion.
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { BatchGetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import { ledgerTable } from '../../examples/ledger/ledger.ts';
import { makeEnvelope } from '../../shared/core/contract/envelope.ts';
import type { JobItem } from '../../shared/core/contract/job-item.ts';
import { JobRegistry } from '../../shared/core/model/registry.ts';
import { PermanentJobError } from '../../shared/errors.ts';
import { defineJob } from '../../shared/jobs/define-job.ts';
import { type CoreEnv, makeWorker, sleep, type Worker } from './core-fixture.ts';
import { uniqueName } from './env.ts';

/** The documented reservation: read the row, check the stock, write it back under its version. */
export const reserveVersioned = defineJob({
  type: 'stock.reserve',
  payload: z.object({ sku: z.string(), qty: z.number().int().positive() }),
  tables: { stock: ledgerTable },
  async run(ctx, p) {
    const row = await ctx.tables.stock.get<{ qty: number; version: number }>({ account: p.sku });
    if (!row || row.qty < p.qty) throw new PermanentJobError(`not enough ${p.sku}`);
    return {
      effects: [
        ctx.tables.stock.versionedPut({
          key: { account: p.sku },
          seenVersion: row.version,
          item: { qty: row.qty - p.qty },
        }),
      ],
    };
  },
});

/** The atomic reservation: one conditional ADD, which only the stock running out refuses. */
export const reserveAtomic = defineJob({
  type: 'stock.reserveAtomic',
  payload: z.object({ sku: z.string(), qty: z.number().int().positive() }),
  tables: { stock: ledgerTable },
  async run(ctx, p) {
    const row = await ctx.tables.stock.get<{ qty: number }>({ account: p.sku });
    if (!row || row.qty < p.qty) throw new PermanentJobError(`not enough ${p.sku}`);
    return {
      effects: [
        ctx.tables.stock.update(
          { account: p.sku },
          {
            expression: 'ADD #qty :take',
            names: { '#qty': 'qty' },
            values: { ':take': -p.qty, ':qty': p.qty },
          },
          '#qty >= :qty',
        ),
      ],
    };
  },
});

export interface BurstOptions {
  readonly orders: number;
  readonly workers: number;
  readonly maxAttempts: number;
  readonly job?: typeof reserveVersioned | typeof reserveAtomic;
  /** Give up waiting after this long. */
  readonly timeoutMs: number;
}

export interface BurstReport {
  readonly orders: number;
  /** Attempts used (the items' `attempts`) -> jobs. */
  readonly attempts: Record<string, number>;
  /** Conflicts the items recorded (their `conflicts`, summed), and the in-process conflicts counted. */
  readonly itemConflicts: number;
  readonly conflictMetric: number;
  readonly conflictRetries: number;
  readonly completed: number;
  readonly dead: number;
  readonly deadReasons: Record<string, number>;
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly maxMs: number;
  readonly wallMs: number;
  readonly stockLeft: number;
  readonly stockStart: number;
}

/** Runs one burst on a fresh row of `env`'s ledger table; resolves once every job is settled (or the timeout). */
export async function runBurst(env: CoreEnv, options: BurstOptions): Promise<BurstReport> {
  const job = options.job ?? reserveVersioned;
  const registry = JobRegistry.of([job]);
  const sku = uniqueName('sku');
  const stockStart = options.orders + 10;
  await env.clients.doc.send(
    new PutCommand({ TableName: env.ledgerTable, Item: { account: sku, qty: stockStart, version: 0 } }),
  );
  const workers: Worker[] = Array.from({ length: options.workers }, (_, i) =>
    makeWorker(env, registry, {
      worker: uniqueName(`burst${i}`),
      maxAttempts: options.maxAttempts,
      leaseMs: 10_000,
      // The worker's defaults, as a new user runs them.
      backoff: { baseSeconds: 2, capSeconds: 900 },
    }),
  );
  const keys = Array.from({ length: options.orders }, (_, i) => `${sku}-order-${i}`);
  const started = Date.now();
  for (let i = 0; i < keys.length; i += 10) {
    await env.clients.sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: env.queueUrl,
        Entries: keys.slice(i, i + 10).map((dedupKey, j) => ({
          Id: String(j),
          MessageBody: JSON.stringify(
            makeEnvelope({ id: uniqueName('order'), dedupKey, type: job.type, payload: { sku, qty: 1 } }),
          ),
        })),
      }),
    );
  }
  let settled = false;
  const loops = workers.map(async (w) => {
    while (!settled && Date.now() - started < options.timeoutMs) await w.poll(1);
  });
  let items: JobItem[] = [];
  while (Date.now() - started < options.timeoutMs) {
    items = await readItems(env, keys);
    if (items.length === keys.length && items.every((i) => i.status === 'COMPLETED' || i.status === 'DEAD'))
      break;
    await sleep(500);
  }
  const wallMs = Date.now() - started;
  settled = true;
  await Promise.all(loops);
  items = await readItems(env, keys);
  const attempts: Record<string, number> = {};
  const deadReasons: Record<string, number> = {};
  const latencies: number[] = [];
  let itemConflicts = 0;
  for (const item of items) {
    attempts[String(item.attempts)] = (attempts[String(item.attempts)] ?? 0) + 1;
    itemConflicts += (item as JobItem & { conflicts?: number }).conflicts ?? 0;
    if (item.status === 'DEAD') {
      const reason = item.deadReason ?? item.lastErrorClass ?? 'unknown';
      deadReasons[reason] = (deadReasons[reason] ?? 0) + 1;
    }
    if (item.status === 'COMPLETED' && item.completedAt !== undefined && item.createdAt !== undefined) {
      latencies.push(item.completedAt - Date.parse(item.createdAt));
    }
  }
  latencies.sort((a, b) => a - b);
  const counter = (name: string) => workers.reduce((sum, w) => sum + (w.metrics.counters.get(name) ?? 0), 0);
  const row = await readItems(env, [sku], 'account');
  return {
    orders: options.orders,
    attempts,
    itemConflicts,
    conflictMetric: counter('OptimisticConflict'),
    conflictRetries: counter('ConflictRetries'),
    completed: items.filter((i) => i.status === 'COMPLETED').length,
    dead: items.filter((i) => i.status === 'DEAD').length,
    deadReasons,
    p50Ms: percentile(latencies, 0.5),
    p95Ms: percentile(latencies, 0.95),
    maxMs: latencies.at(-1) ?? 0,
    wallMs,
    stockStart,
    stockLeft: Number((row[0] as unknown as { qty?: number } | undefined)?.qty ?? Number.NaN),
  };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? 0;
}

async function readItems(env: CoreEnv, keys: readonly string[], keyName = 'dedupKey'): Promise<JobItem[]> {
  const table = keyName === 'dedupKey' ? env.jobsTable : env.ledgerTable;
  const out: JobItem[] = [];
  for (let i = 0; i < keys.length; i += 100) {
    let request: Record<string, unknown>[] = keys.slice(i, i + 100).map((k) => ({ [keyName]: k }));
    while (request.length > 0) {
      const res = await env.clients.doc.send(
        new BatchGetCommand({ RequestItems: { [table]: { Keys: request, ConsistentRead: true } } }),
      );
      out.push(...((res.Responses?.[table] ?? []) as JobItem[]));
      request = (res.UnprocessedKeys?.[table]?.Keys ?? []) as Record<string, unknown>[];
    }
  }
  return out;
}

/** The report as a few lines for the test's output and the notes. */
export function describeBurst(label: string, r: BurstReport): string {
  return [
    `${label}: ${r.orders} orders on one row, ${r.completed} completed, ${r.dead} dead ${JSON.stringify(r.deadReasons)}`,
    `  attempts used (attempts -> jobs): ${JSON.stringify(r.attempts)}`,
    `  conflicts: ${r.conflictMetric} in process (OptimisticConflict), ${r.conflictRetries} given back (ConflictRetries), ${r.itemConflicts} on the items`,
    `  latency send -> completed: p50 ${r.p50Ms} ms, p95 ${r.p95Ms} ms, max ${r.maxMs} ms; wall ${r.wallMs} ms`,
    `  stock ${r.stockStart} -> ${r.stockLeft}`,
  ].join('\n');
}
