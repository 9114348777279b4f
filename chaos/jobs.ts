// The chaos harness's job module: the ledger example's jobs, each effect also counted in a tally row, plus
// a transfer that holds a named lease on its source account, and the credit and the transfer again on the
// one-write fast path. The tallies let the checker see a double effect per job and step, not only as a
// wrong balance.
import { setTimeout as sleep } from 'node:timers/promises';
import * as z from 'zod';
import { credit, transfer } from '../examples/ledger/jobs.ts';
import { changeBalance, ledgerTable } from '../examples/ledger/ledger.ts';
import { beforeWork, simulateSchema } from '../examples/ledger/simulate.ts';
import type { Effect } from '../shared/core/contract/job-store.ts';
import type { EffectTable } from '../shared/core/model/effect-table.ts';
import type { JobContext, StepOutcome } from '../shared/core/model/job-context.ts';
import type { JobDefinition, JobOutcome } from '../shared/core/model/job-definition.ts';
import { defineJob, defineJobs } from '../shared/jobs/define-job.ts';
import { hotCredit, strictJob, ttlJob } from './meet-jobs.ts';

/** The job type of the named-lease transfer. */
export const LOCKED_TRANSFER = 'chaos.lockedTransfer';

/** The job types of the credit and the transfer on the fast path (`fastPath: true`), by ledger type. */
export const FAST_TYPES = {
  'ledger.credit': 'chaos.fastCredit',
  'ledger.transfer': 'chaos.fastTransfer',
} as const;

/** The job type of the tenant mix: a credit to the tenant's own account under a per-tenant concurrency limit. */
export const TENANT_CREDIT = 'chaos.tenantCredit';

/** Runs of one tenant's `chaos.tenantCredit` jobs allowed at once (its `concurrency` limit). */
export const TENANT_LIMIT = 2;

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
 * more. Everything else is the job's own code, unchanged. `folded`: each step's effects (and its tally)
 * join the completion's one write instead of a checkpoint of their own, as on the fast path, where a
 * step needs a lease; the checker then sees the same tallies.
 */
async function runTallied<P>(
  run: JobDefinition<P, LedgerTables>['run'],
  ctx: JobContext<LedgerTables>,
  payload: P,
  folded = false,
): Promise<JobOutcome> {
  const table = ctx.tables.ledger;
  const held: Effect[] = [];
  const step = async <T>(name: string, build: () => Promise<StepOutcome<T>>) => {
    const tallied = async () => {
      const outcome = await build();
      return { ...outcome, effects: [...(outcome.effects ?? []), tally(table, ctx.dedupKey, name)] };
    };
    if (!folded) return ctx.step(name, tallied);
    const outcome = await tallied();
    held.push(...outcome.effects);
    return outcome.data;
  };
  const tallied = new Proxy(ctx, {
    get(target, property) {
      if (property === 'step') return step;
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const outcome = (await run(tallied, payload)) ?? {};
  return { ...outcome, effects: [...held, ...(outcome.effects ?? []), tally(table, ctx.dedupKey, 'final')] };
}

const talliedCredit = defineJob({ ...credit, run: (ctx, p) => runTallied(credit.run, ctx, p) });
const talliedTransfer = defineJob({ ...transfer, run: (ctx, p) => runTallied(transfer.run, ctx, p) });

/** `chaos.fastCredit`: the tallied credit on the fast path (same payload, same effects). */
export const fastCredit = defineJob({
  ...credit,
  type: FAST_TYPES['ledger.credit'],
  fastPath: true,
  run: (ctx, p) => runTallied(credit.run, ctx, p),
});

/**
 * `chaos.fastTransfer`: the tallied transfer on the fast path. Its debit step is folded into the
 * completion (debit, credit and both tallies in one write), on a redelivery run leased too.
 */
export const fastTransfer = defineJob({
  ...transfer,
  type: FAST_TYPES['ledger.transfer'],
  fastPath: true,
  run: (ctx, p) => runTallied(transfer.run, ctx, p, true),
});

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

const tenantPayload = z
  .object({
    tenant: z.string().min(1).max(64),
    account: z.string().min(1).max(128),
    amount: z.number().int().positive().max(1_000_000_000),
    /** How long the run works before its effects, so runs of one tenant overlap if the limit fails. */
    workMs: z.number().int().min(0).max(60_000),
    simulate: simulateSchema.optional(),
  })
  .strict();

/**
 * `chaos.tenantCredit`: credits the tenant's own account under a per-tenant concurrency limit of
 * TENANT_LIMIT. Its final tally also records when the run started (`startedAt`, after its slot was taken);
 * the job row's `completedAt` is the commit's time. Only a committed run leaves both, so the checker
 * counts the overlap of committed runs, not log lines. The work sleeps on the job's signal, so a cancel
 * seen by a heartbeat stops it.
 */
export const tenantCredit = defineJob({
  type: TENANT_CREDIT,
  payload: tenantPayload,
  tables: { ledger: ledgerTable },
  concurrency: { key: (p) => p.tenant, limit: TENANT_LIMIT },
  async run(ctx, p) {
    const startedAt = Date.now();
    await beforeWork(ctx, p.simulate);
    if (p.workMs > 0) await sleep(p.workMs, undefined, { signal: ctx.signal });
    const table = ctx.tables.ledger;
    return {
      effects: [
        await changeBalance(table, p.account, p.amount),
        table.update(
          { account: tallyKey(ctx.dedupKey, 'final') },
          {
            expression: 'ADD #applied :one SET #startedAt = :startedAt',
            names: { '#applied': 'applied', '#startedAt': 'startedAt' },
            values: { ':one': 1, ':startedAt': startedAt },
          },
        ),
      ],
      result: { credited: p.amount },
    };
  },
});

/**
 * The chaos jobs: `ledger.credit`, `ledger.transfer` (both tallied), `chaos.lockedTransfer`,
 * `chaos.fastCredit`, `chaos.fastTransfer` (tallied, on the fast path) and `chaos.tenantCredit` (tallied,
 * per-tenant concurrency limit).
 */
const chaosJobs = defineJobs([
  talliedCredit,
  talliedTransfer,
  lockedTransfer,
  fastCredit,
  fastTransfer,
  tenantCredit,
  // The `--meet` variant's (meet-jobs.ts); sent only with --meet.
  hotCredit,
  ttlJob,
  strictJob,
]);
export default chaosJobs;
