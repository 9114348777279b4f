import type { Effect } from '../../shared/core/contract/job-store.ts';
import type { EffectTable } from '../../shared/core/model/effect-table.ts';
import { defineTable } from '../../shared/core/model/table.ts';

/** The example application state: one item per account, with a balance and a version. */
export const ledgerTable = defineTable('ledger', { partitionKey: 'account' });

/** One account of the `ledger` table. */
export interface Account {
  readonly account: string;
  readonly balance: number;
  readonly version: number;
}

/**
 * An effect that adds `delta` to an account, read now (strongly consistent) and written only if nobody
 * wrote it since (optimistic locking). It commits inside the job's fenced transaction, so it happens
 * once or not at all; a conflict re-reads and tries again.
 */
export async function changeBalance(table: EffectTable, account: string, delta: number): Promise<Effect> {
  const seen = await table.get<Account>({ account });
  return table.versionedPut({
    key: { account },
    seenVersion: seen?.version,
    item: { balance: (seen?.balance ?? 0) + delta },
  });
}
