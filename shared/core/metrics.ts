import type { MetricName } from './statuses.ts';

/**
 * Where leaseq reports metrics. The in-memory sink below counts for tests and the CLI; an EMF sink
 * (Powertools Metrics) implements the same port in AWS.
 */
export interface MetricsSink {
  /** Adds `value` (default 1) to a counter. */
  count(name: MetricName, value?: number, dimensions?: Readonly<Record<string, string>>): void;
  /** Records one observation in milliseconds (durations, lag, latency). */
  observe(name: MetricName, ms: number, dimensions?: Readonly<Record<string, string>>): void;
}

/** A sink that ignores everything. */
export const noMetrics: MetricsSink = {
  count() {},
  observe() {},
};

/** Counts and summaries held in memory; what tests assert on and what local workers print. */
export class InMemoryMetrics implements MetricsSink {
  readonly counters = new Map<string, number>();
  readonly observations = new Map<string, number[]>();

  count(name: MetricName, value = 1, dimensions?: Readonly<Record<string, string>>): void {
    const key = metricKey(name, dimensions);
    this.counters.set(key, (this.counters.get(key) ?? 0) + value);
  }

  observe(name: MetricName, ms: number, dimensions?: Readonly<Record<string, string>>): void {
    const key = metricKey(name, dimensions);
    const list = this.observations.get(key) ?? [];
    list.push(ms);
    this.observations.set(key, list);
  }

  /** The counter's value (0 when never counted). */
  get(name: MetricName, dimensions?: Readonly<Record<string, string>>): number {
    return this.counters.get(metricKey(name, dimensions)) ?? 0;
  }

  snapshot(): Record<string, number> {
    return Object.fromEntries(this.counters);
  }
}

function metricKey(name: string, dimensions?: Readonly<Record<string, string>>): string {
  if (!dimensions) return name;
  const parts = Object.entries(dimensions)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`);
  return parts.length === 0 ? name : `${name}{${parts.join(',')}}`;
}
