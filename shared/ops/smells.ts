import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MetricName } from '../core/observe/metric-names.ts';
import { mergeSummaries, quantile, type Summary } from '../core/observe/metrics.ts';
import type { PoolMetricsFile, PoolTarget } from '../runner/worker-pool.ts';

/** Where local worker pools keep their metrics files (`leaseq workers`, the demo). */
export function poolMetricsDir(projectDir: string = process.cwd()): string {
  return join(projectDir, '.leaseq', 'metrics');
}

/** Thresholds of the three smells; crossing one prints a warning. */
export const SMELL_THRESHOLDS = {
  /** Receives per attempt above this: messages ping-pong (come back without being worked on). */
  receivesPerAttempt: 3,
  /** Busiest over least busy live worker above this (with enough jobs to tell): starvation. */
  workerSkew: 3,
  /** Jobs a pool must have committed before skew means anything. */
  skewMinJobs: 50,
  /** A store call kind whose p99 is above this (ms) is slow. */
  storeP99Ms: 1000,
  /** Share of a call kind's calls abandoned at their bound above this. */
  storeTimeoutShare: 0.01,
} as const;

export interface StoreLatencySmell {
  readonly operation: string;
  readonly calls: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly timeouts: number;
  readonly timeoutShare: number;
  readonly warning?: string;
}

export interface OperationalSmells {
  /** Live pools whose metrics were read. */
  readonly pools: number;
  readonly pingPong: {
    readonly receives: number;
    readonly attempts: number;
    readonly receivesPerAttempt: number;
    readonly handBacks: number;
    readonly warning?: string;
  };
  readonly starvation: {
    readonly jobsPerWorker: Readonly<Record<string, number>>;
    readonly skew: number;
    readonly warning?: string;
  };
  readonly storeLatency: readonly StoreLatencySmell[];
}

/** The metrics files of pools updated within `freshMs` (older ones are from pools that are gone). */
export function readPoolMetrics(dir: string, now = Date.now(), freshMs = 30_000): PoolMetricsFile[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
  const files: PoolMetricsFile[] = [];
  for (const name of names) {
    try {
      const file = JSON.parse(readFileSync(join(dir, name), 'utf8')) as PoolMetricsFile;
      if (now - file.updatedAt <= freshMs) files.push(file);
    } catch {
      // half-written or foreign: skip
    }
  }
  return files;
}

/**
 * The pools among `files` that work on `target`'s queue at its endpoint: a status of one deployment shows
 * the figures of its own local workers only, not those of pools on another queue or emulator.
 */
export function poolsOf(files: readonly PoolMetricsFile[], target: PoolTarget): PoolMetricsFile[] {
  const origin = (endpoint: string | null) => {
    if (endpoint === null) return null;
    try {
      return new URL(endpoint).origin;
    } catch {
      return endpoint;
    }
  };
  return files.filter(
    (f) =>
      f.target !== undefined &&
      f.target.queueArn === target.queueArn &&
      origin(f.target.endpoint) === origin(target.endpoint),
  );
}

/**
 * The seed's three smells from local pools' metrics: ping-pong (receives per attempt, hand-backs),
 * worker starvation (jobs committed per live worker, busiest over least busy), and store latency (p50
 * and p99 per call kind, the share abandoned at its bound). Undefined when no pool reported.
 */
export function operationalSmells(files: readonly PoolMetricsFile[]): OperationalSmells | undefined {
  if (files.length === 0) return undefined;
  const workers = files.flatMap((f) => f.workers);
  const total = (name: string) => workers.reduce((n, w) => n + (w.counters[name] ?? 0), 0);
  const receives = total(MetricName.MessageReceived);
  const attempts = total(MetricName.JobClaimed);
  const receivesPerAttempt = attempts > 0 ? receives / attempts : 0;
  const handBacks = total(MetricName.HandBack);

  const jobsPerWorker = Object.fromEntries(
    workers.filter((w) => w.alive).map((w) => [w.id, w.counters[MetricName.JobSucceeded] ?? 0]),
  );
  const counts = Object.values(jobsPerWorker);
  const committed = counts.reduce((a, b) => a + b, 0);
  const skew = counts.length >= 2 ? Math.max(...counts) / Math.max(1, Math.min(...counts)) : 1;

  const byOperation = new Map<string, Summary[]>();
  for (const w of workers) {
    for (const [key, summary] of Object.entries(w.observations)) {
      const op = /^StoreLatency\{operation=([^}]+)\}$/.exec(key)?.[1];
      if (op) byOperation.set(op, [...(byOperation.get(op) ?? []), summary]);
    }
  }
  const storeLatency = [...byOperation].map(([operation, summaries]): StoreLatencySmell => {
    const merged = mergeSummaries(summaries);
    const timeouts = workers.reduce(
      (n, w) => n + (w.counters[`StoreTimeout{operation=${operation}}`] ?? 0),
      0,
    );
    const p99 = quantile(merged, 0.99);
    const share = merged.count > 0 ? timeouts / merged.count : 0;
    const slow = p99 > SMELL_THRESHOLDS.storeP99Ms || share > SMELL_THRESHOLDS.storeTimeoutShare;
    return {
      operation,
      calls: merged.count,
      p50Ms: quantile(merged, 0.5),
      p99Ms: p99,
      timeouts,
      timeoutShare: share,
      ...(slow
        ? {
            warning: `the store is slow for ${operation}: p99 up to ${p99} ms, ${(share * 100).toFixed(1)} % of calls abandoned at the lease's bound`,
          }
        : {}),
    };
  });
  return {
    pools: files.length,
    pingPong: {
      receives,
      attempts,
      receivesPerAttempt,
      handBacks,
      ...(receivesPerAttempt > SMELL_THRESHOLDS.receivesPerAttempt
        ? {
            warning: `messages ping-pong: ${receivesPerAttempt.toFixed(1)} receives per attempt (${handBacks} given back without running); check the visibility against the lease and for FIFO groups stuck behind a failing head`,
          }
        : {}),
    },
    starvation: {
      jobsPerWorker,
      skew,
      ...(committed >= SMELL_THRESHOLDS.skewMinJobs && skew > SMELL_THRESHOLDS.workerSkew
        ? {
            warning: `workers are starved: the busiest committed ${skew.toFixed(1)}x the jobs of the least busy; check batch sizes and long jobs holding a worker`,
          }
        : {}),
    },
    storeLatency: storeLatency.sort((a, b) => a.operation.localeCompare(b.operation)),
  };
}
