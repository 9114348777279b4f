import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import { PermanentJobError } from '../shared/core/errors.ts';
import { JobRegistry } from '../shared/core/registry.ts';
import { Ledger } from './ledger.ts';
import { afterStep, beforeWork, type Crash, killSelf, simulateSchema } from './simulate.ts';

const accountId = z.string().min(1).max(128);
const amount = z.number().int().positive().max(1_000_000_000);

export const creditPayload = z
  .object({ account: accountId, amount, simulate: simulateSchema.optional() })
  .strict();
export const transferPayload = z
  .object({ from: accountId, to: accountId, amount, simulate: simulateSchema.optional() })
  .strict();
export type CreditPayload = z.infer<typeof creditPayload>;
export type TransferPayload = z.infer<typeof transferPayload>;

export const JOB_TYPES = { credit: 'ledger.credit', transfer: 'ledger.transfer' } as const;

export interface ExampleJobsOptions {
  readonly doc: DynamoDBDocumentClient;
  readonly ledgerTable: string;
  /** How `simulate.crashAfterStep` kills the worker. @default SIGKILL to its own process */
  readonly crash?: Crash;
}

/**
 * The example jobs:
 * - `ledger.credit` `{account, amount}`: one fenced effect, committed with the completion.
 * - `ledger.transfer` `{from, to, amount}`: step `debit` commits the debit with a checkpoint; the credit
 *   commits with the completion. A worker that dies between them leaves the checkpoint, and the next
 *   owner resumes at the credit, so money is neither lost nor made.
 */
export function exampleJobs(options: ExampleJobsOptions): JobRegistry {
  const ledger = new Ledger(options.doc, options.ledgerTable);
  const crash = options.crash ?? killSelf;
  return new JobRegistry()
    .register({
      type: JOB_TYPES.credit,
      payload: creditPayload,
      run: async (ctx, p) => {
        await beforeWork(ctx, p.simulate);
        return { effects: [await ledger.change(p.account, p.amount)], result: { credited: p.amount } };
      },
    })
    .register({
      type: JOB_TYPES.transfer,
      payload: transferPayload,
      run: async (ctx, p) => {
        if (p.from === p.to) throw new PermanentJobError('transfer to the same account');
        await beforeWork(ctx, p.simulate);
        await ctx.step('debit', async () => ({ effects: [await ledger.change(p.from, -p.amount)] }));
        afterStep(ctx, p.simulate, 'debit', crash);
        return { effects: [await ledger.change(p.to, p.amount)], result: { moved: p.amount } };
      },
    });
}
