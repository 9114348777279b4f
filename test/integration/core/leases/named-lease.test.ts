import { DeleteCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAwsClients, destroyAwsClients } from '../../../../shared/aws/clients.ts';
import { FaultInjector } from '../../../../shared/aws/fault-injector.ts';
import { DynamoDbLeaseStore } from '../../../../shared/core/adapters/dynamodb-lease-store.ts';
import type { LeaseStore } from '../../../../shared/core/contract/lease-store.ts';
import { withLease } from '../../../../shared/core/leases/named-lease.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { LeaseBusyError, LeaseLostError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import {
  type CoreEnv,
  coreEnv,
  leaseStore,
  makeWorker,
  receiveAll,
  sendJob,
  sleep,
} from '../../../support/core-fixture.ts';
import { testAwsConfig, uniqueName } from '../../../support/env.ts';

let env: CoreEnv;
let store: DynamoDbLeaseStore;

beforeAll(async () => {
  env = await coreEnv('lease');
  store = leaseStore(env);
});
afterAll(() => env?.close());

describe('Function: withLease', () => {
  it('never lets 10 concurrent contenders overlap, and hands out strictly increasing tokens', async () => {
    // Prepare
    const key = `account#${uniqueName('x')}`;
    let inside = 0;
    let maxInside = 0;
    const tokens: number[] = [];

    // Act
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        withLease(
          key,
          async ({ token }) => {
            inside += 1;
            maxInside = Math.max(maxInside, inside);
            tokens.push(token);
            await sleep(40);
            inside -= 1;
          },
          { store, owner: `contender-${i}`, leaseMs: 3000, waitMs: 30_000, pollMs: 20 },
        ),
      ),
    );

    // Assess
    expect(maxInside).toBe(1);
    expect(tokens).toHaveLength(10);
    for (let i = 1; i < tokens.length; i++)
      expect(tokens[i]).toBeGreaterThan(tokens[i - 1] ?? Number.POSITIVE_INFINITY);
    const item = await store.get(key);
    expect(item?.owner).toBeUndefined();
    expect(item?.token).toBe(tokens.at(-1));
  });

  it('keeps tokens increasing after the lease item is deleted (as TTL would)', async () => {
    const key = `account#${uniqueName('y')}`;
    const first = await withLease(key, async ({ token }) => token, { store, owner: 'a' });
    await env.clients.doc.send(new DeleteCommand({ TableName: env.leasesTable, Key: { leaseKey: key } }));
    const second = await withLease(key, async ({ token }) => token, { store, owner: 'b' });
    expect(second).toBeGreaterThan(first);
  });

  it('renews a long holder past its lease length, and others wait then give up with LeaseBusyError', async () => {
    const key = `account#${uniqueName('z')}`;
    const holder = withLease(
      key,
      async ({ signal }) => {
        await sleep(2500);
        return signal.aborted;
      },
      // The shortest lease there is (DEFAULTS.minLeaseMs): held 2.5 times as long by its renewals.
      { store, owner: 'holder', leaseMs: 1000 },
    );
    await sleep(100);
    await expect(
      withLease(key, async () => 'never', { store, owner: 'waiter', waitMs: 1500 }),
    ).rejects.toBeInstanceOf(LeaseBusyError);
    expect(await holder).toBe(false);
  });

  it('throws LeaseLostError instead of a result when the lease was lost while the work ran', async () => {
    const key = `account#${uniqueName('lost')}`;
    const work = withLease(
      key,
      async ({ signal }) => {
        // An operator (or TTL) removes the lease item under the holder: its next renewal is refused.
        await env.clients.doc.send(new DeleteCommand({ TableName: env.leasesTable, Key: { leaseKey: key } }));
        await sleep(1500);
        return signal.aborted;
      },
      { store, owner: 'holder', leaseMs: 1000 },
    );
    await expect(work).rejects.toBeInstanceOf(LeaseLostError);
  });

  it('takes over from a holder that died (its lease simply expires)', async () => {
    const key = `account#${uniqueName('dead')}`;
    const dead = await store.tryAcquire(key, 'crashed', 300, Date.now());
    expect(dead.acquired).toBe(true);
    const token = await withLease(key, async (h) => h.token, { store, owner: 'next', waitMs: 5000 });
    expect(dead.acquired && token).toBeGreaterThan(dead.acquired ? dead.lease.token : 0);
  });
});

