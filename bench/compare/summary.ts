import { percentile, type Spread, spread } from '../report.ts';
import { designOf, floorJobsPerSlot, latencyModel } from './latency-model.ts';
import { type CostSplit, costPerMillionJobs, costSplit } from './pricing.ts';
import type { RunResult } from './run.ts';
import { type ConsumerId, scenarioById } from './scenarios.ts';

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
  /** DynamoDB + SQS only. */
  readonly costPerMillionJobs: Spread;
  /** Lambda ms billed per unique job (the handler's time per batch, summed, over the unique jobs). */
  readonly lambdaMsPerJob: Spread;
  /** Invocations (batches) per unique job. */
  readonly invocationsPerJob: Spread;
  /** $ per million unique jobs by service (Lambda, DynamoDB, SQS) and in total, medians over runs. */
  readonly cost: { readonly [K in keyof CostSplit]: Spread };
  /** Messages per second of handler time: what one worker slot (one Lambda instance) does. */
  readonly jobsPerSlot: Spread;
  /** In-run ratio of {@link jobsPerSlot} against Powertools'. */
  readonly slotVsPowertools: Spread;
  /** Records per batch, median over runs. */
  readonly batchSize: number;
  /** Sequential DynamoDB round trips of a unique job by design (latency-model.ts). */
  readonly roundTrips: number;
  /** The most jobs/s per slot the design's round trips allow under the scenario's latency model. */
  readonly floorJobsPerSlot: number | undefined;
  /**
   * Under a latency model: the emulator's mean time per call against the mean draw, and the share of
   * calls it outlasted its draw (medians over runs): where the gap to the floor comes from.
   */
  readonly emulator:
    | { readonly msPerCall: number; readonly drawnPerCall: number; readonly overDraw: number }
    | undefined;
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

function ratios(
  runs: readonly RunResult[],
  all: readonly RunResult[],
  other: ConsumerId,
  of: (r: RunResult) => number = (r) => r.jobsPerSecond,
): number[] {
  const out: number[] = [];
  for (const run of runs) {
    const peer = all.find(
      (r) => r.scenario === run.scenario && r.repeat === run.repeat && r.consumer === other,
    );
    if (peer && of(peer) > 0) out.push(of(run) / of(peer));
  }
  return out;
}

/** Messages per second of handler time (one slot handles one batch at a time). */
export function jobsPerSlot(run: RunResult): number {
  return run.lambda.handlerMs > 0 ? (run.messages * 1000) / run.lambda.handlerMs : Number.NaN;
}

