import { BatchGetCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoDbLeaseStore } from '../../../../shared/core/adapters/dynamodb-lease-store.ts';
import { StoreUnavailableError } from '../../../../shared/errors.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../../shared/testing/index.ts';

const TABLE = 'app-leases';

/** A leases table holding the slot items `slot#0`..`slot#(n-1)`, and its store. */
function setup(n: number) {
  const doc = new InMemoryDynamoDb({ tables: leaseqTables({ jobs: 'app-jobs', leases: TABLE }) });
  for (let i = 0; i < n; i++) {
    doc.seed(TABLE, { leaseKey: `slot#${i}`, owner: `w${i}`, token: i + 1, leaseUntil: 9e12 });
  }
  return { doc, store: new DynamoDbLeaseStore({ client: doc, tableName: TABLE }) };
}

const keys = (n: number) => Array.from({ length: n }, (_, i) => `slot#${i}`);

describe('Fault: leaveUnprocessed (InMemoryDynamoDb)', () => {
  it('answers a BatchGet with the keys past `served` in UnprocessedKeys, and their items left out', async () => {
    // Prepare
    const { doc } = setup(4);
    doc.faults.leaveUnprocessed({ command: 'BatchGetCommand' }, { served: 1 });

    // Act
    const out = await doc.send(
      new BatchGetCommand({ RequestItems: { [TABLE]: { Keys: keys(4).map((leaseKey) => ({ leaseKey })) } } }),
    );

    // Assess: one served, three unprocessed, as a throttled table answers.
    expect(out.Responses?.[TABLE]?.map((i: Record<string, unknown>) => i.leaseKey)).toEqual(['slot#0']);
    expect(out.UnprocessedKeys?.[TABLE]?.Keys).toEqual([
      { leaseKey: 'slot#1' },
      { leaseKey: 'slot#2' },
      { leaseKey: 'slot#3' },
    ]);
  });
});

describe('Class: DynamoDbLeaseStore', () => {
  describe('Method: getMany', () => {
    it('reads the keys a throttled BatchGet left unprocessed again, until every item is read', async () => {
      // Prepare: 150 slots (two batches); the first three answers serve a few keys each.
      const { doc, store } = setup(150);
      doc.faults.leaveUnprocessed({ command: 'BatchGetCommand' }, { served: 7, times: 3 });

      // Act
      const items = await store.getMany(keys(150));

      // Assess: every lease, once.
      expect(items.map((i) => i.leaseKey).sort()).toEqual(keys(150).sort());
    });

    it('gives up after its tries with a StoreUnavailableError that says how many keys were left', async () => {
      // Prepare: every answer leaves all but one key unprocessed.
      const { doc, store } = setup(5);
      doc.faults.leaveUnprocessed({ command: 'BatchGetCommand' }, { served: 0, times: 100 });

      // Act
      const error = await store.getMany(keys(5)).then(
        () => undefined,
        (e: unknown) => e,
      );

      // Assess
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toMatch(/5 of 5 keys left unprocessed/);
    });
  });
});
