/**
 * The capacity model: from the measured per-job figures (measure.ts) and a workload (workloads.ts), the
 * units per second on the busiest item and partition of each table and index, SQS in-flight messages,
 * Lambda concurrency and dollars per hour at a rate; and, per quota, the rate at which the workload
 * reaches it. Pure: no figure here is typed in but the quotas (quotas.ts), the prices
 * (compare/pricing.ts) and the round trip (compare/latency-model.ts).
 */
import { PROBLEM_SHARDS } from '../../shared/core/contract/job-history.ts';
import { latencyModel } from '../compare/latency-model.ts';
import { PRICES } from '../compare/pricing.ts';
import type { Figures, ItemRole, JobKind, KindFigures } from './measure.ts';
import { QUOTAS } from './quotas.ts';
import type { Workload } from './workloads.ts';

/** Each kind's share of the messages a workload sends. */
export function kindShares(w: Workload): Record<JobKind, number> {
  const unique = 1 - w.duplicates;
  const share = (s: number | undefined) => unique * (s ?? 0);
  const rate = share(w.rateLimit?.share);
  const slot = share(w.concurrency?.share);
  const named = share(w.namedLease?.share);
  const problem = share(w.problems);
  const base = Math.max(0, unique - rate - slot - named - problem);
  return {
    leased: w.fastPath ? 0 : base,
    fast: w.fastPath ? base : 0,
    duplicate: w.duplicates,
    problem,
    rate,
    slot,
    named,
  };
}

/** WRU on the rate item of one take with `grants` already in the window (the measured series). */
export function rateTakeWru(figures: Figures, grants: number): number {
  const series = figures.rate.wruByTake;
  const n = series.length;
  const at = Math.max(0, Math.round(grants));
  if (at < n) return series[at] ?? 0;
  // Beyond the measured window: the item grows by the same units per grant as over the last tenth.
  const from = Math.floor(n * 0.9);
  const slope = ((series[n - 1] ?? 0) - (series[from] ?? 0)) / Math.max(1, n - 1 - from);
  return (series[n - 1] ?? 0) + slope * (at - n + 1);
}

/** Units a second of one role, at `rate` messages a second. */
interface RoleLoad {
  wru: number;
  rru: number;
}

/** Everything the model says about one workload at one rate. */
export interface Load {
  readonly rate: number;
  readonly tables: Record<'jobs' | 'leases' | 'app' | 'problems', RoleLoad>;
  /** The busiest item (or index partition) of each table, units a second, and what it is. */
  readonly busiest: Record<'jobs' | 'leases' | 'app' | 'problems', RoleLoad & { what: string }>;
  /** Takes a second on the rate-limited key and WRU per take there. */
  readonly rateItem?: { takes: number; wruPerTake: number };
  readonly namedLease?: { jobs: number; wru: number; busy: number };
  readonly slots?: { jobs: number; wruPerSlot: number; busy: number };
  readonly invocationMs: number;
  readonly concurrency: number;
  readonly inFlight: number;
  readonly sqsRequests: number;
  readonly dollarsPerHour: { dynamodb: number; sqs: number; lambda: number; total: number };
}

const ROLE_TABLE: Record<ItemRole, 'jobs' | 'leases' | 'app' | 'problems'> = {
  job: 'jobs',
  problems: 'problems',
  rate: 'leases',
  slot: 'leases',
  named: 'leases',
  app: 'app',
};

/** One round trip to DynamoDB, ms: the latency model's single-item write p50. */
const ROUND_TRIP_MS = latencyModel('aws').write.p50;
/** An SQS call, ms (the event source's receive before the invocation and delete after it). */
const SQS_MS = latencyModel('aws').sqs.p50;

