import type { LatencyVariant } from './latency-model.ts';

/**
 * The consumers and scenarios of the side-by-side benchmark. Every consumer runs the same workload of a
 * scenario with the same worker count, under the same poll loop (bench/compare/worker.ts).
 */

/** The consumers compared, in the order runs interleave. */
export const CONSUMERS = ['bare', 'powertools', 'leased', 'fast'] as const;
export type ConsumerId = (typeof CONSUMERS)[number];

/** How each consumer is named in tables and charts. */
export const CONSUMER_LABELS: Readonly<Record<ConsumerId, string>> = {
  bare: 'bare (no guarantees)',
  powertools: 'Powertools idempotency',
  leased: 'leaseq, leased',
  fast: 'leaseq, fast path',
};

/** How duplicates of a job are sent. */
export type DuplicateTiming =
  /** Once the original's message is done (deleted): the copy finds the job finished. */
  | 'after'
  /** With the original: half in the same SendMessageBatch, half in a parallel one. */
  | 'race';

/** One scenario: a workload shape and a worker count. */
export interface Scenario {
  readonly id: string;
  readonly label: string;
  /** Share of the messages that are duplicates of another message's job (0-0.5). */
  readonly duplicates: number;
  readonly timing: DuplicateTiming;
  /** Worker processes; `undefined` takes `--workers`. */
  readonly workers?: number;
  /** Worker processes SIGKILLed right after a job's effect, before the consumer records completion. */
  readonly kill: boolean;
  /** AWS latency added to every worker call (latency-model.ts); none: the emulator's own time only. */
  readonly latency?: LatencyVariant;
  /**
   * The job: `effect` returns its counter update as a DynamoDB effect (the default); `no-effect` makes
   * it itself, as a webhook or e-mail job makes its call, and returns nothing to commit.
   */
  readonly shape?: JobShape;
  /** A variant of the opt-in `limits` scenario (limits.ts): two tenants, leaseq consumers only. */
  readonly limits?: LimitVariantId;
}

/** The variants of the `limits` scenario (`--scenarios limits`); limits.ts says what each one sends. */
export const LIMIT_VARIANTS = ['none', 'slot', 'slot-busy', 'rate', 'rate-busy'] as const;
export type LimitVariantId = (typeof LIMIT_VARIANTS)[number];

/** The id that selects every limits variant on the command line (never in the default set). */
export const LIMITS_ID = 'limits';

/** The consumers a limits run takes (the others have no limits to measure). */
export const LIMIT_CONSUMERS: readonly ConsumerId[] = ['leased', 'fast'];

const LIMIT_LABELS: Readonly<Record<LimitVariantId, string>> = {
  none: 'limits (a): no limit, tenant A burst next to tenant B',
  slot: 'limits (b): concurrency limit 3 per tenant, not contended (A spread over 100 tenants)',
  'slot-busy': 'limits (c): concurrency limit 2, tenant A burst next to unlimited tenant B',
  rate: 'limits (d1): rate limit 100/s per tenant, not contended (A spread over 100 tenants)',
  'rate-busy': 'limits (d2): rate limit 10/s, tenant A burst next to unlimited tenant B',
};

/** The limits variants as scenarios (no duplicates: every message is a unique job). */
export const LIMIT_SCENARIOS: readonly Scenario[] = LIMIT_VARIANTS.map((variant) => ({
  id: `limits-${variant}`,
  label: LIMIT_LABELS[variant],
  duplicates: 0,
  timing: 'after',
  kill: false,
  limits: variant,
}));

/** Whether the job returns its effect for the commit or makes it itself. */
export type JobShape = 'effect' | 'no-effect';

/** Every scenario, in report order. */
export const SCENARIOS: readonly Scenario[] = [
  { id: 'dup0', label: '0 % duplicates', duplicates: 0, timing: 'after', kill: false },
  { id: 'dup10', label: '10 % duplicates (baseline)', duplicates: 0.1, timing: 'after', kill: false },
  { id: 'dup50', label: '50 % duplicates', duplicates: 0.5, timing: 'after', kill: false },
  { id: 'race', label: '10 % duplicates racing the original', duplicates: 0.1, timing: 'race', kill: false },
  {
    id: 'kill',
    label: '10 % duplicates, workers killed after the effect',
    duplicates: 0.1,
    timing: 'after',
    kill: true,
  },
  {
    id: 'workers1',
    label: '10 % duplicates, 1 worker',
    duplicates: 0.1,
    timing: 'after',
    workers: 1,
    kill: false,
  },
  {
    id: 'workers3',
    label: '10 % duplicates, 3 workers',
    duplicates: 0.1,
    timing: 'after',
    workers: 3,
    kill: false,
  },
  {
    id: 'workers4',
    label: '10 % duplicates, 4 workers',
    duplicates: 0.1,
    timing: 'after',
    workers: 4,
    kill: false,
  },
  {
    id: 'noeffect',
    label: '10 % duplicates, a job with no DynamoDB effects',
    duplicates: 0.1,
    timing: 'after',
    kill: false,
    shape: 'no-effect',
  },
  {
    id: 'aws',
    label: '10 % duplicates, AWS latency model (published figures)',
    duplicates: 0.1,
    timing: 'after',
    kill: false,
    latency: 'aws',
  },
  {
    id: 'aws-tx2x',
    label: '10 % duplicates, AWS latency model, a 2-item transaction at 2x a write',
    duplicates: 0.1,
    timing: 'after',
    kill: false,
    latency: 'tx2x',
  },
  {
    id: 'aws-tx3x',
    label: '10 % duplicates, AWS latency model, a 2-item transaction at 3x a write',
    duplicates: 0.1,
    timing: 'after',
    kill: false,
    latency: 'tx3x',
  },
  {
    id: 'aws-noeffect',
    label: '10 % duplicates, AWS latency model, a job with no DynamoDB effects',
    duplicates: 0.1,
    timing: 'after',
    kill: false,
    latency: 'aws',
    shape: 'no-effect',
  },
];

/** The scenarios of the CI variant: one race and one kill. */
export const CI_SCENARIOS: readonly string[] = ['race', 'kill'];

/** The scenario with this id. */
export function scenarioById(id: string): Scenario | undefined {
  return SCENARIOS.find((s) => s.id === id) ?? LIMIT_SCENARIOS.find((s) => s.id === id);
}

/** The worker count a scenario runs with. */
export function workersFor(scenario: Scenario, defaultWorkers: number): number {
  return scenario.workers ?? defaultWorkers;
}
