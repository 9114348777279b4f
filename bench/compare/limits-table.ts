// The limits scenario's report (bench/README.md, "Limits: what they cost"): per variant and leaseq
// consumer, each tenant's jobs/s, the cost per job, and what the limit adds per limited job (tenant A's)
// against variant `none` of the same consumer and round.
import { renderTable, type Spread, spread } from '../report.ts';
import type { RunResult } from './run.ts';
import { CONSUMER_LABELS, type ConsumerId, scenarioById } from './scenarios.ts';
import { perJob } from './summary.ts';

/** Requests, units and SQS requests of one run or one difference. */
export interface LimitCost {
  readonly dynamodbRequests: number;
  readonly wru: number;
  readonly rru: number;
  readonly sqsRequests: number;
}

/** One variant x consumer cell (medians over its runs). */
export interface LimitSummary {
  readonly scenario: string;
  readonly consumer: ConsumerId;
  readonly runs: number;
  readonly timedOut: number;
  /** Tenant A (limited in every variant but `none`) and tenant B (never limited). */
  readonly jobsPerSecondA: Spread;
  readonly jobsPerSecondB: Spread;
  /** Per job of the run (both tenants). */
  readonly perJob: LimitCost;
  /** Requests per job of the run, by `Service.Command`. */
  readonly requestsPerJob: Readonly<Record<string, number>>;
  /** What the limit adds per tenant-A job, against `limits-none` of the same consumer and round. */
  readonly addedPerLimitedJob: LimitCost | undefined;
  /** Same, by `Service.Command`. */
  readonly addedRequestsPerLimitedJob: Readonly<Record<string, number>> | undefined;
  /** LimitWait (bounces) per tenant-A job. */
  readonly waitsPerLimitedJob: number;
}

const med = (values: readonly number[]) => spread(values).median;

function cost(run: RunResult): LimitCost {
  const p = perJob(run);
  return { dynamodbRequests: p.dynamodbRequests, wru: p.wru, rru: p.rru, sqsRequests: p.sqsRequests };
}

function requestsPerJob(run: RunResult): Record<string, number> {
  const jobs = Math.max(1, run.uniqueJobs);
  return Object.fromEntries(Object.entries(run.requests).map(([k, v]) => [k, v / jobs]));
}

function limitedJobs(run: RunResult): number {
  return Math.max(1, run.groups?.A?.jobs ?? 0);
}

/** Per tenant-A job: (this run's per-job figure - the baseline's) x jobs / tenant-A jobs. */
function added(run: RunResult, base: RunResult): { cost: LimitCost; requests: Record<string, number> } {
  const scale = Math.max(1, run.uniqueJobs) / limitedJobs(run);
  const a = cost(run);
  const b = cost(base);
  const ra = requestsPerJob(run);
  const rb = requestsPerJob(base);
  const keys = [...new Set([...Object.keys(ra), ...Object.keys(rb)])];
  return {
    cost: {
      dynamodbRequests: (a.dynamodbRequests - b.dynamodbRequests) * scale,
      wru: (a.wru - b.wru) * scale,
      rru: (a.rru - b.rru) * scale,
      sqsRequests: (a.sqsRequests - b.sqsRequests) * scale,
    },
    requests: Object.fromEntries(keys.map((k) => [k, ((ra[k] ?? 0) - (rb[k] ?? 0)) * scale])),
  };
}

function medianCost(list: readonly LimitCost[]): LimitCost {
  return {
    dynamodbRequests: med(list.map((c) => c.dynamodbRequests)),
    wru: med(list.map((c) => c.wru)),
    rru: med(list.map((c) => c.rru)),
    sqsRequests: med(list.map((c) => c.sqsRequests)),
  };
}

function medianOfKeys(maps: readonly Record<string, number>[]): Record<string, number> {
  const keys = [...new Set(maps.flatMap((m) => Object.keys(m)))].sort();
  return Object.fromEntries(keys.map((k) => [k, med(maps.map((m) => m[k] ?? 0))]));
}

/** The limits runs among `results`, summarised per scenario (in `scenarios` order) and consumer. */
export function summarizeLimits(
  results: readonly RunResult[],
  scenarios: readonly string[],
  consumers: readonly ConsumerId[],
): LimitSummary[] {
  const out: LimitSummary[] = [];
  for (const scenario of scenarios) {
    for (const consumer of consumers) {
      const runs = results.filter((r) => r.scenario === scenario && r.consumer === consumer && r.groups);
      if (runs.length === 0) continue;
      const baselines = results.filter((r) => r.scenario === 'limits-none' && r.consumer === consumer);
      const diffs =
        scenario === 'limits-none'
          ? []
          : runs.flatMap((run) => {
              const base = baselines.find((b) => b.repeat === run.repeat) ?? baselines[0];
              return base ? [added(run, base)] : [];
            });
      out.push({
        scenario,
        consumer,
        runs: runs.length,
        timedOut: runs.filter((r) => r.timedOut).length,
        jobsPerSecondA: spread(runs.map((r) => r.groups?.A?.jobsPerSecond ?? Number.NaN)),
        jobsPerSecondB: spread(runs.map((r) => r.groups?.B?.jobsPerSecond ?? Number.NaN)),
        perJob: medianCost(runs.map(cost)),
        requestsPerJob: medianOfKeys(runs.map(requestsPerJob)),
        addedPerLimitedJob: diffs.length > 0 ? medianCost(diffs.map((d) => d.cost)) : undefined,
        addedRequestsPerLimitedJob: diffs.length > 0 ? medianOfKeys(diffs.map((d) => d.requests)) : undefined,
        waitsPerLimitedJob: med(runs.map((r) => (r.stats.LimitWait ?? 0) / limitedJobs(r))),
      });
    }
  }
  return out;
}

