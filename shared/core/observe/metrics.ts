import type { MetricName } from './metric-names.ts';

/**
 * Where leaseq reports metrics. The in-memory sink below counts for tests and the CLI; an EMF sink
 * (Powertools Metrics, `shared/worker/emf-metrics.ts`) implements the same port in AWS.
 *
 * Dimensions are breakdowns (`jobType`, the registry's small fixed set; `worker` for local pools);
 * never put dedup keys or payload data in them.
 */
export interface MetricsSink {
  /** Adds `value` (default 1) to a counter. */
  count(name: MetricName, value?: number, dimensions?: Readonly<Record<string, string>>): void;
  /** Records one observation in milliseconds (durations, lag, latency). */
  observe(name: MetricName, ms: number, dimensions?: Readonly<Record<string, string>>): void;
  /** Emits what a buffering sink holds; the worker handler calls it at the end of every invocation. */
  flush?(): void;
}

/** A sink that ignores everything. */
export const noMetrics: MetricsSink = {
  count() {},
  observe() {},
};

/** Upper bounds (ms) of the histogram buckets of a {@link Summary}; the last bucket is unbounded. */
export const SUMMARY_BUCKETS_MS = [
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 30_000,
] as const;

/** Count, sum, extremes and a histogram of observations: bounded memory however long a worker lives. */
export interface Summary {
  count: number;
  sum: number;
  min: number;
  max: number;
  /** Observations per bucket of {@link SUMMARY_BUCKETS_MS} (one more for above the last bound). */
  buckets: number[];
}

/**
 * The `q` quantile (0..1) of a summary from its histogram: the upper bound of the bucket it falls in,
 * capped by the largest observation (an estimate, good to a bucket).
 */
export function quantile(summary: Summary, q: number): number {
  const target = Math.max(1, Math.ceil(summary.count * q));
  let seen = 0;
  for (const [i, n] of summary.buckets.entries()) {
    seen += n;
    if (seen >= target) return Math.min(SUMMARY_BUCKETS_MS[i] ?? summary.max, summary.max);
  }
  return summary.max;
}

/** One summary of the observations of several (their histograms added bucket by bucket). */
export function mergeSummaries(summaries: readonly Summary[]): Summary {
  const buckets: number[] = [];
  for (const s of summaries) {
    for (const [i, n] of (s.buckets ?? []).entries()) buckets[i] = (buckets[i] ?? 0) + n;
  }
  return {
    count: summaries.reduce((n, s) => n + s.count, 0),
    sum: summaries.reduce((n, s) => n + s.sum, 0),
    min: Math.min(...summaries.map((s) => s.min)),
    max: Math.max(...summaries.map((s) => s.max)),
    buckets,
  };
}

/**
 * Counts and summaries held in memory; what tests assert on and what local workers report. The bare
 * name always holds the total over every dimension (`get('JobSucceeded')`); a dimensioned call also
 * counts under its own key (`JobSucceeded{jobType=ledger.transfer}`), a breakdown of that total.
 */
export class InMemoryMetrics implements MetricsSink {
  readonly counters = new Map<string, number>();
  readonly observations = new Map<string, Summary>();

  count(name: MetricName, value = 1, dimensions?: Readonly<Record<string, string>>): void {
    this.#add(name, value);
    const key = metricKey(name, dimensions);
    if (key !== name) this.#add(key, value);
  }

  observe(name: MetricName, ms: number, dimensions?: Readonly<Record<string, string>>): void {
    this.#observe(name, ms);
    const key = metricKey(name, dimensions);
    if (key !== name) this.#observe(key, ms);
  }

  #add(key: string, value: number): void {
    this.counters.set(key, (this.counters.get(key) ?? 0) + value);
  }

  #observe(key: string, ms: number): void {
    let s = this.observations.get(key);
    if (!s) {
      s = {
        count: 0,
        sum: 0,
        min: ms,
        max: ms,
        buckets: new Array<number>(SUMMARY_BUCKETS_MS.length + 1).fill(0),
      };
      this.observations.set(key, s);
    }
    s.count += 1;
    s.sum += ms;
    s.min = Math.min(s.min, ms);
    s.max = Math.max(s.max, ms);
    let index = 0;
    while (index < SUMMARY_BUCKETS_MS.length && !(ms <= (SUMMARY_BUCKETS_MS[index] as number))) index++;
    s.buckets[index] = (s.buckets[index] ?? 0) + 1;
  }

  /** The counter's value (0 when never counted). */
  get(name: MetricName, dimensions?: Readonly<Record<string, string>>): number {
    return this.counters.get(metricKey(name, dimensions)) ?? 0;
  }

  /** Counters and observation summaries, JSON-safe (what a worker process reports to its parent). */
  snapshot(): MetricsSnapshot {
    return {
      counters: Object.fromEntries(this.counters),
      observations: Object.fromEntries(
        [...this.observations].map(([k, v]) => [k, { ...v, buckets: [...v.buckets] }]),
      ),
    };
  }
}

export interface MetricsSnapshot {
  readonly counters: Record<string, number>;
  readonly observations: Record<string, Summary>;
}

/**
 * `name`, or `name{k1=v1,k2=v2}` with the dimensions sorted by key (localeCompare). Called on every
 * count: no entries array, no sort for the usual single dimension.
 */
export function metricKey(name: string, dimensions?: Readonly<Record<string, string>>): string {
  if (!dimensions) return name;
  // A frozen set of dimensions (byType's, one per job type) cannot change: its keys are built once.
  if (!Object.isFrozen(dimensions)) return buildMetricKey(name, dimensions);
  let keys = FROZEN_KEYS.get(dimensions);
  if (keys === undefined) {
    keys = new Map();
    FROZEN_KEYS.set(dimensions, keys);
  }
  let key = keys.get(name);
  if (key === undefined) {
    key = buildMetricKey(name, dimensions);
    keys.set(name, key);
  }
  return key;
}

const FROZEN_KEYS = new WeakMap<Readonly<Record<string, string>>, Map<string, string>>();

function buildMetricKey(name: string, dimensions: Readonly<Record<string, string>>): string {
  const keys = Object.keys(dimensions);
  if (keys.length === 0) return name;
  if (keys.length > 1) keys.sort((a, b) => a.localeCompare(b));
  let key = `${name}{`;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i] as string;
    key += `${i === 0 ? '' : ','}${k}=${dimensions[k]}`;
  }
  return `${key}}`;
}
