import { existsSync } from 'node:fs';
/**
 * CPU microseconds per job of leaseq's own code, on the in-memory DynamoDB (no I/O) under the job store
 * that ships (DynamoDbJobStore: its requests built, served and their answers read): the processor as
 * shipped (Powertools logger at INFO, metrics, local cache), the same with the job on the one-write fast
 * path (`fastPath: true`), the processor reading plain bodies (a key path, no envelope), the processor with logs off, and a bare loop
 * that only parses the body and applies the effect. Variants run interleaved, several rounds; the table
 * gives medians (min-max) and ratios within the run. Figures, not assertions: these machines are noisy.
 *
 *   npm run bench:cpu            (BENCH_JOBS=2000 BENCH_ROUNDS=7)
 *
 * BENCH_BASELINE=<dir> also runs the two leaseq variants of another checkout (a git worktree of main,
 * with its node_modules) in the same process, alternating with this one's, and prints this/baseline as
 * the median of per-round ratios: a change of a few percent shows through noise that moves whole runs.
 * A checkout without the in-memory DynamoDB (before issue 32) runs on its hand-written twins
 * (InMemoryJobStore with InMemoryEffectApplier).
 * Runs under tsx, so every closure created in this checkout's sources pays esbuild's keepNames `__name`;
 * the built package (tsc) and the Lambda bundle do not. BENCH_BUILT=<dir> (`dist` after `npm run build`)
 * also runs the built JavaScript of this checkout, what the package ships (tsx adds no `__name` to .js),
 * in the same process. Figures and what they include: docs/performance.md.
 */

import { isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Logger } from '@aws-lambda-powertools/logger';
import { z } from 'zod';
import { DynamoDbJobStore } from '../shared/core/adapters/dynamodb-job-store.ts';
import { makeEnvelope } from '../shared/core/contract/envelope.ts';
import type { JobStore } from '../shared/core/contract/job-store.ts';
import { compilePlainBodies, readJobBody } from '../shared/core/contract/plain-body.ts';
import { versionedPut } from '../shared/core/decisions/optimistic.ts';
import { JobRegistry } from '../shared/core/model/registry.ts';
import { defineTable } from '../shared/core/model/table.ts';
import { InMemoryMetrics } from '../shared/core/observe/metrics.ts';
import { CompletedCache } from '../shared/core/pipeline/completed-cache.ts';
import { JobProcessor } from '../shared/core/pipeline/processor.ts';
import { defineJob } from '../shared/jobs/define-job.ts';
import { InMemoryDynamoDb } from '../shared/testing/in-memory-dynamodb/client.ts';
import { leaseqTables } from '../shared/testing/in-memory-dynamodb/tables.ts';
import { InMemoryQueue } from '../shared/testing/in-memory-queue.ts';
import { formatRatio, median, minMax, renderTable } from './report.ts';

const JOBS = Number(process.env.BENCH_JOBS ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);

const BASELINE = process.env.BENCH_BASELINE;
const BUILT = process.env.BENCH_BUILT;

type Variant =
  | 'bare'
  | 'leaseq, logs off'
  | 'leaseq as shipped'
  | 'fast path as shipped'
  | 'plain body as shipped'
  | 'as shipped, hash off'
  | 'baseline, logs off'
  | 'baseline as shipped'
  | 'baseline fast path'
  | 'built as shipped'
  | 'built fast path';
const VARIANTS: readonly Variant[] = [
  'bare',
  'leaseq, logs off',
  'leaseq as shipped',
  'as shipped, hash off',
  'fast path as shipped',
  'plain body as shipped',
  ...(BASELINE ? (['baseline, logs off', 'baseline as shipped', 'baseline fast path'] as const) : []),
  ...(BUILT ? (['built as shipped', 'built fast path'] as const) : []),
];

/** The leaseq modules a run uses: this checkout's, or the baseline checkout's. */
interface Leaseq {
  readonly CompletedCache: typeof CompletedCache;
  readonly InMemoryMetrics: typeof InMemoryMetrics;
  readonly versionedPut: typeof versionedPut;
  readonly JobProcessor: typeof JobProcessor;
  readonly JobRegistry: typeof JobRegistry;
  readonly defineJob: typeof defineJob;
  readonly InMemoryQueue: typeof InMemoryQueue;
  /** A fresh job store with its ledger table, and the ledger's rows as stored. */
  readonly backend: () => Backend;
}