const f = (v: number, digits = 2) => (Number.isFinite(v) ? v.toFixed(digits) : '-');
const signed = (v: number, digits = 2) =>
  Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${v.toFixed(digits)}` : '-';
/** `DynamoDB.UpdateItem` -> `UpdateItem`, `SQS.ChangeMessageVisibility` -> `sqs:ChangeVis`: short columns. */
const shortOp = (op: string) =>
  op.startsWith('SQS.')
    ? `sqs:${op.slice(4).replace('Message', '').replace('Visibility', 'Vis')}`
    : op.replace(/^DynamoDB\./, '');

/** The limits report: throughput and cost per variant, then requests per job by operation. */
export function limitsText(
  summaries: readonly LimitSummary[],
  facts: { readonly messages: number; readonly workers: number },
): string {
  if (summaries.length === 0) return '';
  const lines: string[] = [
    '',
    `Limits: what they cost (${facts.messages} messages per run, half tenant A and half tenant B, interleaved`,
    `and all sent at once; ${facts.workers} workers). Tenant B is never limited. "per job" counts both tenants;`,
    `"+ per A job" is what the limit adds per tenant-A job against variant (a) of the same path and round,`,
    'bounces included. Medians over runs.',
    '',
  ];
  const label = (s: LimitSummary) => `${s.scenario.replace(/^limits-/, '')} ${CONSUMER_LABELS[s.consumer]}`;
  const header = [
    'variant, path',
    'A jobs/s',
    'B jobs/s',
    'DDB/job',
    'WRU/job',
    'RRU/job',
    'SQS/job',
    '+DDB/A job',
    '+WRU/A job',
    '+RRU/A job',
    '+SQS/A job',
    'waits/A job',
  ];
  lines.push(
    renderTable(
      header,
      summaries.map((s) => [
        label(s),
        f(s.jobsPerSecondA.median, 1),
        f(s.jobsPerSecondB.median, 1),
        f(s.perJob.dynamodbRequests),
        f(s.perJob.wru),
        f(s.perJob.rru),
        f(s.perJob.sqsRequests, 3),
        s.addedPerLimitedJob ? signed(s.addedPerLimitedJob.dynamodbRequests) : '-',
        s.addedPerLimitedJob ? signed(s.addedPerLimitedJob.wru) : '-',
        s.addedPerLimitedJob ? signed(s.addedPerLimitedJob.rru) : '-',
        s.addedPerLimitedJob ? signed(s.addedPerLimitedJob.sqsRequests, 3) : '-',
        f(s.waitsPerLimitedJob),
      ]),
      header.map((_, i) => i > 0),
    ),
  );
  const ops = [...new Set(summaries.flatMap((s) => Object.keys(s.requestsPerJob)))].sort();
  const opHeader = ['requests per job', ...ops.map(shortOp)];
  lines.push('', 'Requests per job (both tenants) by operation:');
  lines.push(
    renderTable(
      opHeader,
      summaries.map((s) => [label(s), ...ops.map((op) => f(s.requestsPerJob[op] ?? 0))]),
      opHeader.map((_, i) => i > 0),
    ),
  );
  const withAdded = summaries.filter((s) => s.addedRequestsPerLimitedJob);
  if (withAdded.length > 0) {
    const addedHeader = ['added per A job', ...ops.map(shortOp)];
    lines.push('', 'Requests the limit adds per tenant-A job by operation (against variant none):');
    lines.push(
      renderTable(
        addedHeader,
        withAdded.map((s) => [label(s), ...ops.map((op) => signed(s.addedRequestsPerLimitedJob?.[op] ?? 0))]),
        addedHeader.map((_, i) => i > 0),
      ),
    );
  }
  for (const s of summaries) {
    const def = scenarioById(s.scenario);
    if (s.timedOut > 0) lines.push(`  ${label(s)}: ${s.timedOut} run(s) timed out`);
    if (def && s.consumer === summaries[0]?.consumer) lines.push(`  ${s.scenario}: ${def.label}`);
  }
  return `${lines.join('\n')}\n`;
}
