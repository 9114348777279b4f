// DynamoDB's limits on a job's writes, against the emulator's real DynamoDB (docs/jobs.md, "Limits of a
// write"): a write the store can never take is the job's permanent failure, dead-lettered after one run
// with a reason that names the limit, not retried until the attempts run out.
import { TransactionInProgressException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { storeRefusal } from '../../../../shared/core/adapters/store-errors.ts';
import type { Effect } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { TransientJobError } from '../../../../shared/errors.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  receiveAll,
  sendJob,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { RunLog } from '../../../support/test-jobs.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('limits');
});
afterAll(() => env?.close());

const KB = 1024;

/** What a `limits.write` job does; each case of the corpus is one payload. */
const limitCase = z.object({
  effects: z.number().int().optional(),
  withLease: z.boolean().optional(),
  sameItemTwice: z.boolean().optional(),
  resultBytes: z.number().int().optional(),
  undefinedValue: z.boolean().optional(),
  bigPuts: z.number().int().optional(),
  /** Grow an existing 300 KB ledger item by 200 KB (only DynamoDB knows the item it would make). */
  growItem: z.string().optional(),
});
type LimitCase = z.infer<typeof limitCase>;

function limitsRegistry(log: RunLog): JobRegistry {
  const registry = new JobRegistry();
  registry.register({
    type: 'limits.write',
    payload: limitCase,
    run: async (ctx, p) => {
      log.record(ctx.dedupKey);
      const table = env.ledgerTable;
      const account = (i: number) => `${ctx.dedupKey}-${i}`;
      const effects: Effect[] = [];
      for (let i = 0; i < (p.effects ?? 0); i++) {
        effects.push({ Put: { TableName: table, Item: { account: account(i), balance: 1 } } });
      }
      if (p.sameItemTwice) {
        effects.push({ Put: { TableName: table, Item: { account: account(0), balance: 1 } } });
        effects.push({
          Update: {
            TableName: table,
            Key: { account: account(0) },
            UpdateExpression: 'SET balance = :b',
            ExpressionAttributeValues: { ':b': 2 },
          },
        });
      }
      if (p.undefinedValue) {
        effects.push({
          Update: {
            TableName: table,
            Key: { account: account(0) },
            UpdateExpression: 'SET note = :note',
            ExpressionAttributeValues: { ':note': undefined },
          },
        });
      }
      for (let i = 0; i < (p.bigPuts ?? 0); i++) {
        effects.push({
          Put: { TableName: table, Item: { account: account(i), pad: 'x'.repeat(380 * KB) } },
        });
      }
      if (p.growItem) {
        effects.push({
          Update: {
            TableName: table,
            Key: { account: p.growItem },
            UpdateExpression: 'SET pad2 = :pad',
            ExpressionAttributeValues: { ':pad': 'y'.repeat(200 * KB) },
          },
        });
      }
      const finish = () => ({
        ...(p.resultBytes ? { result: { pad: 'r'.repeat(p.resultBytes) } } : {}),
        effects,
      });
      return p.withLease ? ctx.withLease(`lock-${ctx.dedupKey}`, async () => finish()) : finish();
    },
  });
  return registry;
}

const MAX_ATTEMPTS = 3;