/** The real lease table, with every acquire's answer held back `delayMs` after its write landed. */
function slowAcquireAnswers(inner: LeaseStore, delayMs: number): LeaseStore {
  return {
    tryAcquire: async (...args) => {
      const answer = await inner.tryAcquire(...args);
      await sleep(delayMs);
      return answer;
    },
    renew: (...args) => inner.renew(...args),
    release: (...args) => inner.release(...args),
    get: (key) => inner.get(key),
    fence: (lease) => inner.fence(lease),
  };
}

describe('Named leases of jobs, and lost answers (real lease table)', () => {
  it('a job aborted at its deadline while its acquire is in flight leaves the lease free for its retry', async () => {
    // Prepare
    const key = `account#${uniqueName('abort')}`;
    const dedupKey = uniqueName('job');
    const locked = defineJob({
      type: 'test.locked',
      payload: z.object({}),
      run: (ctx) => ctx.withLease(key, async () => undefined, { leaseMs: 1000, waitMs: 1500 }),
    });
    const registry = JobRegistry.of([locked]);
    await sendJob(env, { dedupKey, type: 'test.locked', payload: {} });
    const slow = makeWorker(env, registry, { leases: slowAcquireAnswers(store, 2500) });
    const [message] = await receiveAll(env, env.queueUrl, 1);
    if (!message) throw new Error('no message');

    // Act: the acquire lands, its answer arrives 2.5 s later, after the 1.5 s deadline ended the job.
    const first = await slow.processor.process(toSqsRecord(message, env.queueArn, env.region), {
      deadline: Date.now() + 1500,
    });
    await sleep(2500);
    const afterAnswer = await store.get(key);
    await sleep(900);
    const later = await store.get(key);

    // Assess: released as the answer came, and never renewed after.
    expect(first.action).not.toBe('completed');
    expect(afterAnswer?.owner).toBeUndefined();
    expect(later).toEqual(afterAnswer);
    const retry = makeWorker(env, registry);
    let outcome: string | undefined;
    for (let i = 0; i < 10 && outcome === undefined; i++) {
      const [again] = await receiveAll(env, env.queueUrl, 30);
      if (again)
        outcome = (await retry.processor.process(toSqsRecord(again, env.queueArn, env.region))).action;
    }
    expect(outcome).toBe('completed');
  });

  it.each([
    ['the SDK retries the same request', 3],
    ['holdLease tries again', 1],
  ])('recognises its own acquire whose answer was lost when %s', async (_, sdkAttempts) => {
    // Prepare: the first lease write lands and its answer is lost (a 503 after the write).
    const key = `account#${uniqueName('lost')}`;
    const lossy = createAwsClients({
      ...testAwsConfig(),
      region: env.region,
      maxAttempts: sdkAttempts,
    });
    const faults = new FaultInjector()
      .attach(lossy)
      .fail({ service: 'DynamoDB', command: 'UpdateItem', times: 1, when: 'after' });
    const lossyStore = new DynamoDbLeaseStore({ client: lossy.doc, tableName: env.leasesTable });

    try {
      // Act
      const token = await withLease(key, async (held) => held.token, {
        store: lossyStore,
        owner: 'holder',
        waitMs: 1000,
      });

      // Assess: the lease this call wrote is the one it used, and released.
      expect(faults.injected.get('DynamoDB.UpdateItem')).toBe(1);
      const item = await store.get(key);
      expect(item?.token).toBe(token);
      expect(item?.owner).toBeUndefined();
    } finally {
      destroyAwsClients(lossy);
    }
  });
});
