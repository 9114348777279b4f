// Conditional writes whose refusal the store cannot act on say what happened: a claim of one message's
// item (E13) that finds no item at all (TTL deleted it since it was read), and a cancel whose trimmed
// history kept being refused by writes in between. Neither may surface as a bare
// ConditionalCheckFailedException, which the worker logs as a permissions or table-name error.
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { HISTORY_MAX } from '../../../../shared/core/contract/job-history.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { StoreConflictError } from '../../../../shared/errors.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../../shared/testing/index.ts';

const TABLE = 'app-jobs';

function setup() {
  const doc = new InMemoryDynamoDb({ tables: leaseqTables({ jobs: TABLE, leases: 'app-leases' }) });
  return { doc, store: new DynamoDbJobStore({ client: doc, tableName: TABLE }) };
}

async function thrown(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe('Class: DynamoDbJobStore', () => {
  describe('Method: claim, only for the item of one message (onlyIfMessageId)', () => {
    it('with no item (TTL deleted it since it was read) throws a StoreConflictError saying so', async () => {
      // Prepare
      const { store } = setup();
      const now = Date.now();

      // Act
      const error = await thrown(
        store.claim({
          dedupKey: 'gone',
          owner: 'w1',
          messageId: 'm-1',
          type: 't',
          createdAt: new Date(now).toISOString(),
          leaseMs: 3000,
          now,
          onlyIfMessageId: 'm-1',
        }),
      );

      // Assess: retryable (the message is judged again), and it names what happened.
      expect(error).toBeInstanceOf(StoreConflictError);
      expect(error).toMatchObject({ retryable: true, operation: 'claim' });
      expect((error as Error).message).toMatch(/no job item under gone/);
    });
  });

  describe('Method: cancel', () => {
    it('whose trimmed history every try finds changed gives up with a StoreConflictError, nothing written', async () => {
      // Prepare: a running job with a full history; every cancel's write is refused as by a write in
      // between (the refusal returns the item, still full, at another version).
      const { doc, store } = setup();
      const now = Date.now();
      const full = {
        dedupKey: 'busy',
        status: JobStatus.InProgress,
        owner: 'w1',
        leaseUntil: now + 60_000,
        token: 5,
        attempts: 1,
        version: 9,
        messageId: 'm-1',
        type: 't',
        history: Array.from({ length: HISTORY_MAX }, (_, i) => ({ e: 'step', at: i, step: `s${i}` })),
      };
      doc.seed(TABLE, full);
      const refusal = () =>
        new ConditionalCheckFailedException({
          message: 'The conditional request failed',
          $metadata: { httpStatusCode: 400 },
          Item: marshall({ ...full, version: 10 }),
        });
      doc.faults.failNext('cancel', refusal, { times: 10 });

      // Act
      const error = await thrown(store.cancel('busy', { now, by: 'ops' }));

      // Assess
      expect(error).toBeInstanceOf(StoreConflictError);
      expect(error).toMatchObject({ retryable: true, operation: 'cancel' });
      expect((error as Error).message).toMatch(/kept changing .*\(4 tries\): not cancelled/);
      expect(doc.item(TABLE, { dedupKey: 'busy' })).toMatchObject({
        status: JobStatus.InProgress,
        version: 9,
      });
    });
  });
});
