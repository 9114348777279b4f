import { PutCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { ledgerTable } from '../../../examples/ledger/ledger.ts';
import { JobRegistry } from '../../../shared/core/model/registry.ts';
import { defineJob } from '../../../shared/jobs/define-job.ts';
import { runJob } from '../../../shared/testing/index.ts';
import { type CoreEnv, coreEnv, makeWorker, sendJob } from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';

// `runJob`'s in-memory tables against the emulator's DynamoDB: one job using every effect `ctx.tables`
// builds (versionedPut, put with a condition, update with SET/ADD/REMOVE and functions, delete with a
// condition), in a step and in the completion, run on the same rows both ways, leaves the same table,
// decimal and bigint arithmetic included.

let env: CoreEnv;
beforeAll(async () => {
  env = await coreEnv('agrees');
});
afterAll(() => env?.close());

const everyEffect = defineJob({
  type: 'ledger.every',
  payload: z.object({ n: z.number() }),
  tables: { ledger: ledgerTable },
  async run(ctx, p) {
    const ledger = ctx.tables.ledger;
    await ctx.step('first', async () => {
      const a = await ledger.get<{ balance: number; version: number }>({ account: 'a' });
      return {
        effects: [
          ledger.versionedPut({
            key: { account: 'a' },
            seenVersion: a?.version,
            item: { balance: (a?.balance ?? 0) + p.n },
          }),
          ledger.update(
            { account: 'b' },
            {
              expression:
                'SET #h = list_append(if_not_exists(#h, :empty), :entry), balance = balance - :n ADD tags :tag REMOVE note',
              names: { '#h': 'history' },
              values: { ':empty': [], ':entry': [{ by: p.n }], ':n': p.n, ':tag': new Set(['moved']) },
            },
            'balance >= :n',
          ),
        ],
      };
    });
    return {
      effects: [
        ledger.delete(
          { account: 'c' },
          { expression: 'attribute_exists(account) AND balance = :zero', values: { ':zero': 0 } },
        ),
        ledger.put(
          { account: 'd', balance: p.n, nested: { list: [1, 2], flag: true } },
          { expression: 'attribute_not_exists(account)' },
        ),
        ledger.update(
          { account: 'e' },
          {
            expression: 'SET balance = if_not_exists(balance, :zero) + :n',
            values: { ':zero': 0, ':n': p.n },
          },
        ),
        // Numbers are decimals (0.1 + 0.2 is 0.3) and a bigint past 2^53 adds exactly.
        ledger.update(
          { account: 'f' },
          {
            expression: 'SET balance = balance + :tenths ADD big :one',
            values: { ':tenths': 0.2, ':one': 1 },
          },
        ),
      ],
    };
  },
});

const rows = [
  { account: 'a', balance: 10, version: 0 },
  { account: 'b', balance: 50, note: 'to remove', tags: new Set(['old']) },
  { account: 'c', balance: 0 },
  { account: 'f', balance: 0.1, big: 9007199254740993n },
];

it('leaves the same table in memory as on the emulator', async () => {
  const memory = await runJob(everyEffect, { n: 7 }, { tables: { ledger: rows } });
  expect(memory.status).toBe('completed');

  for (const row of rows)
    await env.clients.doc.send(new PutCommand({ TableName: env.ledgerTable, Item: row }));
  const worker = makeWorker(env, JobRegistry.of([everyEffect]));
  await sendJob(env, { dedupKey: uniqueName('every'), type: everyEffect.type, payload: { n: 7 } });
  await worker.poll(2);
  const scanned = await env.clients.doc.send(
    new ScanCommand({ TableName: env.ledgerTable, ConsistentRead: true }),
  );
  const emulator = (scanned.Items ?? []).sort((x, y) => String(x.account).localeCompare(String(y.account)));

  expect(emulator).toEqual(memory.tables.ledger);
  expect(memory.tables.ledger.map((r) => r.account)).toEqual(['a', 'b', 'd', 'e', 'f']);
  expect(memory.tables.ledger.at(-1)).toEqual({ account: 'f', balance: 0.3, big: 9007199254740994n });
}, 180_000);