/** The model at `rate` messages a second. */
export function loadAt(figures: Figures, w: Workload, rate: number): Load {
  const shares = kindShares(w);
  const tables = { jobs: zero(), leases: zero(), app: zero(), problems: zero() };
  let requests = 0;
  let deliveries = 0;
  let queueCalls = 0;
  const rateKey = rate * shares.rate;
  const takes = w.rateLimit ? Math.min(rateKey, w.rateLimit.perSecond) : 0;
  const wruPerTake = w.rateLimit ? rateTakeWru(figures, takes) : 0;
  for (const [kind, share] of Object.entries(shares) as [JobKind, number][]) {
    if (share === 0) continue;
    const k: KindFigures = figures.kinds[kind];
    const jobs = rate * share;
    requests += jobs * k.requests;
    deliveries += jobs * k.deliveries;
    queueCalls += jobs * k.queueCalls;
    for (const [role, f] of Object.entries(k.roles) as [ItemRole, KindFigures['roles'][ItemRole]][]) {
      if (!f) continue;
      const t = tables[ROLE_TABLE[role]];
      // The rate item's units per take grow with the window's grants: the series, not the fill's mean.
      t.wru += role === 'rate' ? takes * wruPerTake : jobs * f.wru;
      t.rru += jobs * f.rru;
    }
  }
  const jobRequests = requests / Math.max(1e-9, rate);
  const invocationMs = w.jobMs + jobRequests * ROUND_TRIP_MS;
  const batch = w.batchSize ?? 10;
  const invocations = deliveries / batch;
  const concurrency = invocations * (invocationMs / 1000);
  const inFlight = deliveries * ((invocationMs + 2 * SQS_MS) / 1000);
  // Producer batches of 10, the event source's receive and delete batches, the processor's own calls.
  const sqsRequests = rate / 10 + invocations + rate / batch + queueCalls;

  const perJob = (kind: JobKind, role: ItemRole) => figures.kinds[kind].roles[role];
  const base: JobKind = w.fastPath ? 'fast' : 'leased';
  const jobItem = perJob(base, 'job');
  const busiest = {
    jobs: { wru: jobItem?.wru ?? 0, rru: jobItem?.rru ?? 0, what: 'one job item (its whole life)' },
    app: { wru: perJob(base, 'app')?.wru ?? 0, rru: 0, what: 'one effect item (one per job here)' },
    problems: {
      wru: tables.problems.wru / PROBLEM_SHARDS,
      rru: 0,
      what: `one of ${PROBLEM_SHARDS} index shards`,
    },
    leases: { wru: 0, rru: 0, what: 'none' },
  };
  const out: {
    rateItem?: Load['rateItem'];
    namedLease?: Load['namedLease'];
    slots?: Load['slots'];
  } = {};
  const holdMs = w.jobMs + jobRequests * ROUND_TRIP_MS;
  if (w.rateLimit) {
    out.rateItem = { takes, wruPerTake };
    // A limit whose log is spread over several items (shards) puts only the busiest one's share on one.
    const share = figures.rate.busiestShare;
    busiest.leases = { wru: takes * wruPerTake * share, rru: 0, what: 'the rate item of the limited key' };
  }
  if (w.namedLease) {
    const jobs = rate * shares.named;
    const wru = jobs * (perJob('named', 'named')?.wru ?? 0);
    out.namedLease = { jobs, wru, busy: jobs * (holdMs / 1000) };
    if (wru > busiest.leases.wru) busiest.leases = { wru, rru: 0, what: 'the named lease acct#1' };
  }
  if (w.concurrency) {
    const jobs = rate * shares.slot;
    const wruPerSlot = (jobs * (perJob('slot', 'slot')?.wru ?? 0)) / w.concurrency.limit;
    out.slots = { jobs, wruPerSlot, busy: jobs * (holdMs / 1000) };
    if (wruPerSlot > busiest.leases.wru) busiest.leases = { wru: wruPerSlot, rru: 0, what: 'one slot item' };
  }
  const gbSeconds = invocations * (invocationMs / 1000) * (PRICES.lambdaMemoryMb / 1024);
  const total = (f: (t: RoleLoad) => number) => Object.values(tables).reduce((n, t) => n + f(t), 0);
  const hour = 3600 / 1e6;
  const dynamodb =
    hour *
    (total((t) => t.wru) * PRICES.dynamodbPerMillionWru + total((t) => t.rru) * PRICES.dynamodbPerMillionRru);
  const sqs = hour * sqsRequests * PRICES.sqsPerMillionRequests;
  const lambda =
    3600 * (gbSeconds * PRICES.lambdaArmPerGbSecond + (invocations * PRICES.lambdaPerMillionRequests) / 1e6);
  return {
    rate,
    tables,
    busiest,
    ...out,
    invocationMs,
    concurrency,
    inFlight,
    sqsRequests,
    dollarsPerHour: { dynamodb, sqs, lambda, total: dynamodb + sqs + lambda },
  };
}

function zero(): RoleLoad {
  return { wru: 0, rru: 0 };
}

/** A quota and how full one workload's load makes it (1: at the quota). */
export interface Wall {
  readonly name: string;
  /** The quota, in its own units. */
  readonly quota: string;
  /** `true`: the workload's own limit doing its job (a rate or concurrency limit), not a wall. */
  readonly byDesign?: boolean;
  /** Whether a setting or a quota request moves it (provisioned pollers, a table quota raise). */
  readonly movable?: string;
  readonly fill: (load: Load) => number;
}