interface Backend {
  readonly store: JobStore;
  readonly row: (account: string) => { balance: number; version: number } | undefined;
}

/** Modules of a checkout, by path (`.ts` under tsx, or the built `.js`). */
type Loaded = Record<string, Record<string, unknown>>;

/** The shipped job store on the in-memory DynamoDB, from a checkout's own modules. */
function dynamoBackend(m: {
  InMemoryDynamoDb: typeof InMemoryDynamoDb;
  leaseqTables: typeof leaseqTables;
  DynamoDbJobStore: typeof DynamoDbJobStore;
  defineTable: typeof defineTable;
}): () => Backend {
  return () => {
    const doc = new m.InMemoryDynamoDb({
      tables: m.leaseqTables({
        jobs: 'bench-jobs',
        app: { ledger: m.defineTable('ledger', { partitionKey: 'account' }) },
      }),
    });
    return {
      store: new m.DynamoDbJobStore({ client: doc, tableName: 'bench-jobs' }),
      row: (account) => doc.item('ledger', { account }) as { balance: number; version: number } | undefined,
    };
  };
}

const HERE: Leaseq = {
  CompletedCache,
  InMemoryMetrics,
  versionedPut,
  JobProcessor,
  JobRegistry,
  defineJob,
  InMemoryQueue,
  backend: dynamoBackend({ InMemoryDynamoDb, leaseqTables, DynamoDbJobStore, defineTable }),
};

/** A checkout's backend: the in-memory DynamoDB when it has one, else its twins (before issue 32). */
async function backendOf(
  from: (path: string) => Promise<Loaded[string]>,
  ext: string,
): Promise<() => Backend> {
  const client = `shared/testing/in-memory-dynamodb/client.${ext}`;
  try {
    const [c, tables, store, table] = await Promise.all([
      from(client),
      from(`shared/testing/in-memory-dynamodb/tables.${ext}`),
      from(`shared/core/adapters/dynamodb-job-store.${ext}`),
      from(`shared/core/model/table.${ext}`),
    ]);
    return dynamoBackend({
      InMemoryDynamoDb: c.InMemoryDynamoDb as typeof InMemoryDynamoDb,
      leaseqTables: tables.leaseqTables as typeof leaseqTables,
      DynamoDbJobStore: store.DynamoDbJobStore as typeof DynamoDbJobStore,
      defineTable: table.defineTable as typeof defineTable,
    });
  } catch (error) {
    if (!String(error).includes(client)) throw error;
  }
  const [twin, effects] = await Promise.all([
    from(`shared/testing/in-memory-job-store.${ext}`),
    from(`shared/testing/in-memory-effects.${ext}`),
  ]);
  type Twin = new (o: { effects: unknown }) => JobStore;
  type Applier = new (o: { tables: Record<string, string[]> }) => { get(t: string, k: object): unknown };
  return () => {
    const ledger = new (effects.InMemoryEffectApplier as Applier)({ tables: { ledger: ['account'] } });
    return {
      store: new (twin.InMemoryJobStore as Twin)({ effects: ledger }),
      row: (account) => ledger.get('ledger', { account }) as { balance: number; version: number } | undefined,
    };
  };
}

async function loadBaseline(dir: string): Promise<Leaseq> {
  const root = isAbsolute(dir) ? dir : resolve(dir);
  // The first path that exists: this layout's, or the flat shared/core/ of checkouts before it.
  const from = (...paths: string[]) => {
    const path = paths.find((p) => existsSync(join(root, p))) ?? paths[0] ?? '';
    return import(pathToFileURL(join(root, path)).href);
  };
  const [cache, metrics, optimistic, processor, registry, jobs, queue] = await Promise.all([
    from('shared/core/pipeline/completed-cache.ts', 'shared/core/completed-cache.ts'),
    from('shared/core/observe/metrics.ts', 'shared/core/metrics.ts'),
    from('shared/core/decisions/optimistic.ts', 'shared/core/optimistic.ts'),
    from('shared/core/pipeline/processor.ts', 'shared/core/processor.ts'),
    from('shared/core/model/registry.ts', 'shared/core/registry.ts'),
    from('shared/jobs/define-job.ts'),
    from('shared/testing/in-memory-queue.ts'),
  ]);
  return {
    CompletedCache: cache.CompletedCache,
    InMemoryMetrics: metrics.InMemoryMetrics,
    versionedPut: optimistic.versionedPut,
    JobProcessor: processor.JobProcessor,
    JobRegistry: registry.JobRegistry,
    defineJob: jobs.defineJob,
    InMemoryQueue: queue.InMemoryQueue,
    backend: await backendOf((path) => from(path), 'ts'),
  };
}

