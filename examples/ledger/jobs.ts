// The ledger example's job module: the one place its job types, payload schemas and tables are declared.
// The worker (functions/worker.ts), local workers, `leaseq send`, the demo and the CDK stack read them here.
import * as z from 'zod';
import { PermanentJobError } from '../../shared/errors.ts';
import { defineJob, defineJobs } from '../../shared/jobs/define-job.ts';
import { changeBalance, ledgerTable } from './ledger.ts';
import { afterStep, beforeWork, simulateSchema } from './simulate.ts';

const accountId = z.string().min(1).max(128);
const amount = z.number().int().positive().max(1_000_000_000);

export const JOB_TYPES = { credit: 'ledger.credit', transfer: 'ledger.transfer' } as const;

/** `ledger.credit` `{account, amount}`: one fenced effect, committed with the completion. */
export const credit = defineJob({
  type: JOB_TYPES.credit,
  payload: z.object({ account: accountId, amount, simulate: simulateSchema.optional() }).strict(),
  tables: { ledger: ledgerTable },
  async run(ctx, p) {
    await beforeWork(ctx, p.simulate);
    return {
      effects: [await changeBalance(ctx.tables.ledger, p.account, p.amount)],
      result: { credited: p.amount },
    };
  },
});

/**
 * `ledger.transfer` `{from, to, amount}`: step `debit` commits the debit with a checkpoint; the credit
 * commits with the completion. A worker that dies between them leaves the checkpoint, and the next owner
 * resumes at the credit, so money is neither lost nor made.
 */
export const transfer = defineJob({
  type: JOB_TYPES.transfer,
  payload: z.object({ from: accountId, to: accountId, amount, simulate: simulateSchema.optional() }).strict(),
  tables: { ledger: ledgerTable },
  async run(ctx, p) {
    if (p.from === p.to) throw new PermanentJobError('transfer to the same account');
    await beforeWork(ctx, p.simulate);
    await ctx.step('debit', async () => ({
      effects: [await changeBalance(ctx.tables.ledger, p.from, -p.amount)],
    }));
    afterStep(ctx, p.simulate, 'debit');
    return { effects: [await changeBalance(ctx.tables.ledger, p.to, p.amount)], result: { moved: p.amount } };
  },
});

/** The ledger example's jobs. */
const ledgerJobs = defineJobs([credit, transfer]);
export default ledgerJobs;
