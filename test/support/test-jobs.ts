import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import { versionedPut } from '../../shared/core/decisions/optimistic.ts';
import { JobRegistry } from '../../shared/core/model/registry.ts';
import { PermanentJobError, TransientJobError } from '../../shared/errors.ts';
import type { CoreEnv } from './core-fixture.ts';

/** Counts handler runs per dedup key, so tests can tell "ran" from "skipped". */
export class RunLog {
  readonly runs = new Map<string, number>();
  record(key: string): void {
    this.runs.set(key, (this.runs.get(key) ?? 0) + 1);
  }
  count(key: string): number {
    return this.runs.get(key) ?? 0;
  }
  get total(): number {
    let n = 0;
    for (const v of this.runs.values()) n += v;
    return n;
  }
}

const credit = z.object({
  account: z.string(),
  amount: z.number().int(),
  failTimes: z.number().int().optional(),
  sleepMs: z.number().int().optional(),
  permanent: z.boolean().optional(),
});

/**
 * Test job types: `test.credit` adds `amount` to an account with an optimistic versioned write
 * committed atomically with the completion; its `failTimes` / `sleepMs` / `permanent` fields inject failures.
 * `hooks.fastPath` puts it on the one-write fast path.
 */
export function testRegistry(
  env: CoreEnv,
  log = new RunLog(),
  hooks: { beforeCommit?: () => Promise<void>; fastPath?: boolean } = {},
) {
  const registry = new JobRegistry();
  registry.register({
    type: 'test.credit',
    ...(hooks.fastPath ? { fastPath: true } : {}),
    payload: credit,
    run: async (ctx, p) => {
      log.record(ctx.dedupKey);
      if (p.sleepMs) await new Promise((r) => setTimeout(r, p.sleepMs));
      if (p.permanent) throw new PermanentJobError('this job can never succeed');
      if (p.failTimes && ctx.attempt <= p.failTimes)
        throw new TransientJobError(`flaky failure ${ctx.attempt}`);
      const out = await env.clients.doc.send(
        new GetCommand({ TableName: env.ledgerTable, Key: { account: p.account }, ConsistentRead: true }),
      );
      const seen = out.Item as { balance: number; version: number } | undefined;
      await hooks.beforeCommit?.();
      return {
        result: { applied: p.amount },
        effects: [
          versionedPut({
            tableName: env.ledgerTable,
            key: { account: p.account },
            seenVersion: seen?.version,
            item: { balance: (seen?.balance ?? 0) + p.amount },
          }),
        ],
      };
    },
  });
  return { registry, log };
}