const baseline = BASELINE ? await loadBaseline(BASELINE) : undefined;

/** This checkout's modules as `npm run build` wrote them (JavaScript, no tsx `__name`). */
async function loadBuilt(dir: string): Promise<Leaseq> {
  const root = isAbsolute(dir) ? dir : resolve(dir);
  const from = (path: string) => {
    if (!existsSync(join(root, path))) throw new Error(`BENCH_BUILT: no ${join(root, path)} (npm run build)`);
    return import(pathToFileURL(join(root, path)).href);
  };
  const [cache, metrics, optimistic, processor, registry, jobs, queue] = await Promise.all([
    from('shared/core/pipeline/completed-cache.js'),
    from('shared/core/observe/metrics.js'),
    from('shared/core/decisions/optimistic.js'),
    from('shared/core/pipeline/processor.js'),
    from('shared/core/model/registry.js'),
    from('shared/jobs/define-job.js'),
    from('shared/testing/in-memory-queue.js'),
  ]);
  return {
    CompletedCache: cache.CompletedCache,
    InMemoryMetrics: metrics.InMemoryMetrics,
    versionedPut: optimistic.versionedPut,
    JobProcessor: processor.JobProcessor,
    JobRegistry: registry.JobRegistry,
    defineJob: jobs.defineJob,
    InMemoryQueue: queue.InMemoryQueue,
    backend: await backendOf(async (path) => from(path), 'js'),
  };
}

const built = BUILT ? await loadBuilt(BUILT) : undefined;

/**
 * The same jobs as a producer's own JSON (docs/envelope.md, "Plain bodies"): read by a key path, a fixed
 * type and a payload path, as a Powertools-keyed queue's bodies are. Beside 'leaseq as shipped' it shows
 * what reading a plain body adds per job (the paths' reads; no request).
 */
function plainBodies(run: string): string[] {
  return Array.from({ length: JOBS }, (_, i) =>
    JSON.stringify({ event: 'Credit', order: { id: `${run}-${i}`, account: `a${i % 50}`, amount: 1 } }),
  );
}

function bodies(run: string): string[] {
  return Array.from({ length: JOBS }, (_, i) =>
    JSON.stringify(
      makeEnvelope({
        id: `${run}-${i}`,
        dedupKey: `${run}-${i}`,
        type: 'bench.credit',
        payload: { account: `a${i % 50}`, amount: 1 },
      }),
    ),
  );
}

/** Parse, then one versioned write per job: what any consumer does, with no guarantee at all. */
async function bare(run: string): Promise<void> {
  const ledger = new Map<string, { balance: number; version: number }>();
  for (const body of bodies(run)) {
    const { payload } = JSON.parse(body) as { payload: { account: string; amount: number } };
    const row = ledger.get(payload.account);
    ledger.set(payload.account, {
      balance: (row?.balance ?? 0) + payload.amount,
      version: (row?.version ?? 0) + 1,
    });
    await Promise.resolve();
  }
}