/** The quotas one workload meets. */
export function wallsOf(w: Workload): Wall[] {
  const fifo = w.fifo !== undefined;
  const walls: Wall[] = [
    {
      name: 'jobs table WRU',
      quota: `${QUOTAS.tableWru} WRU/s`,
      movable: 'table quota raise',
      fill: (l) => l.tables.jobs.wru / QUOTAS.tableWru,
    },
    {
      name: 'leases table WRU',
      quota: `${QUOTAS.tableWru} WRU/s`,
      movable: 'table quota raise',
      fill: (l) => l.tables.leases.wru / QUOTAS.tableWru,
    },
    {
      name: 'app table WRU',
      quota: `${QUOTAS.tableWru} WRU/s`,
      movable: 'table quota raise',
      fill: (l) => l.tables.app.wru / QUOTAS.tableWru,
    },
    {
      name: 'problems index shard WRU',
      quota: `${QUOTAS.partitionWru} WRU/s per shard`,
      fill: (l) => l.busiest.problems.wru / QUOTAS.partitionWru,
    },
    {
      name: 'busiest leases item WRU',
      quota: `${QUOTAS.partitionWru} WRU/s per item`,
      fill: (l) => l.busiest.leases.wru / QUOTAS.partitionWru,
    },
    {
      name: 'Lambda event source, standard mode',
      quota: `${QUOTAS.esmStandard} concurrent`,
      movable: `provisioned pollers (up to ${QUOTAS.esmProvisioned})`,
      fill: (l) => l.concurrency / QUOTAS.esmStandard,
    },
    {
      name: 'Lambda event source, provisioned mode',
      quota: `${QUOTAS.esmProvisioned} concurrent`,
      fill: (l) => l.concurrency / QUOTAS.esmProvisioned,
    },
    {
      name: 'Lambda account concurrency',
      quota: `${QUOTAS.accountConcurrency} (default)`,
      movable: 'quota raise',
      fill: (l) => l.concurrency / QUOTAS.accountConcurrency,
    },
    {
      name: `SQS in-flight (${fifo ? 'FIFO' : 'standard'})`,
      quota: `${fifo ? QUOTAS.inFlightFifo : QUOTAS.inFlightStandard} messages`,
      fill: (l) => l.inFlight / (fifo ? QUOTAS.inFlightFifo : QUOTAS.inFlightStandard),
    },
  ];
  if (w.rateLimit) {
    const limit = w.rateLimit.perSecond;
    walls.push({
      name: 'the rate limit itself',
      quota: `${limit}/s on the key`,
      byDesign: true,
      fill: (l) => (l.rate * kindShares(w).rate) / limit,
    });
  }
  if (w.namedLease) {
    walls.push({
      name: 'named lease held back to back',
      quota: '1 holder at a time',
      fill: (l) => l.namedLease?.busy ?? 0,
    });
  }
  if (w.concurrency) {
    const limit = w.concurrency.limit;
    walls.push({
      name: 'the concurrency limit itself',
      quota: `${limit} slots`,
      byDesign: true,
      fill: (l) => (l.slots?.busy ?? 0) / limit,
    });
  }
  if (w.fifo) {
    const groups = w.fifo.groups;
    walls.push({
      name: 'FIFO groups, one job at a time each',
      quota: `${groups} groups`,
      fill: (l) => (l.rate * l.invocationMs) / 1000 / groups,
    });
    walls.push({
      name: 'SQS FIFO receive calls (high throughput)',
      quota: `${QUOTAS.fifoCallsPerSecond}/s`,
      fill: (l) => l.rate / (w.batchSize ?? 10) / QUOTAS.fifoCallsPerSecond,
    });
  }
  return walls;
}

/** The rate (messages a second) at which `wall` fills, by bisection (loads grow with the rate). */
export function rateAtWall(figures: Figures, w: Workload, wall: Wall, max = 1e8): number {
  if (wall.fill(loadAt(figures, w, max)) < 1) return Number.POSITIVE_INFINITY;
  let lo = 0;
  let hi = max;
  for (let i = 0; i < 80 && hi - lo > 0.5; i++) {
    const mid = (lo + hi) / 2;
    if (wall.fill(loadAt(figures, w, mid)) >= 1) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** Every wall of a workload with the rate it is reached at, lowest first. */
export function wallRates(figures: Figures, w: Workload): { wall: Wall; rate: number }[] {
  return wallsOf(w)
    .map((wall) => ({ wall, rate: rateAtWall(figures, w, wall) }))
    .sort((a, b) => a.rate - b.rate);
}
