/**
 * CPU microseconds per job of leaseq's own code, on the in-memory stores (no I/O): the processor as
 * shipped (Powertools logger at INFO, metrics, local cache), the processor with logs off, and a bare loop
 * that only parses the body and applies the effect. Variants run interleaved, several rounds; the table
 * gives medians (min-max) and ratios within the run. Figures, not assertions: these machines are noisy.
 *
 *   npm run bench:cpu            (BENCH_JOBS=2000 BENCH_ROUNDS=7)
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { z } from 'zod';
import { CompletedCache } from '../shared/core/completed-cache.ts';
import { makeEnvelope } from '../shared/core/envelope.ts';
import { InMemoryMetrics } from '../shared/core/metrics.ts';
import { versionedPut } from '../shared/core/optimistic.ts';
import { JobProcessor } from '../shared/core/processor.ts';
import { JobRegistry } from '../shared/core/registry.ts';
import { defineJob } from '../shared/jobs/define-job.ts';
import { InMemoryEffectApplier, InMemoryJobStore } from '../shared/testing/in-memory-job-store.ts';
import { InMemoryQueue } from '../shared/testing/in-memory-queue.ts';
import { formatRatio, median, minMax, renderTable } from './report.ts';

const JOBS = Number(process.env.BENCH_JOBS ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);

type Variant = 'bare' | 'leaseq, logs off' | 'leaseq as shipped';
const VARIANTS: readonly Variant[] = ['bare', 'leaseq, logs off', 'leaseq as shipped'];

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

async function withLeaseq(run: string, shipped: boolean): Promise<void> {
  const ledger = new InMemoryEffectApplier({ tables: { ledger: ['account'] } });
  const store = new InMemoryJobStore({ effects: ledger });
  const queue = new InMemoryQueue();
  const credit = defineJob({
    type: 'bench.credit',
    payload: z.object({ account: z.string(), amount: z.number().int() }),
    async run(_ctx, p) {
      const row = ledger.get('ledger', { account: p.account }) as
        | { balance: number; version: number }
        | undefined;
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
    registry: JobRegistry.of([credit]),
    worker: 'bench',
    logger: new Logger({ serviceName: 'bench', logLevel: shipped ? 'INFO' : 'SILENT' }),
    ...(shipped ? { metrics: new InMemoryMetrics(), cache: new CompletedCache() } : {}),
  });
  for (const body of bodies(run)) queue.send(body);
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
    else await withLeaseq(run, variant === 'leaseq as shipped');
  } finally {
    process.stdout.write = write;
  }
  const used = process.cpuUsage(before);
  return (used.user + used.system) / JOBS;
}

async function main(): Promise<void> {
  process.stderr.write(
    `bench:cpu: ${JOBS} jobs x ${ROUNDS} rounds x ${VARIANTS.length} variants, interleaved\n`,
  );
  for (const variant of VARIANTS) await measure(variant, -1); // warm-up (JIT)
  const results = new Map<Variant, number[]>(VARIANTS.map((v) => [v, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const variant of VARIANTS) results.get(variant)?.push(await measure(variant, round));
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
    ].join('\n'),
  );
}

await main();