async function withLeaseq(
  run: string,
  shipped: boolean,
  leaseq: Leaseq = HERE,
  fastPath = false,
  plain = false,
  hashOff = false,
): Promise<void> {
  const { InMemoryQueue, defineJob, versionedPut } = leaseq;
  const { JobProcessor, JobRegistry, InMemoryMetrics, CompletedCache } = leaseq;
  const { store, row: ledgerRow } = leaseq.backend();
  const queue = new InMemoryQueue();
  const credit = defineJob({
    type: 'bench.credit',
    ...(fastPath ? { fastPath: true } : {}),
    // 'copy' computes and stores no payload hash: the cost of the payload-mismatch check, paired.
    ...(hashOff ? { onPayloadMismatch: 'copy' as const } : {}),
    payload: z.object({ account: z.string(), amount: z.number().int() }),
    async run(_ctx, p) {
      const row = ledgerRow(p.account);
      return {
        effects: [
          versionedPut({
            tableName: 'ledger',
            key: { account: p.account },
            seenVersion: row?.version,
            item: { balance: (row?.balance ?? 0) + p.amount },
          }),
        ],
      };
    },
  });
  const processor = new JobProcessor({
    store,
    queue,
    registry: plain
      ? JobRegistry.of([credit], {
          plainBodies: { type: 'bench.credit', key: 'order.id', payload: 'order' },
        })
      : JobRegistry.of([credit]),
    worker: 'bench',
    logger: new Logger({ serviceName: 'bench', logLevel: shipped ? 'INFO' : 'SILENT' }),
    ...(shipped ? { metrics: new InMemoryMetrics(), cache: new CompletedCache() } : {}),
  });
  for (const body of plain ? plainBodies(run) : bodies(run)) queue.send(body);
  for (;;) {
    const records = queue.receive(10);
    if (records.length === 0) break;
    for (const record of records) {
      const outcome = await processor.process(record);
      if (outcome.disposition === 'delete') await queue.delete(record.receiptHandle);
    }
  }
}

/** CPU µs per job of one variant's run (user + system), with the logger's output swallowed. */
async function measure(variant: Variant, round: number): Promise<number> {
  const run = `r${round}-${variant.length}`;
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = (() => true) as typeof process.stdout.write;
  const before = process.cpuUsage();
  try {
    if (variant === 'bare') await bare(run);
    else if (variant.startsWith('built')) await withLeaseq(run, true, built, variant === 'built fast path');
    else if (variant.startsWith('baseline')) {
      await withLeaseq(run, variant !== 'baseline, logs off', baseline, variant === 'baseline fast path');
    } else if (variant === 'fast path as shipped') await withLeaseq(run, true, HERE, true);
    else if (variant === 'plain body as shipped') await withLeaseq(run, true, HERE, false, true);
    else if (variant === 'as shipped, hash off') await withLeaseq(run, true, HERE, false, false, true);
    else await withLeaseq(run, variant === 'leaseq as shipped');
  } finally {
    process.stdout.write = write;
  }
  const used = process.cpuUsage(before);
  return (used.user + used.system) / JOBS;
}

/**
 * The body's read alone, µs per body (median of 5 runs of 100,000): what a plain body's paths (and an SNS
 * notification's second JSON.parse) add to the envelope's parse, without the noise of the whole job.
 */
function bodyReads(): string[] {
  const order = { event: 'Credit', order: { id: 'r-1', account: 'a1', amount: 1 } };
  const envelope = JSON.stringify(
    makeEnvelope({ id: 'r-1', dedupKey: 'r-1', type: 'bench.credit', payload: order.order }),
  );
  const plainBody = JSON.stringify(order);
  const sns = JSON.stringify({ Type: 'Notification', MessageId: 'm-1', Message: plainBody });
  const rules = { type: 'bench.credit', key: 'order.id', payload: 'order' } as const;
  const plain = compilePlainBodies(rules, ['bench.credit']);
  const viaSns = compilePlainBodies({ ...rules, unwrap: 'sns' }, ['bench.credit']);
  const isKnownType = (type: string) => type === 'bench.credit';
  const message = { messageId: 'm-1', sentAt: Date.now() };
  const cases: [string, () => unknown][] = [
    ['envelope', () => readJobBody(envelope, { isKnownType }, message)],
    ['envelope, on a queue with plainBodies', () => readJobBody(envelope, { isKnownType, plain }, message)],
    ['plain body (key and payload paths)', () => readJobBody(plainBody, { isKnownType, plain }, message)],
    ['plain body in an SNS notification', () => readJobBody(sns, { isKnownType, plain: viaSns }, message)],
  ];
  const n = 100_000;
  return cases.map(([label, read]) => {
    for (let i = 0; i < 10_000; i++) read();
    const runs = Array.from({ length: 5 }, () => {
      const start = process.hrtime.bigint();
      for (let i = 0; i < n; i++) read();
      return Number(process.hrtime.bigint() - start) / n / 1000;
    });
    return `  ${label.padEnd(40)} ${median(runs).toFixed(2)} µs`;
  });
}