describe('DynamoDB limits on a job write', () => {
  it('dead-letters each write the store can never take after one run, with the limit as its reason', async () => {
    // Prepare: one job per limit, and two at the edge that must complete.
    const grown = uniqueName('big');
    await env.clients.doc.send(
      new PutCommand({ TableName: env.ledgerTable, Item: { account: grown, pad: 'z'.repeat(300 * KB) } }),
    );
    const corpus: [string, LimitCase, string][] = [
      ['100 effects (101 items with the job item)', { effects: 100 }, 'store-too-many-items'],
      ['99 effects and a named-lease fence', { effects: 99, withLease: true }, 'store-too-many-items'],
      ['98 effects and a named-lease fence (100 items)', { effects: 98, withLease: true }, 'completed'],
      ['two effects on one item', { sameItemTwice: true }, 'store-same-item-twice'],
      ['a result over 400 KB', { resultBytes: 410 * KB }, 'store-item-too-large'],
      ['an update that grows an item past 400 KB', { growItem: grown }, 'store-item-too-large'],
      ['an undefined expression value', { undefinedValue: true }, 'store-bad-value'],
      ['effects over 4 MB', { bigPuts: 11 }, 'store-transaction-too-large'],
      ['a result just under 400 KB', { resultBytes: 390 * KB }, 'completed'],
    ];
    const log = new RunLog();
    const worker = makeWorker(env, limitsRegistry(log), { maxAttempts: MAX_ATTEMPTS });
    const keys = new Map<string, [string, string]>();
    for (const [name, payload, expected] of corpus) {
      const dedupKey = uniqueName('lim');
      keys.set(dedupKey, [name, expected]);
      await sendJob(env, { dedupKey, type: 'limits.write', payload });
    }

    // Act: the worker drains the queue.
    const drained = await eventually(
      async () => {
        await worker.poll(1);
        const c = await queueCounts(env);
        return c.visible + c.inFlight + c.delayed === 0;
      },
      60_000,
      0,
    );

    // Assess: one run each; DEAD with a letter naming the limit, or COMPLETED.
    expect(drained).toBe(true);
    const letters = await receiveAll(env, env.dlqUrl, 30, 2);
    const reasons = new Map(
      letters.map((m) => {
        const a = readDeadLetterAttributes(m.MessageAttributes);
        return [a.dedupKey ?? '', a] as const;
      }),
    );
    for (const [dedupKey, [name, expected]] of keys) {
      const item = await worker.store.get(dedupKey);
      expect(log.count(dedupKey), `${name}: runs`).toBe(1);
      if (expected === 'completed') {
        expect(item?.status, name).toBe(JobStatus.Completed);
        expect(reasons.has(dedupKey), name).toBe(false);
        continue;
      }
      expect(item?.status, name).toBe(JobStatus.Dead);
      const letter = reasons.get(dedupKey);
      expect(letter?.reason, name).toBe(expected);
      // The limit comes first in the stored text, so no cap cuts it off.
      expect(letter?.errorMessage?.slice(0, 80), name).toContain(expected.replace('store-', ''));
      expect(item?.lastError?.slice(0, 80), name).toContain(expected.replace('store-', ''));
    }
  }, 180_000);

  it('releases and dead-marks an item whose checkpoint leaves less room than the error text', async () => {
    // Prepare: a job whose checkpoint fills the item to ~1 KB below 400 KB, then fails.
    const log = new RunLog();
    const registry = new JobRegistry();
    registry.register({
      type: 'limits.near',
      payload: z.object({ permanent: z.boolean() }),
      run: async (ctx, p) => {
        log.record(ctx.dedupKey);
        // Room for the error's first words whatever the test's names (their counters) add to the item.
        await ctx.step('fill', async () => ({ data: 'c'.repeat(400 * KB - 1200) }));
        const long = `failure ${'e'.repeat(2000)}`;
        if (p.permanent) throw new Error(long);
        if (ctx.attempt === 1) throw new TransientJobError(long);
        return { result: 'ok' };
      },
    });
    const worker = makeWorker(env, registry, { maxAttempts: 2 });
    const retried = uniqueName('near');
    const dead = uniqueName('near');
    await sendJob(env, { dedupKey: retried, type: 'limits.near', payload: { permanent: false } });

    // Act + Assess: the failed first attempt is released (RETRY_WAIT, its error kept as far as it fits).
    await eventually(async () => (await worker.poll(1)) > 0, 10_000, 0);
    const released = await worker.store.get(retried);
    expect(released?.status).toBe(JobStatus.RetryWait);
    expect(released?.lastError).toMatch(/^TransientJobError: f.*truncated/);

    // A job that fails on every attempt ends DEAD after its two runs (the dead marking fits too).
    await sendJob(env, { dedupKey: dead, type: 'limits.near', payload: { permanent: true } });
    const settled = await eventually(
      async () => {
        await worker.poll(1);
        return (
          (await worker.store.get(dead))?.status === JobStatus.Dead &&
          (await worker.store.get(retried))?.status === JobStatus.Completed
        );
      },
      40_000,
      0,
    );
    expect(settled).toBe(true);
    expect(log.count(dead)).toBe(2);
    expect((await worker.store.get(dead))?.checkpoint?.step).toBe('fill');
  }, 180_000);

  it('maps the store refusals the pre-check leaves to DynamoDB (the emulator’s own answers) to their limit', async () => {
    const table = env.ledgerTable;
    const put = (account: string, extra: Record<string, unknown> = {}) => ({
      Put: { TableName: table, Item: { account, ...extra } },
    });
    const refusal = async (items: Effect[]) => {
      try {
        await env.clients.doc.send(new TransactWriteCommand({ TransactItems: items }));
      } catch (error) {
        return storeRefusal('complete', error)?.problem;
      }
      return 'accepted';
    };
    const base = uniqueName('raw');
    expect(await refusal(Array.from({ length: 101 }, (_, i) => put(`${base}-${i}`)))).toBe('too-many-items');
    expect(await refusal([put(base), put(base)])).toBe('same-item-twice');
    expect(await refusal([put(base, { pad: 'p'.repeat(401 * KB) })])).toBe('item-too-large');
    const big = uniqueName('raw');
    await env.clients.doc.send(
      new PutCommand({ TableName: table, Item: { account: big, pad: 'z'.repeat(300 * KB) } }),
    );
    expect(
      await refusal([
        {
          Update: {
            TableName: table,
            Key: { account: big },
            UpdateExpression: 'SET pad2 = :p',
            ExpressionAttributeValues: { ':p': 'y'.repeat(200 * KB) },
          },
        },
      ]),
    ).toBe('item-too-large');
    expect(
      await refusal(Array.from({ length: 11 }, (_, i) => put(`${base}-${i}`, { pad: 'x'.repeat(380 * KB) }))),
    ).toBe('transaction-too-large');
    expect(
      await refusal([
        {
          Update: {
            TableName: table,
            Key: { account: base },
            UpdateExpression: 'SET note = :note',
            ExpressionAttributeValues: { ':note': undefined },
          },
        },
      ]),
    ).toBe('bad-value');
  }, 180_000);
});

