import type { LimitVariantId } from './scenarios.ts';

/**
 * What each variant of the `limits` scenario sends and limits. Every run is half tenant A and half tenant
 * B, interleaved and all sent at once (a burst of both). Tenant B's jobs are the plain benchmark job (no limit) in every variant;
 * tenant A's are a job type carrying the variant's limit. Uncontended variants spread A over
 * {@link SPREAD_TENANTS} tenant keys, so a job finds its key's slot or permit free at the first try;
 * contended ones send all of A under one key.
 */
export interface LimitPlan {
  /** `concurrency: { key: tenant, limit }` on tenant A's type. */
  readonly concurrency?: number;
  /** `rateLimit: { key: tenant, limit, perSeconds }` on tenant A's type. */
  readonly rate?: { readonly limit: number; readonly perSeconds: number };
  /** All of tenant A under one key (a burst against its limit). */
  readonly contended: boolean;
}

export const LIMIT_PLANS: Readonly<Record<LimitVariantId, LimitPlan>> = {
  none: { contended: true },
  slot: { concurrency: 3, contended: false },
  'slot-busy': { concurrency: 2, contended: true },
  rate: { rate: { limit: 100, perSeconds: 1 }, contended: false },
  'rate-busy': { rate: { limit: 10, perSeconds: 1 }, contended: true },
};

/** Tenant keys tenant A is spread over when its limit must not be contended. */
export const SPREAD_TENANTS = 100;

/** The job type of tenant A's messages (tenant B's are BENCH_JOB_TYPE). */
export const LIMITED_JOB_TYPE = 'bench.limited';

/** The tenant groups of a limits run, in report order. */
export type TenantGroup = 'A' | 'B';

/** What message `index` of a limits run is: its group, limit key and whether its type is limited. */
export function limitMessage(
  variant: LimitVariantId,
  index: number,
): { readonly group: TenantGroup; readonly tenant: string; readonly limited: boolean } {
  if (index % 2 === 1) return { group: 'B', tenant: 'b', limited: false };
  const tenant = LIMIT_PLANS[variant].contended ? 'a' : `a${(index / 2) % SPREAD_TENANTS}`;
  return { group: 'A', tenant, limited: true };
}

/** The index of a benchmark key (`<tag>-<index>`, workload.ts). */
export function keyIndex(key: string): number {
  return Number(key.slice(key.lastIndexOf('-') + 1));
}
