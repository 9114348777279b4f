/**
 * `npm run bench:scale`: the capacity model (docs/scaling.md). A measured pass first (measure.ts: every
 * job kind through the real processor and adapters on the in-memory DynamoDB), then per named workload
 * the units per second on the busiest item and partition of each table and index, SQS in-flight
 * messages, Lambda concurrency and $ per hour at 1,000, 10,000 and 100,000 jobs a second, and the rate at
 * which each quota is reached. No AWS, no emulator.
 *
 *   npm run bench:scale                  (the tables)
 *   npm run bench:scale -- --json FILE   (also the figures and loads as JSON)
 *   npm run bench:scale -- --load        (the load run: load.ts)
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { PRICES } from '../compare/pricing.ts';
import { renderTable } from '../report.ts';
import { type Figures, JOB_KINDS, measure } from './measure.ts';
import { type Load, loadAt, wallRates } from './model.ts';
import { QUOTAS } from './quotas.ts';
import { RATES, WORKLOADS, type Workload } from './workloads.ts';

const n = (x: number, digits = 0) =>
  Number.isFinite(x) ? x.toLocaleString('en-US', { maximumFractionDigits: digits }) : 'never';
const pct = (x: number, of: number) => `${n(x)} (${n((100 * x) / of)} %)`;

/** The measured per-job figures, by kind (what every workload's loads are built from). */
export function figuresTable(f: Figures): string {
  const rows = JOB_KINDS.map((kind) => {
    const k = f.kinds[kind];
    const role = (r: keyof typeof k.roles) => {
      const x = k.roles[r];
      return x ? `${n(x.wru, 2)}${x.rru ? ` +${n(x.rru, 2)} R` : ''}` : '-';
    };
    return [
      kind,
      n(k.requests, 2),
      role('job'),
      role('problems'),
      role('rate'),
      role('slot'),
      role('named'),
      role('app'),
      n(k.queueCalls, 2),
      n(k.deliveries, 2),
    ];
  });
  return renderTable(
    [
      'kind',
      'DDB req',
      'job item',
      'problems idx',
      'rate item',
      'slot',
      'named lease',
      'effect item',
      'queue calls',
      'deliveries',
    ],
    rows,
    [false, true, true, true, true, true, true, true, true, true],
  );
}

function loadRows(loads: readonly Load[], fifo: boolean): string[][] {
  const inFlight = fifo ? QUOTAS.inFlightFifo : QUOTAS.inFlightStandard;
  const row = (label: string, f: (l: Load) => string) => [label, ...loads.map(f)];
  return [
    row('jobs table WRU/s (% of 40,000)', (l) => pct(l.tables.jobs.wru, QUOTAS.tableWru)),
    row('jobs table RRU/s', (l) => n(l.tables.jobs.rru)),
    row('  busiest item WRU (one job)', (l) => n(l.busiest.jobs.wru, 1)),
    row('problems index WRU/s', (l) => n(l.tables.problems.wru)),
    row('  busiest shard WRU/s (% of 1,000)', (l) => pct(l.busiest.problems.wru, QUOTAS.partitionWru)),
    row('leases table WRU/s', (l) => n(l.tables.leases.wru)),
    row('  busiest item WRU/s (% of 1,000)', (l) =>
      l.busiest.leases.wru === 0
        ? '-'
        : `${pct(l.busiest.leases.wru, QUOTAS.partitionWru)} ${l.busiest.leases.what}`,
    ),
    row('effect table WRU/s', (l) => n(l.tables.app.wru)),
    row(`SQS in-flight (% of ${n(inFlight)})`, (l) => pct(l.inFlight, inFlight)),
    row('SQS requests/s', (l) => n(l.sqsRequests)),
    row('Lambda concurrency (% of 1,250)', (l) => pct(l.concurrency, QUOTAS.esmStandard)),
    row('  invocation ms', (l) => n(l.invocationMs, 1)),
    row('$ per hour: DynamoDB + SQS + Lambda', (l) => {
      const d = l.dollarsPerHour;
      return `${n(d.total, 2)} = ${n(d.dynamodb, 2)} + ${n(d.sqs, 2)} + ${n(d.lambda, 2)}`;
    }),
  ];
}

/** One workload's table and its walls, as text. */
export function workloadText(f: Figures, w: Workload): string {
  const loads = RATES.map((rate) => loadAt(f, w, rate));
  const walls = wallRates(f, w);
  const first = walls.find((x) => !x.wall.byDesign);
  // The first one no quota request or setting moves: what the design itself runs into.
  const hard = walls.find((x) => !x.wall.byDesign && !x.wall.movable);
  const lines = [
    `## ${w.id}: ${w.label}`,
    renderTable(['at jobs/s', ...RATES.map((r) => n(r))], loadRows(loads, w.fifo !== undefined), [
      false,
      ...RATES.map(() => true),
    ]),
    `first wall: ${first ? `${first.wall.name} (${first.wall.quota}) at ${n(first.rate)} jobs/s` : 'none below 100,000,000 jobs/s'}`,
    `first wall no quota request moves: ${hard ? `${hard.wall.name} (${hard.wall.quota}) at ${n(hard.rate)} jobs/s` : 'none below 100,000,000 jobs/s'}`,
    'walls, lowest first:',
    ...walls.map(
      ({ wall, rate }) =>
        `  ${n(rate).padStart(12)} jobs/s  ${wall.name} (${wall.quota})${wall.byDesign ? " [the workload's own limit]" : ''}${wall.movable ? ` [moved by: ${wall.movable}]` : ''}`,
    ),
  ];
  return lines.join('\n');
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--load')) {
    const { runLoad } = await import('./load.ts');
    await runLoad(process.argv.slice(2));
    return;
  }
  const { values } = parseArgs({
    options: { json: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(
      'usage: npm run bench:scale [-- --json FILE]\n       npm run bench:scale -- --load [--scenario plain|rate|lease] [--rate N] [--seconds N] [--workers N] [--rate-limit N] [--latency-ms N] [--job-ms N]\n',
    );
    return;
  }
  process.stderr.write('bench:scale: measuring every job kind on the in-memory DynamoDB...\n');
  const figures = await measure();
  const out = [
    `# Capacity model (${new Date().toISOString().slice(0, 10)}; prices ${PRICES.region} on-demand as of ${PRICES.asOf})`,
    '',
    'Measured per job (WRU, +RRU as "R"; the processor and adapters on the in-memory DynamoDB):',
    figuresTable(figures),
    `rate item WRU per take, by grants already in the window (limit ${figures.rate.limit}): ${[
      0, 100, 250, 500, 750, 999,
    ]
      .map((g) => `${g}: ${figures.rate.wruByTake[g] ?? '-'}`)
      .join(', ')}`,
    '',
    ...WORKLOADS.flatMap((w) => [workloadText(figures, w), '']),
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  if (values.json) {
    const loads = WORKLOADS.map((w) => ({ id: w.id, loads: RATES.map((r) => loadAt(figures, w, r)) }));
    writeFileSync(values.json, JSON.stringify({ figures, loads }, null, 2));
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:scale failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
