/**
 * The benchmark's one job, for every consumer: add 1 to the job's counter row. The bare and Powertools
 * consumers send it as an UpdateItem; leaseq returns it as an effect, committed with the completion.
 * A counter above 1 is a double effect; a missing row is a lost job.
 */
import * as z from 'zod';
import { defineTable } from '../../shared/core/model/table.ts';
import { defineJob, defineJobs } from '../../shared/jobs/define-job.ts';
import { LIMIT_PLANS, LIMITED_JOB_TYPE } from './limit-plan.ts';
import type { LimitVariantId } from './scenarios.ts';

/** The job type every benchmark message carries. */
export const BENCH_JOB_TYPE = 'bench.count';

/** The counter table: one row per job key, `n` = effects applied. */
export const countersTable = defineTable('counters', { partitionKey: 'id' });

/** The payload: when the producer sent the message (epoch ms), for enqueue-to-effect latency. */
export const benchPayload = z.object({ sentAt: z.number() });
export type BenchPayload = z.infer<typeof benchPayload>;

/** The effect of one job, as an update of its counter row (shared by every consumer). */
export const COUNTER_UPDATE = {
  expression: 'ADD #n :one',
  names: { '#n': 'n' },
  values: { ':one': 1 },
} as const;

/** leaseq's job: the counter update as an effect, committed atomically with the job's completion. */
export const countJob = defineJob({
  type: BENCH_JOB_TYPE,
  payload: benchPayload,
  tables: { counters: countersTable },
  async run(ctx) {
    return {
      effects: [
        ctx.tables.counters.update(
          { id: ctx.dedupKey },
          {
            expression: COUNTER_UPDATE.expression,
            names: COUNTER_UPDATE.names,
            values: COUNTER_UPDATE.values,
          },
        ),
      ],
    };
  },
});

/**
 * The same job on leaseq's fast path: no separate claim; the job runs, then one transaction writes its
 * effect and the job item COMPLETED under the claim's condition.
 */
export const fastCountJob = defineJob({ ...countJob, fastPath: true });

/**
 * The job with no DynamoDB effects (a webhook or e-mail job): it makes its effect itself, through
 * `apply` (the counter update, standing in for the outside call, so doubles stay countable), and returns
 * nothing to commit. Its completion is one single-item write on either path.
 */
export function noEffectJobs(apply: (dedupKey: string) => Promise<unknown>, fastPath: boolean) {
  return defineJobs([
    defineJob({
      type: BENCH_JOB_TYPE,
      payload: benchPayload,
      ...(fastPath ? { fastPath: true } : {}),
      async run(ctx) {
        await apply(ctx.dedupKey);
      },
    }),
  ]);
}

/** Tenant A's payload in the limits scenario: the limit's key is `tenant`. */
export const limitedPayload = z.object({ sentAt: z.number(), tenant: z.string() });
type LimitedPayload = z.infer<typeof limitedPayload>;

/**
 * The limits scenario's job set: tenant B's plain counting job and tenant A's, the same job under the
 * variant's limit (none in variant `none`, so the two differ only by the limit).
 */
export function limitJobs(variant: LimitVariantId, fastPath: boolean) {
  const plan = LIMIT_PLANS[variant];
  const limited = defineJob({
    type: LIMITED_JOB_TYPE,
    payload: limitedPayload,
    tables: { counters: countersTable },
    ...(fastPath ? { fastPath: true } : {}),
    ...(plan.concurrency !== undefined
      ? { concurrency: { key: (p: LimitedPayload) => p.tenant, limit: plan.concurrency } }
      : {}),
    ...(plan.rate !== undefined ? { rateLimit: { key: (p: LimitedPayload) => p.tenant, ...plan.rate } } : {}),
    async run(ctx) {
      return {
        effects: [
          ctx.tables.counters.update(
            { id: ctx.dedupKey },
            {
              expression: COUNTER_UPDATE.expression,
              names: COUNTER_UPDATE.names,
              values: COUNTER_UPDATE.values,
            },
          ),
        ],
      };
    },
  });
  return defineJobs([fastPath ? fastCountJob : countJob, limited]);
}

/** The leased job set (also what local provisioning reads to create the counter table). */
export const leasedJobs = defineJobs([countJob]);
/** The fast-path job set. */
export const fastJobs = defineJobs([fastCountJob]);
export default leasedJobs;
