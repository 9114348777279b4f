import { GetCommand, PutCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { defineTable } from '../../../shared/core/model/table.ts';
import { parseUpdate } from '../../../shared/testing/dynamodb-expressions.ts';
import { itemBytes, updatedBytes } from '../../../shared/testing/in-memory-dynamodb/values.ts';
import { InMemoryDynamoDb, type LandedWrite, leaseqTables } from '../../../shared/testing/index.ts';

const LEDGER = 'app-ledger';

function memory(landed: LandedWrite[] = []): InMemoryDynamoDb {
  return new InMemoryDynamoDb({
    tables: leaseqTables({
      jobs: 'app-jobs',
      app: { [LEDGER]: defineTable('ledger', { partitionKey: 'account' }) },
    }),
    onWrite: (write) => landed.push(write),
  });
}

describe('Class: InMemoryDynamoDb', () => {
  describe('Option: onWrite', () => {
    it('is told of a write that landed, also when its answer is lost, and not of a refused one', async () => {
      // Prepare
      const landed: LandedWrite[] = [];
      const doc = memory(landed);
      doc.faults.loseAnswer('credit');
      const put = { TableName: LEDGER, Item: { account: 'a', balance: 1 } };

      // Act
      await expect(doc.send(new PutCommand(put), { leaseqOperation: 'credit' })).rejects.toThrow();
      await expect(
        doc.send(new PutCommand({ ...put, ConditionExpression: 'attribute_not_exists(account)' })),
      ).rejects.toThrow();
      const effect = { Put: { TableName: LEDGER, Item: { account: 'b', balance: 2 } } };
      const check = {
        ConditionCheck: {
          TableName: LEDGER,
          Key: { account: 'a' },
          ConditionExpression: 'balance = :one',
          ExpressionAttributeValues: { ':one': 1 },
        },
      };
      await doc.send(new TransactWriteCommand({ TransactItems: [check, effect] }), {
        leaseqOperation: 'commit',
      });

      // Assess
      expect(landed.map((w) => [w.operation, w.command, w.writes.length])).toEqual([
        ['credit', 'PutCommand', 1],
        ['commit', 'TransactWriteCommand', 2],
      ]);
      expect(landed[0]?.writes[0]?.next).toEqual({ account: 'a', balance: 1 });
      // The transaction's actions are the caller's own objects.
      expect((landed[1]?.input.TransactItems as unknown[] | undefined)?.[1]).toBe(effect);
    });
  });

  describe('Option: onWrite, with a fault rule pending', () => {
    it("hands over the caller's own actions though the request is copied while a rule waits", async () => {
      // Prepare: a rule pending on another operation, and one that delays this very transaction
      const landed: LandedWrite[] = [];
      const doc = memory(landed);
      doc.faults.failNext('renew');
      doc.faults.delayNext('commit', 5);
      const effect = { Put: { TableName: LEDGER, Item: { account: 'b', balance: 2 } } };
      const put = { Put: { TableName: LEDGER, Item: { account: 'c', balance: 3 } } };

      // Act
      await doc.send(new TransactWriteCommand({ TransactItems: [put, effect] }), {
        leaseqOperation: 'commit',
      });

      // Assess: the model tells a commit by these objects (test/model/harness.ts CommittedEffects)
      const items = landed[0]?.input.TransactItems as unknown[] | undefined;
      expect(items?.[0]).toBe(put);
      expect(items?.[1]).toBe(effect);
      expect(doc.item(LEDGER, { account: 'b' })).toEqual({ account: 'b', balance: 2 });
    });
  });

  describe('Method: item', () => {
    it('reads one item outside any request: a copy, no faults, no tally', async () => {
      // Prepare
      const doc = memory();
      doc.seed(LEDGER, { account: 'a', tags: ['x'] });
      doc.faults.failNext('*');

      // Act
      const item = doc.item(LEDGER, { account: 'a' });
      (item?.tags as string[] | undefined)?.push('y');

      // Assess
      expect(doc.item(LEDGER, { account: 'a' })).toEqual({ account: 'a', tags: ['x'] });
      expect(doc.item(LEDGER, { account: 'b' })).toBeUndefined();
      expect(doc.faults.pending).toBe(1);
      expect(doc.tally()).toEqual({});
    });
  });

  describe('Method: send (UpdateCommand)', () => {
    it('leaves the old item as it was when an update writes into a nested map and list', async () => {
      // Prepare
      const doc = memory();
      doc.seed(LEDGER, { account: 'a', meta: { n: 1, deep: { k: 'v' } }, entries: [{ i: 0 }, { i: 1 }] });

      // Act
      const out = await doc.send(
        new UpdateCommand({
          TableName: LEDGER,
          Key: { account: 'a' },
          UpdateExpression: 'SET meta.deep.k = :w, entries[1].i = :two REMOVE meta.n',
          ExpressionAttributeValues: { ':w': 'w', ':two': 2 },
          ReturnValues: 'ALL_OLD',
        }),
      );
      const now = await doc.send(new GetCommand({ TableName: LEDGER, Key: { account: 'a' } }));

      // Assess
      expect(out.Attributes).toEqual({
        account: 'a',
        meta: { n: 1, deep: { k: 'v' } },
        entries: [{ i: 0 }, { i: 1 }],
      });
      expect(now.Item).toEqual({ account: 'a', meta: { deep: { k: 'w' } }, entries: [{ i: 0 }, { i: 2 }] });
    });
  });

  describe('Function: updatedBytes', () => {
    it('counts an updated item as itemBytes does, from the old size and the changed attributes', () => {
      // Prepare
      const old = { dedupKey: 'k', version: 9, history: [{ e: 'claimed', at: 1 }], note: 'é', gone: true };
      const update = parseUpdate(
        'SET version = version + :one, history[1] = :e, note = :n, added = :a REMOVE gone',
        {
          values: { ':one': 1, ':e': { e: 'released', at: 2 }, ':n': 'ünïcode', ':a': [1, 'two', null] },
        },
      );

      // Act
      const next = update(old);

      // Assess
      expect(updatedBytes(old, next)).toBe(itemBytes(next));
      expect(itemBytes(old)).toBe(
        itemBytes({ dedupKey: 'k', version: 9, history: [{ e: 'claimed', at: 1 }], note: 'é', gone: true }),
      );
    });
  });
});
