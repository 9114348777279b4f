import { percentile, type Spread, spread } from '../report.ts';
import { costPerMillionJobs } from './pricing.ts';
import type { RunResult } from './run.ts';
import type { ConsumerId } from './scenarios.ts';

/** What the runs of one consumer in one scenario add up to (medians over runs, with min-max). */
export interface ConsumerSummary {
  readonly consumer: ConsumerId;
  readonly scenario: string;
  readonly workers: number;
  readonly runs: number;
  readonly timedOut: number;
  readonly jobsPerSecond: Spread;
  /** This consumer's throughput over the bare consumer's in the same round. */
  readonly vsBare: Spread;
  /** ... and over Powertools' in the same round. */
  readonly vsPowertools: Spread;
  /** Per-run enqueue-to-effect percentiles (ms). */
  readonly latencyMs: { readonly p50: Spread; readonly p95: Spread; readonly p99: Spread };
  /** Worker requests per unique job, by `Service.Command` (median over runs). */
  readonly requestsPerJob: Readonly<Record<string, number>>;
  readonly sqsRequestsPerJob: Spread;
  readonly dynamodbRequestsPerJob: Spread;
  readonly wruPerJob: Spread;
  readonly rruPerJob: Spread;
  readonly costPerMillionJobs: Spread;
  /** Effects beyond one per job, summed over the runs, and per run. */
  readonly doubleEffects: { readonly total: number; readonly perRun: readonly number[] };
  /** Double effects per 1,000 unique jobs, per run. */
  readonly doublesPerThousandJobs: Spread;
  readonly missingEffects: number;
  readonly kills: { readonly planned: number; readonly happened: number };
  readonly deadLetters: number;
  /** The consumer's own counters, summed over runs. */
  readonly stats: Readonly<Record<string, number>>;
  /** How the WRU/RRU were obtained: requests that reported capacity, refused writes computed. */
  readonly capacitySource: {
    readonly reportedRequests: number;
    readonly computedRequests: number;
    readonly computedWru: number;
  };
}

/** Per unique job figures of one run. */
export function perJob(run: RunResult): {
  wru: number;
  rru: number;
  sqsRequests: number;
  dynamodbRequests: number;
} {
  const jobs = Math.max(1, run.uniqueJobs);
  const count = (service: string) =>
    Object.entries(run.requests)
      .filter(([k]) => k.startsWith(`${service}.`))
      .reduce((n, [, v]) => n + v, 0);
  return {
    wru: run.capacity.wru / jobs,
    rru: run.capacity.rru / jobs,
    sqsRequests: count('SQS') / jobs,
    dynamodbRequests: count('DynamoDB') / jobs,
  };
}

function ratios(runs: readonly RunResult[], all: readonly RunResult[], other: ConsumerId): number[] {
  const out: number[] = [];
  for (const run of runs) {
    const peer = all.find(
      (r) => r.scenario === run.scenario && r.repeat === run.repeat && r.consumer === other,
    );
    if (peer && peer.jobsPerSecond > 0) out.push(run.jobsPerSecond / peer.jobsPerSecond);
  }
  return out;
}

function medianOfKeys(maps: readonly Record<string, number>[]): Record<string, number> {
  const keys = [...new Set(maps.flatMap((m) => Object.keys(m)))].sort();
  return Object.fromEntries(keys.map((k) => [k, spread(maps.map((m) => m[k] ?? 0)).median]));
}

