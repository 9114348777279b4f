// The job types of the chaos run's `--meet` variant (issue 31: where features meet; meet.ts runs them):
// a burst on one hot row, a job whose dead key is reset by a fresh send and then redriven, and a job whose
// payload a stricter schema refuses while it waits.
import * as z from 'zod';
import { changeBalance, ledgerTable } from '../examples/ledger/ledger.ts';
import type { Effect } from '../shared/core/contract/job-store.ts';
import type { EffectTable } from '../shared/core/model/effect-table.ts';
import { PermanentJobError, TransientJobError } from '../shared/errors.ts';
import { defineJob } from '../shared/jobs/define-job.ts';

/** Dedup keys (and ledger rows) of the variant start with this, so the main checker leaves them alone. */
export const MEET_PREFIX = 'meet-';
export const HOT_CREDIT = 'chaos.hotCredit';
export const TTL_JOB = 'chaos.ttlJob';
export const STRICT_JOB = 'chaos.strictJob';
/** `chaos.ttlJob`'s dead key stays dead this long (seconds); then a fresh send runs it as a new job. */
export const TTL_SECONDS = 2;

/** The ledger row counting one job's step (`tally#<dedupKey>#<step>`, as jobs.ts's tallies). */
export function meetTally(dedupKey: string, step: string): string {
  return `tally#${dedupKey}#${step}`;
}

function tally(table: EffectTable, dedupKey: string, step: string): Effect {
  return table.update(
    { account: meetTally(dedupKey, step) },
    { expression: 'ADD #applied :one', names: { '#applied': 'applied' }, values: { ':one': 1 } },
  );
}

/**
 * `chaos.hotCredit`: the documented optimistic pattern on one row shared by the whole burst (read, then
 * `versionedPut` on the version read), its tally in the same write. A conflict is someone else's write.
 */
export const hotCredit = defineJob({
  type: HOT_CREDIT,
  payload: z.object({ account: z.string().min(1).max(128), amount: z.number().int().positive() }).strict(),
  tables: { ledger: ledgerTable },
  async run(ctx, p) {
    const table = ctx.tables.ledger;
    return {
      effects: [await changeBalance(table, p.account, p.amount), tally(table, ctx.dedupKey, 'final')],
    };
  },
});

/**
 * `chaos.ttlJob` (deadKeyTtl): generation 1 is a poison (it dies, its letter stays in the DLQ); the fresh
 * send after the TTL is generation 2, which fails `failTimes` attempts and then completes, its tally
 * naming its generation.
 */
export const ttlJob = defineJob({
  type: TTL_JOB,
  deadKeyTtl: TTL_SECONDS,
  payload: z
    .object({
      gen: z.number().int().min(1).max(9),
      poison: z.boolean().optional(),
      failTimes: z.number().int().min(0).max(10).optional(),
    })
    .strict(),
  tables: { ledger: ledgerTable },
  async run(ctx, p) {
    if (p.poison) throw new PermanentJobError(`generation ${p.gen} is a poison`);
    if (ctx.attempt <= (p.failTimes ?? 0)) throw new TransientJobError(`generation ${p.gen} fails at first`);
    return { effects: [tally(ctx.tables.ledger, ctx.dedupKey, `gen${p.gen}`)], result: { gen: p.gen } };
  },
});

/**
 * `chaos.strictJob`: its schema, from `strictAfter` (epoch ms) on, also requires `sku` (a deploy with a
 * stricter schema while the job waits); until then every run fails, so the job is waiting for a retry
 * when its payload stops passing.
 */
export const strictJob = defineJob({
  type: STRICT_JOB,
  payload: z
    .object({ strictAfter: z.number().int(), sku: z.string().optional() })
    .strict()
    .refine((p) => Date.now() < p.strictAfter || p.sku !== undefined, {
      message: 'sku is required by the stricter schema',
      path: ['sku'],
    }),
  async run(_ctx, p) {
    throw new TransientJobError(`not before the schema changes at ${new Date(p.strictAfter).toISOString()}`);
  },
});