/** This checkout over the baseline, per variant: the median of the rounds' ratios (paired, same round). */
function pairedRatios(results: ReadonlyMap<Variant, number[]>): string[] {
  const pairs = [
    ['logs off', 'leaseq, logs off', 'baseline, logs off'],
    ['as shipped', 'leaseq as shipped', 'baseline as shipped'],
    ['fast path', 'fast path as shipped', 'baseline fast path'],
  ] as const;
  return pairs.map(([label, here, there]) => {
    const mine = results.get(here) ?? [];
    const theirs = results.get(there) ?? [];
    const ratios = mine.map((v, i) => v / (theirs[i] ?? Number.NaN));
    return `this / baseline, ${label}: ${median(ratios).toFixed(3)}x (${BASELINE})`;
  });
}

/** The built package over this checkout's sources under tsx, per variant (paired rounds). */
function builtRatios(results: ReadonlyMap<Variant, number[]>): string[] {
  const pairs = [
    ['as shipped', 'built as shipped', 'leaseq as shipped'],
    ['fast path', 'built fast path', 'fast path as shipped'],
  ] as const;
  return pairs.map(([label, built, source]) => {
    const mine = results.get(built) ?? [];
    const theirs = results.get(source) ?? [];
    const ratios = mine.map((v, i) => v / (theirs[i] ?? Number.NaN));
    return `built / source under tsx, ${label}: ${median(ratios).toFixed(3)}x (${BUILT})`;
  });
}

async function main(): Promise<void> {
  process.stderr.write(
    `bench:cpu: ${JOBS} jobs x ${ROUNDS} rounds x ${VARIANTS.length} variants, interleaved\n`,
  );
  for (const variant of VARIANTS) await measure(variant, -1); // warm-up (JIT)
  const results = new Map<Variant, number[]>(VARIANTS.map((v) => [v, []]));
  for (let round = 0; round < ROUNDS; round++) {
    // Every other round runs them in reverse: no variant always comes after another (a baseline's tree,
    // the hash-off twin: an A/A pair in fixed order differed by 8-16 %).
    const order = round % 2 === 1 ? [VARIANTS[0], ...VARIANTS.slice(1).reverse()] : VARIANTS;
    for (const variant of order) {
      if (variant) results.get(variant)?.push(await measure(variant, round));
    }
    process.stderr.write(`  round ${round + 1}/${ROUNDS} done\n`);
  }
  const bareMedian = median(results.get('bare') ?? []);
  const offMedian = median(results.get('leaseq, logs off') ?? []);
  const rows = VARIANTS.map((variant) => {
    const values = results.get(variant) ?? [];
    const m = median(values);
    const [min, max] = minMax(values);
    return [
      variant,
      m.toFixed(1),
      `${min.toFixed(1)}-${max.toFixed(1)}`,
      formatRatio(m / bareMedian, 1),
      formatRatio(m / offMedian),
    ];
  });
  process.stdout.write(
    [
      '',
      `CPU per job (µs, median of ${ROUNDS}; Node ${process.version}; in-memory stores, no I/O)`,
      renderTable(['variant', 'µs/job', 'min-max', 'vs bare', 'vs logs off'], rows, [
        false,
        true,
        true,
        true,
        true,
      ]),
      '',
      `payload hash on / off, as shipped: ${median(
        (results.get('leaseq as shipped') ?? []).map(
          (v, i) => v / (results.get('as shipped, hash off')?.[i] ?? Number.NaN),
        ),
      ).toFixed(3)}x (paired rounds)`,
      ...(BASELINE ? ['', ...pairedRatios(results)] : []),
      ...(BUILT ? ['', ...builtRatios(results)] : []),
      '',
      'Reading the body alone (µs per body, median of 5 x 100,000):',
      ...bodyReads(),
      '',
    ].join('\n'),
  );
}

await main();