/** Lambda's billed ms and invocations per unique job of a run. */
function lambdaPerJob(run: RunResult): { billedMs: number; invocations: number } {
  const jobs = Math.max(1, run.uniqueJobs);
  return { billedMs: run.lambda.billedMs / jobs, invocations: run.lambda.invocations / jobs };
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
      const costs = runs.map((r, i) => costSplit(per[i] as ReturnType<typeof perJob>, lambdaPerJob(r)));
      const batchSize = spread(
        runs.map((r) => (r.lambda.invocations > 0 ? r.messages / r.lambda.invocations : Number.NaN)),
      ).median;
      const scenarioSpec = scenarioById(scenario);
      const design = designOf(consumer, scenarioSpec?.shape ?? 'effect');
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
        lambdaMsPerJob: spread(runs.map((r) => lambdaPerJob(r).billedMs)),
        invocationsPerJob: spread(runs.map((r) => lambdaPerJob(r).invocations)),
        cost: {
          lambda: spread(costs.map((c) => c.lambda)),
          dynamodb: spread(costs.map((c) => c.dynamodb)),
          sqs: spread(costs.map((c) => c.sqs)),
          total: spread(costs.map((c) => c.total)),
        },
        jobsPerSlot: spread(runs.map(jobsPerSlot)),
        slotVsPowertools: spread(ratios(runs, results, 'powertools', jobsPerSlot)),
        batchSize,
        roundTrips: design.length,
        emulator: runs.some((r) => r.latencyTally)
          ? {
              msPerCall: spread(
                runs.map((r) => (r.latencyTally?.emulatorMs ?? 0) / Math.max(1, r.latencyTally?.calls ?? 0)),
              ).median,
              drawnPerCall: spread(
                runs.map((r) => (r.latencyTally?.drawnMs ?? 0) / Math.max(1, r.latencyTally?.calls ?? 0)),
              ).median,
              overDraw: spread(
                runs.map((r) => (r.latencyTally?.overDraw ?? 0) / Math.max(1, r.latencyTally?.calls ?? 0)),
              ).median,
            }
          : undefined,
        floorJobsPerSlot:
          scenarioSpec?.latency && Number.isFinite(batchSize)
            ? floorJobsPerSlot(latencyModel(scenarioSpec.latency), design, batchSize)
            : undefined,
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
  // A fast-path job with an outside effect may repeat it for a copy (checks.ts): its cells are apart.
  const leaseq = summaries.filter(
    (s) =>
      s.consumer === 'leased' || (s.consumer === 'fast' && scenarioById(s.scenario)?.shape !== 'no-effect'),
  );
  const doubles = leaseq.reduce((n, s) => n + s.doubleEffects.total, 0);
  const sqs = leaseq.filter((s) => s.scenario === baseline).map((s) => s.sqsRequestsPerJob.median);
  const latency = latencyTargets(summaries);
  const cost = costTargets(summaries);
  return [
    ...latency,
    ...cost,
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

/**
 * The latency model's targets: every consumer within 15 % of the floor its round trips allow, and the
 * fast path >= 1.2x, leased >= 0.8x Powertools' jobs/s per worker slot; the same ratios in the
 * sensitivity scenarios (a 2-item transaction at 2x and 3x a write).
 */
function latencyTargets(summaries: readonly ConsumerSummary[]): TargetCheck[] {
  const out: TargetCheck[] = [];
  const find = (consumer: ConsumerId, scenario: string) =>
    summaries.find((s) => s.consumer === consumer && s.scenario === scenario);
  for (const s of summaries.filter((x) => x.scenario === 'aws' && x.floorJobsPerSlot !== undefined)) {
    const floor = s.floorJobsPerSlot ?? Number.NaN;
    const share = s.jobsPerSlot.median / floor;
    out.push({
      target: `aws: ${s.consumer} within 15 % of its floor (${fmt(floor, 0)} jobs/s per slot, ${s.roundTrips} round trip${s.roundTrips === 1 ? '' : 's'})`,
      measured: `${fmt(s.jobsPerSlot.median, 0)} (${fmt(share * 100, 0)} %)`,
      met: Number.isFinite(share) ? share >= 0.85 : undefined,
    });
  }
  for (const scenario of ['aws', 'aws-tx2x', 'aws-tx3x']) {
    for (const [consumer, min] of [
      ['fast', 1.2],
      ['leased', 0.8],
    ] as const) {
      const value = find(consumer, scenario)?.slotVsPowertools.median ?? Number.NaN;
      if (!find(consumer, scenario)) continue;
      out.push({
        target: `${scenario}: ${consumer} >= ${min}x Powertools' jobs/s per worker slot`,
        measured: Number.isFinite(value) ? `${fmt(value)}x` : '-',
        met: Number.isFinite(value) ? value >= min : undefined,
      });
    }
  }
  return out;
}

/**
 * Cost targets: a job with no DynamoDB effects costs leased <= 1.0x and fast <= 0.6x Powertools' total
 * $ per million (under the latency model, where Lambda's time is realistic); and the fast path is never
 * dearer than the leased one in DynamoDB capacity at any duplicate rate measured.
 */
function costTargets(summaries: readonly ConsumerSummary[]): TargetCheck[] {
  const out: TargetCheck[] = [];
  const find = (consumer: ConsumerId, scenario: string) =>
    summaries.find((s) => s.consumer === consumer && s.scenario === scenario);
  for (const scenario of ['aws-noeffect', 'noeffect']) {
    const pt = find('powertools', scenario)?.cost.total.median;
    if (pt === undefined) continue;
    for (const [consumer, max] of [
      ['leased', 1.0],
      ['fast', 0.6],
    ] as const) {
      const mine = find(consumer, scenario)?.cost.total.median;
      if (mine === undefined) continue;
      out.push({
        target: `${scenario}: ${consumer} total $/M <= ${max}x Powertools'`,
        measured: `${fmt(mine / pt)}x ($${fmt(mine)} vs $${fmt(pt)})`,
        met: mine / pt <= max,
      });
    }
  }
  for (const scenario of ['dup0', 'dup10', 'dup50']) {
    const fast = find('fast', scenario);
    const leased = find('leased', scenario);
    if (!fast || !leased) continue;
    const dollars = (s: ConsumerSummary) => s.cost.dynamodb.median;
    out.push({
      target: `${scenario}: fast path WRU per unique job at the floor (4) and its DynamoDB $ <= leased's (floor 5)`,
      measured: `fast ${fmt(fast.wruPerJob.median)} WRU + ${fmt(fast.rruPerJob.median)} RRU ($${fmt(dollars(fast))}), leased ${fmt(leased.wruPerJob.median)} WRU ($${fmt(dollars(leased))})`,
      met: fast.wruPerJob.median <= 4 + 1e-9 && dollars(fast) <= dollars(leased),
    });
  }
  return out;
}
