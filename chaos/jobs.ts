// The chaos harness's job module: the ledger example's jobs, each effect also counted in a tally row, plus
// a transfer that holds a named lease on its source account. The tallies let the checker see a double
// effect per job and step, not only as a wrong balance.
import { z } from 'zod';
import { credit, transfer } from '../examples/ledger/jobs.ts';
import { ledgerTable } from '../examples/ledger/ledger.ts';
import { simulateSchema } from '../examples/ledger/simulate.ts';
import type { JobContext, StepOutcome } from '../shared/core/job-context.ts';
import type { Effect } from '../shared/core/job-store.ts';
import type { JobDefinition, JobOutcome } from '../shared/core/registry.ts';
import { defineJob, defineJobs } from '../shared/jobs/define-job.ts';
import type { EffectTable } from '../shared/jobs/effect-table.ts';

/** The job type of the named-lease transfer. */
export const LOCKED_TRANSFER = 'chaos.lockedTransfer';

/** Environment variable: the named lease's length in ms (the harness sets it to the job lease). */
export const NAMED_LEASE_ENV = 'CHAOS_NAMED_LEASE_MS';

/** Tally rows live in the ledger table under keys that are never account names. */
export const TALLY_PREFIX = 'tally#';

/** The ledger-table key of the tally of one job's step (`final` is the completion). */
export function tallyKey(dedupKey: string, step: string): string {
  return `${TALLY_PREFIX}${dedupKey}#${step}`;
}

/** An effect adding 1 to the tally of `step`: it commits in the same transaction as the step's effects. */
function tally(table: EffectTable, dedupKey: string, step: string): Effect {
  return table.update(
    { account: tallyKey(dedupKey, step) },
    { expression: 'ADD #applied :one', names: { '#applied': 'applied' }, values: { ':one': 1 } },
  );
}

type LedgerTables = { ledger: typeof ledgerTable };

/**
 * Runs a ledger job's `run` with a context whose steps, and whose completion, carry one tally effect
 * more. Everything else is the job's own code, unchanged.
 */
async function runTallied<P>(
  run: JobDefinition<P, LedgerTables>['run'],
  ctx: JobContext<LedgerTables>,
  payload: P,
): Promise<JobOutcome> {
  const table = ctx.tables.ledger;
  const step = <T>(name: string, build: () => Promise<StepOutcome<T>>) =>
    ctx.step(name, async () => {
      const outcome = await build();
      return { ...outcome, effects: [...(outcome.effects ?? []), tally(table, ctx.dedupKey, name)] };
    });
  const tallied = new Proxy(ctx, {
    get(target, property) {
      if (property === 'step') return step;
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const outcome = (await run(tallied, payload)) ?? {};
  return { ...outcome, effects: [...(outcome.effects ?? []), tally(table, ctx.dedupKey, 'final')] };
}

const talliedCredit = defineJob({ ...credit, run: (ctx, p) => runTallied(credit.run, ctx, p) });
const talliedTransfer = defineJob({ ...transfer, run: (ctx, p) => runTallied(transfer.run, ctx, p) });

const lockedPayload = z
  .object({
    from: z.string().min(1).max(128),
    to: z.string().min(1).max(128),
    amount: z.number().int().positive().max(1_000_000_000),
    simulate: simulateSchema.optional(),
  })
  .strict();

/**
 * `chaos.lockedTransfer`: the ledger transfer (checkpointed debit, credit with the completion) run while
 * holding the named lease `account#<from>`, so the lease fences both commits.
 */
export const lockedTransfer = defineJob({
  type: LOCKED_TRANSFER,
  payload: lockedPayload,
  tables: { ledger: ledgerTable },
  run(ctx, p) {
    const leaseMs = Number(process.env[NAMED_LEASE_ENV] ?? 3000) || 3000;
    return ctx.withLease(`account#${p.from}`, () => runTallied(transfer.run, ctx, p), {
      leaseMs,
      waitMs: 4 * leaseMs,
    });
  },
});

/** The chaos jobs: `ledger.credit`, `ledger.transfer` (both tallied) and `chaos.lockedTransfer`. */
const chaosJobs = defineJobs([talliedCredit, talliedTransfer, lockedTransfer]);
export default chaosJobs;
