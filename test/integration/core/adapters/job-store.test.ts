import { DeleteCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import type { ClaimRequest, JobLease } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { decideRefusal } from '../../../../shared/core/decisions/claim-decision.ts';
import { versionedPut } from '../../../../shared/core/decisions/optimistic.ts';
import { Heartbeat } from '../../../../shared/core/leases/heartbeat.ts';
import { LeaseLostError } from '../../../../shared/errors.ts';
import { type CoreEnv, coreEnv, getBalance, sleep } from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

let env: CoreEnv;
let store: DynamoDbJobStore;

beforeAll(async () => {
  env = await coreEnv('store');
  store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
});
afterAll(() => env?.close());

function request(dedupKey: string, owner: string, messageId: string, leaseMs = 5000): ClaimRequest {
  return {
    dedupKey,
    owner,
    messageId,
    type: 'test',
    createdAt: new Date().toISOString(),
    leaseMs,
    now: Date.now(),
  };
}

async function claimOrFail(req: ClaimRequest): Promise<JobLease> {
  const result = await store.claim(req);
  if (!result.claimed) throw new Error(`expected a claim, item is ${JSON.stringify(result.existing)}`);
  return result.lease;
}

describe('Class: DynamoDbJobStore', () => {
  describe('Method: claim', () => {
    it('lets exactly one of 20 concurrent claims win; the others get the refusal docs/protocol.md names', async () => {
      // Prepare: half the claimers carry the same message id (a redelivery), half distinct copies.
      const key = uniqueName('k');
      const claims = Array.from({ length: 20 }, (_, i) =>
        request(key, `worker-${i}`, i % 2 === 0 ? 'm-shared' : `m-${i}`),
      );

      // Act
      const results = await Promise.all(claims.map((c) => store.claim(c)));

      // Assess
      const winners = results.flatMap((r, i) => (r.claimed ? [{ r, i }] : []));
      expect(winners).toHaveLength(1);
      const winner = claims[winners[0]?.i ?? -1];
      const item = await store.get(key);
      expect(item?.owner).toBe(winner?.owner);
      expect(item?.attempts).toBe(1);
      const decisions = results.flatMap((r, i) =>
        r.claimed ? [] : [{ d: decideRefusal(r.existing, claims[i]?.messageId ?? '', Date.now()), i }],
      );
      for (const { d, i } of decisions) {
        const sameMessage = claims[i]?.messageId === winner?.messageId;
        expect(d.kind).toBe(sameMessage ? 'own-message-early' : 'duplicate-racing');
      }
    });

    it('refuses claims on COMPLETED and DEAD items with the old item attached', async () => {
      const done = uniqueName('done');
      const lease = await claimOrFail(request(done, 'a', 'm1'));
      await store.complete(lease, { ok: true });
      const again = await store.claim(request(done, 'b', 'm2'));
      expect(again.claimed).toBe(false);
      if (!again.claimed)
        expect(decideRefusal(again.existing, 'm2', Date.now()).kind).toBe('duplicate-completed');

      const dead = uniqueName('dead');
      const deadLease = await claimOrFail(request(dead, 'a', 'm1'));
      await store.markDead(deadLease, { message: 'boom', errorClass: 'Error' });
      const copy = await store.claim(request(dead, 'b', 'm3'));
      expect(copy.claimed).toBe(false);
      if (!copy.claimed) expect(decideRefusal(copy.existing, 'm3', Date.now()).kind).toBe('dead-copy');

      // Both records outlive the DLQ's 14-day retention, so a late redrive still finds the job's record.
      const dlqRetention = Math.floor(Date.now() / 1000) + 14 * 24 * 3600;
      expect((await store.get(done))?.expiresAt).toBeGreaterThan(dlqRetention);
      expect((await store.get(dead))?.expiresAt).toBeGreaterThan(dlqRetention);
    });
  });

  describe('Lease expiry and fencing', () => {
    it('hands an expired job to a new owner with token + 1 and the checkpoint; the old owner is fenced out', async () => {
      // Prepare: A claims with a short lease and checkpoints step one.
      const key = uniqueName('takeover');
      const a = await claimOrFail(request(key, 'worker-a', 'm1', 600));
      await store.checkpoint(a, { step: 'debit', done: ['debit'], data: { debit: 5 }, at: Date.now() });
      await sleep(800);

      // Act: B's claim finds the expired lease.
      const result = await store.claim(request(key, 'worker-b', 'm1', 10_000));

      // Assess
      expect(result.claimed).toBe(true);
      if (!result.claimed) return;
      expect(result.kind).toBe('takeover');
      expect(result.lease.token).toBe(a.token + 1);
      expect(result.lease.attempts).toBe(2);
      expect(result.lease.checkpoint?.done).toEqual(['debit']);
      await expect(store.renew(a, 5000, Date.now())).rejects.toBeInstanceOf(LeaseLostError);
      await expect(
        store.checkpoint(a, { step: 'credit', done: ['debit', 'credit'], at: Date.now() }),
      ).rejects.toBeInstanceOf(LeaseLostError);
      await expect(store.complete(a, 'stale')).rejects.toBeInstanceOf(LeaseLostError);
      await expect(
        store.release(a, Date.now(), { message: 'x', errorClass: 'Error' }),
      ).rejects.toBeInstanceOf(LeaseLostError);
      const item = await store.get(key);
      expect(item).toMatchObject({ owner: 'worker-b', token: a.token + 1, status: JobStatus.InProgress });
      expect(item?.checkpoint?.done).toEqual(['debit']);
    });

    it("aborts the old owner's signal within one heartbeat of losing the lease", async () => {
      const key = uniqueName('abort');
      const a = await claimOrFail(request(key, 'worker-a', 'm1', 400));
      await sleep(500);
      await claimOrFail(request(key, 'worker-b', 'm1', 10_000));
      const intervalMs = 150;
      const started = Date.now();
      const beat = new Heartbeat({
        intervalMs,
        leaseUntil: a.leaseUntil + 10_000,
        target: {
          renew: async () => {
            await store.renew(a, 400, Date.now());
            return a.leaseUntil;
          },
        },
      }).start();
      // One beat plus one store round trip; the bound is generous because CI machines are noisy.
      const bound = intervalMs + 2000;
      await Promise.race([
        new Promise<void>((resolve) =>
          beat.signal.addEventListener('abort', () => resolve(), { once: true }),
        ),
        sleep(bound),
      ]);
      const tookMs = Date.now() - started;
      await beat.stop();
      expect(beat.signal.aborted).toBe(true);
      expect(beat.signal.reason).toBeInstanceOf(LeaseLostError);
      expect(tookMs).toBeLessThanOrEqual(bound);
    });

    it('commits nothing when a fenced completion is refused: neither the effect nor the completion', async () => {
      const key = uniqueName('atomic');
      const account = uniqueName('acct');
      const a = await claimOrFail(request(key, 'worker-a', 'm1', 300));
      await sleep(400);
      const b = await claimOrFail(request(key, 'worker-b', 'm1', 10_000));

      const effect = versionedPut({
        tableName: env.ledgerTable,
        key: { account },
        seenVersion: undefined,
        item: { balance: 100 },
      });
      await expect(store.complete(a, 'late', [effect])).rejects.toBeInstanceOf(LeaseLostError);

      expect(await getBalance(env, account)).toBeUndefined();
      const item = await store.get(key);
      expect(item?.status).toBe(JobStatus.InProgress);
      expect(item?.owner).toBe('worker-b');

      // The rightful owner's commit goes through, atomically with its effect.
      expect(await store.complete(b, 'ok', [effect])).toEqual({ ok: true });
      expect((await getBalance(env, account))?.balance).toBe(100);
      expect((await store.get(key))?.status).toBe(JobStatus.Completed);
    });

    it('reports an effect conflict (optimistic version) without writing the completion', async () => {
      const key = uniqueName('conflict');
      const account = uniqueName('acct');
      const lease = await claimOrFail(request(key, 'worker-a', 'm1'));
      const stale = versionedPut({
        tableName: env.ledgerTable,
        key: { account },
        seenVersion: 3,
        item: { balance: 1 },
      });
      expect(await store.complete(lease, 'x', [stale])).toEqual({
        ok: false,
        reason: 'effect-conflict',
        index: 0,
      });
      expect((await store.get(key))?.status).toBe(JobStatus.InProgress);
      expect(await getBalance(env, account)).toBeUndefined();
    });

    it('keeps fencing tokens growing after the item was deleted (TTL)', async () => {
      const key = uniqueName('ttl');
      const first = await claimOrFail(request(key, 'a', 'm1'));
      await store.complete(first, null);
      await env.clients.doc.send(new DeleteCommand({ TableName: env.jobsTable, Key: { dedupKey: key } }));
      await sleep(5);
      const second = await claimOrFail(request(key, 'b', 'm2'));
      expect(second.token).toBeGreaterThan(first.token);
    });
  });
});
