import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { MetricName } from '../core/observe/metric-names.ts';
import type { MetricsSink } from '../core/observe/metrics.ts';

/**
 * The only dimensions that reach CloudWatch (`operation`: a job-store call kind, a fixed set of eight;
 * `itemKind`: the kind of leaseq item DynamoDB throttled, job, lease, rate, slot or effect).
 * Everything else a caller passes (`worker`, and anything
 * that could carry a dedup key) is dropped: each distinct value set is a CloudWatch metric, billed, so
 * dimensions must come from small fixed vocabularies.
 */
export const EMF_DIMENSIONS = ['jobType', 'outcome', 'operation', 'itemKind'] as const;
export type EmfDimension = (typeof EMF_DIMENSIONS)[number];

/** Value used in place of a dimension value outside its declared vocabulary. */
export const OTHER_DIMENSION_VALUE = 'other';

/**
 * Powertools publishes by itself when one metric reaches 100 values (and clears the dimensions); we
 * chunk below that so every publish is ours and carries its dimensions.
 */
const MAX_VALUES_PER_BLOB = 99;

export interface EmfMetricsOptions {
  /** CloudWatch namespace. @default env.POWERTOOLS_METRICS_NAMESPACE (the stack sets 'leaseq'), else 'leaseq' */
  readonly namespace?: string;
  /** The `service` dimension of every metric. @default env.POWERTOOLS_SERVICE_NAME, else 'leaseq' */
  readonly serviceName?: string;
  /** @default process.env */
  readonly env?: NodeJS.ProcessEnv;
  /**
   * Allowed values per dimension (the handler passes the registry's job types). A value outside its list
   * is reported as `other`; a dimension with no list keeps its values as given.
   */
  readonly values?: Partial<Record<EmfDimension, readonly string[]>>;
  /** The Powertools instance to emit through (tests). @default a new Metrics with the namespace and service */
  readonly metrics?: Metrics;
}

interface Group {
  readonly dimensions: Readonly<Record<string, string>>;
  readonly counts: Map<string, number>;
  readonly observations: Map<string, number[]>;
}

/**
 * {@link MetricsSink} on Powertools Metrics: CloudWatch Embedded Metric Format on stdout, which the
 * Lambda runtime ships to CloudWatch. Counts are summed in memory and emitted as one `Count` value
 * per metric; observations are emitted as `Milliseconds` values. Nothing is written until
 * {@link EmfMetrics.flush}, which the worker handler calls once at the end of every invocation (also
 * when the batch throws): one EMF blob per dimension set used in the invocation. A dimensioned blob
 * declares both `[service, …dimensions]` and `[service]`, so CloudWatch keeps a total next to the
 * breakdown from the same values.
 */
export class EmfMetrics implements MetricsSink {
  readonly #metrics: Metrics;
  readonly #values: Partial<Record<EmfDimension, ReadonlySet<string>>>;
  readonly #groups = new Map<string, Group>();

  constructor(options: EmfMetricsOptions = {}) {
    const env = options.env ?? process.env;
    this.#metrics =
      options.metrics ??
      new Metrics({
        namespace: options.namespace ?? env.POWERTOOLS_METRICS_NAMESPACE ?? 'leaseq',
        serviceName: options.serviceName ?? env.POWERTOOLS_SERVICE_NAME ?? 'leaseq',
      });
    this.#values = Object.fromEntries(
      Object.entries(options.values ?? {}).map(([k, v]) => [k, new Set(v)]),
    ) as Partial<Record<EmfDimension, ReadonlySet<string>>>;
  }

  count(name: MetricName, value = 1, dimensions?: Readonly<Record<string, string>>): void {
    const counts = this.#group(dimensions).counts;
    counts.set(name, (counts.get(name) ?? 0) + value);
  }

  observe(name: MetricName, ms: number, dimensions?: Readonly<Record<string, string>>): void {
    const observations = this.#group(dimensions).observations;
    const list = observations.get(name);
    if (list) list.push(ms);
    else observations.set(name, [ms]);
  }

  /** Whether anything waits for {@link flush}. */
  get pending(): boolean {
    return this.#groups.size > 0;
  }

  /** Writes what was recorded since the last flush as EMF lines on stdout, and forgets it. */
  flush(): void {
    const groups = [...this.#groups.values()];
    this.#groups.clear();
    for (const group of groups) {
      const rounds = Math.max(
        1,
        ...[...group.observations.values()].map((v) => Math.ceil(v.length / MAX_VALUES_PER_BLOB)),
      );
      for (let round = 0; round < rounds; round++) {
        const entries = Object.entries(group.dimensions);
        const counts = round === 0 ? [...group.counts] : [];
        const chunks = [...group.observations]
          .map(
            ([name, v]) =>
              [name, v.slice(round * MAX_VALUES_PER_BLOB, (round + 1) * MAX_VALUES_PER_BLOB)] as const,
          )
          .filter(([, v]) => v.length > 0);
        if (counts.length === 0 && chunks.length === 0) continue;
        // Dimensions first: they belong to the blob the next publish writes.
        for (const [k, v] of entries) this.#metrics.addDimension(k, v);
        // An empty extra set serialises as [service]: the total across the breakdown above.
        if (entries.length > 0) this.#metrics.addDimensions({});
        for (const [name, value] of counts) this.#metrics.addMetric(name, MetricUnit.Count, value);
        for (const [name, values] of chunks) {
          for (const v of values) this.#metrics.addMetric(name, MetricUnit.Milliseconds, v);
        }
        this.#metrics.publishStoredMetrics();
      }
    }
  }

  /**
   * The bucket of one allowed dimension set (unknown dimensions dropped, values held to their lists).
   * Called on every count: the set is only built for a bucket not seen yet.
   */
  #group(dimensions?: Readonly<Record<string, string>>): Group {
    let id = '';
    for (let i = 0; i < EMF_DIMENSIONS.length; i++) {
      if (i > 0) id += '\u0000';
      id += this.#kept(EMF_DIMENSIONS[i] as EmfDimension, dimensions) ?? '';
    }
    let group = this.#groups.get(id);
    if (!group) {
      const kept: Record<string, string> = {};
      for (const key of EMF_DIMENSIONS) {
        const value = this.#kept(key, dimensions);
        if (value !== undefined) kept[key] = value;
      }
      group = { dimensions: kept, counts: new Map(), observations: new Map() };
      this.#groups.set(id, group);
    }
    return group;
  }

  /** The value kept for one dimension: undefined when absent or empty, `other` outside its list. */
  #kept(key: EmfDimension, dimensions?: Readonly<Record<string, string>>): string | undefined {
    const value = dimensions?.[key];
    if (value === undefined || value === '') return undefined;
    const allowed = this.#values[key];
    return allowed && !allowed.has(value) ? OTHER_DIMENSION_VALUE : value;
  }
}