describe('A commit retried while in flight (TransactionInProgressException)', () => {
  it('settles through the commit check: a commit that landed is completed, not lease-lost', async () => {
    // Prepare: a client that applies every transaction but answers as an SDK retry of an in-flight
    // transaction does (the first send's answer was lost; its retry with the same token met it).
    const inFlight: Pick<DynamoDBDocumentClient, 'send'> = {
      send: (async (command: unknown, options?: unknown) => {
        const out = await env.clients.doc.send(command as never, options as never);
        if (command instanceof TransactWriteCommand) {
          throw new TransactionInProgressException({
            message: 'Transaction is in progress',
            $metadata: { httpStatusCode: 400 },
          });
        }
        return out;
      }) as DynamoDBDocumentClient['send'],
    };
    const store = new DynamoDbJobStore({
      client: inFlight as DynamoDBDocumentClient,
      tableName: env.jobsTable,
    });
    const log = new RunLog();
    // The last attempt: before the check, such an answer dead-lettered the job (max-attempts), whose
    // fence then found it COMPLETED and reported a lost lease.
    const worker = makeWorker(env, limitsRegistry(log), { store, maxAttempts: 1 });
    const dedupKey = uniqueName('tip');
    await sendJob(env, { dedupKey, type: 'limits.write', payload: { effects: 1 } });

    // Act
    await eventually(async () => (await worker.poll(1)) > 0, 10_000, 0);

    // Assess: done once, counted as a success, message deleted, no letter.
    expect((await worker.store.get(dedupKey))?.status).toBe(JobStatus.Completed);
    expect(log.count(dedupKey)).toBe(1);
    expect(worker.metrics.get('JobSucceeded')).toBe(1);
    expect(worker.metrics.get('LeaseLost') ?? 0).toBe(0);
    const c = await queueCounts(env);
    expect(c.visible + c.inFlight + c.delayed).toBe(0);
  }, 180_000);
});