/** Summaries of every (scenario, consumer) pair that has runs, in the order given. */
export function summarize(
  results: readonly RunResult[],
  scenarios: readonly string[],
  consumers: readonly ConsumerId[],
): ConsumerSummary[] {
  const out: ConsumerSummary[] = [];
  for (const scenario of scenarios) {
    for (const consumer of consumers) {
      const runs = results.filter((r) => r.scenario === scenario && r.consumer === consumer);
      if (runs.length === 0) continue;
      const per = runs.map(perJob);
      const stats: Record<string, number> = {};
      for (const run of runs) for (const [k, v] of Object.entries(run.stats)) stats[k] = (stats[k] ?? 0) + v;
      out.push({
        consumer,
        scenario,
        workers: runs[0]?.workers ?? 0,
        runs: runs.length,
        timedOut: runs.filter((r) => r.timedOut).length,
        jobsPerSecond: spread(runs.map((r) => r.jobsPerSecond)),
        vsBare: spread(ratios(runs, results, 'bare')),
        vsPowertools: spread(ratios(runs, results, 'powertools')),
        latencyMs: {
          p50: spread(runs.map((r) => percentile(r.latencyMs, 50))),
          p95: spread(runs.map((r) => percentile(r.latencyMs, 95))),
          p99: spread(runs.map((r) => percentile(r.latencyMs, 99))),
        },
        requestsPerJob: medianOfKeys(
          runs.map((r) =>
            Object.fromEntries(
              Object.entries(r.requests).map(([k, v]) => [k, v / Math.max(1, r.uniqueJobs)]),
            ),
          ),
        ),
        sqsRequestsPerJob: spread(per.map((p) => p.sqsRequests)),
        dynamodbRequestsPerJob: spread(per.map((p) => p.dynamodbRequests)),
        wruPerJob: spread(per.map((p) => p.wru)),
        rruPerJob: spread(per.map((p) => p.rru)),
        costPerMillionJobs: spread(per.map((p) => costPerMillionJobs(p))),
        doubleEffects: {
          total: runs.reduce((n, r) => n + r.effects.doubles, 0),
          perRun: runs.map((r) => r.effects.doubles),
        },
        doublesPerThousandJobs: spread(
          runs.map((r) => (1000 * r.effects.doubles) / Math.max(1, r.uniqueJobs)),
        ),
        missingEffects: runs.reduce((n, r) => n + r.effects.missing, 0),
        kills: {
          planned: runs.reduce((n, r) => n + r.kills.planned, 0),
          happened: runs.reduce((n, r) => n + r.kills.happened, 0),
        },
        deadLetters: runs.reduce((n, r) => n + r.deadLetters, 0),
        stats,
        capacitySource: {
          reportedRequests: runs.reduce((n, r) => n + r.capacity.reportedRequests, 0),
          computedRequests: runs.reduce((n, r) => n + r.capacity.computedRequests, 0),
          computedWru: runs.reduce((n, r) => n + r.capacity.computedWru, 0),
        },
      });
    }
  }
  return out;
}

/** One target of the benchmark issue, measured (reported beside the figures, never asserted). */
export interface TargetCheck {
  readonly target: string;
  readonly measured: string;
  /** `undefined` when the runs needed were not part of this session. */
  readonly met: boolean | undefined;
}

const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : '-');

/** The targets against the summaries. */
export function checkTargets(
  summaries: readonly ConsumerSummary[],
  baseline = 'dup10',
  floor = 'dup0',
): TargetCheck[] {
  const find = (consumer: ConsumerId, scenario: string) =>
    summaries.find((s) => s.consumer === consumer && s.scenario === scenario);
  const ratio = (consumer: ConsumerId, versus: 'vsBare' | 'vsPowertools', min: number, label: string) => {
    const s = find(consumer, baseline);
    const value = s?.[versus].median ?? Number.NaN;
    return {
      target: `${label} (${baseline}, in-run ratio)`,
      measured: Number.isFinite(value) ? `${fmt(value)}x` : '-',
      met: Number.isFinite(value) ? value >= min : undefined,
    };
  };
  const wru = (consumer: ConsumerId, floorWru: number, label: string) => {
    const s = find(consumer, floor);
    const value = s?.wruPerJob.median ?? Number.NaN;
    return {
      target: `${label} WRU per unique job at the floor, ${floorWru} (${floor})`,
      measured: fmt(value),
      met: Number.isFinite(value) ? value <= floorWru + 1e-9 : undefined,
    };
  };
  const leaseq = summaries.filter((s) => s.consumer === 'leased' || s.consumer === 'fast');
  const doubles = leaseq.reduce((n, s) => n + s.doubleEffects.total, 0);
  const sqs = leaseq.filter((s) => s.scenario === baseline).map((s) => s.sqsRequestsPerJob.median);
  return [
    ratio('fast', 'vsPowertools', 1.2, 'leaseq fast path >= 1.2x Powertools'),
    ratio('fast', 'vsBare', 0.6, 'leaseq fast path >= 0.6x bare'),
    ratio('leased', 'vsPowertools', 1.0, 'leaseq leased >= 1.0x Powertools'),
    wru('fast', 4, 'leaseq fast path'),
    wru('leased', 5, 'leaseq leased'),
    {
      target: `0 double effects for leaseq in every scenario (${leaseq.length} consumer x scenario cells)`,
      measured: String(doubles),
      met: leaseq.length > 0 ? doubles === 0 : undefined,
    },
    {
      target: `<= 0.25 SQS requests per job for leaseq (${baseline})`,
      measured: sqs.length > 0 ? sqs.map((v) => fmt(v)).join(' / ') : '-',
      met: sqs.length > 0 ? sqs.every((v) => v <= 0.25) : undefined,
    },
  ];
}
