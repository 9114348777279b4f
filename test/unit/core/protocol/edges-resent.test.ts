import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import type { ClaimRequest, JobLease } from '../../../../shared/core/contract/job-store.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../../shared/testing/index.ts';

// Every edge of the job store whose answer is lost and that the SDK sends again (the same request, refused
// now by its own write), on the in-memory DynamoDB with the real DynamoDbJobStore: each is recognised as
// its own write and answers what it did (docs/protocol.md, "Differences": isOwnClaim, isOwnWrite,
// isOwnFastCommit, isOwnCancel, the redrive's own reset and undo).

const TABLE = 'app-jobs';

function memory(): InMemoryDynamoDb {
  return new InMemoryDynamoDb({ latencyMs: 1, tables: leaseqTables({ jobs: TABLE, leases: 'app-leases' }) });
}

/**
 * `doc` whose next request named `operation` is sent twice, as the SDK does after a lost answer: the
 * first lands and its answer is dropped, the caller gets the second's.
 */
function resending(doc: InMemoryDynamoDb, operation: string, nth = 1): DynamoDBDocumentClient {
  let seen = 0;
  return new Proxy(doc, {
    get(target, prop, receiver) {
      if (prop !== 'send') return Reflect.get(target, prop, receiver);
      return async (command: unknown, options?: { leaseqOperation?: string }) => {
        const send = target.send.bind(target) as (c: unknown, o?: unknown) => Promise<unknown>;
        if (options?.leaseqOperation === operation && ++seen === nth) {
          await send(command, options).catch(() => undefined);
        }
        return send(command, options);
      };
    },
  }) as unknown as DynamoDBDocumentClient;
}

const now0 = Date.now();
const request = (over: Partial<ClaimRequest> = {}): ClaimRequest => ({
  dedupKey: 'job-1',
  owner: 'worker-a',
  messageId: 'm-1',
  type: 'unit',
  createdAt: new Date(now0).toISOString(),
  leaseMs: 60_000,
  now: Date.now(),
  ...over,
});

function item(doc: InMemoryDynamoDb, dedupKey = 'job-1'): JobItem {
  return doc.items(TABLE).find((i) => i.dedupKey === dedupKey) as unknown as JobItem;
}

async function leased(store: DynamoDbJobStore, over: Partial<ClaimRequest> = {}): Promise<JobLease> {
  const claimed = await store.claim(request(over));
  if (!claimed.claimed) throw new Error('expected a claim');
  return claimed.lease;
}

const tick = () => new Promise((r) => setTimeout(r, 2));

describe('a job store write sent again after a lost answer is its own', () => {
  it('a fresh claim', async () => {
    const doc = memory();
    const store = new DynamoDbJobStore({ client: resending(doc, 'claim'), tableName: TABLE });
    const out = await store.claim(request());
    expect(out).toMatchObject({ claimed: true, kind: 'fresh' });
    expect(out.claimed && out.lease.token).toBe(item(doc).token);
  });

  it('the claim of a refused payload’s own job (onlyIfMessageId)', async () => {
    const doc = memory();
    const plain = new DynamoDbJobStore({ client: doc, tableName: TABLE });
    const first = await leased(plain, { now: now0 - 120_000, leaseMs: 1_000 });
    await plain.release(first, Date.now() - 1, { message: 'x', errorClass: 'E' });
    const store = new DynamoDbJobStore({ client: resending(doc, 'claim'), tableName: TABLE });
    const out = await store.claim(request({ owner: 'worker-b', onlyIfMessageId: 'm-1' }));
    expect(out).toMatchObject({ claimed: true, lease: { owner: 'worker-b', attempts: 2 } });
  });

  it('the reset claim of a dead key past deadKeyUntil keeps its wasDeadAt', async () => {
    const doc = memory();
    const plain = new DynamoDbJobStore({ client: doc, tableName: TABLE });
    const first = await leased(plain, { now: now0 - 120_000, leaseMs: 1_000 });
    await plain.markDead(first, { message: 'boom', errorClass: 'E', deadKeyTtlSeconds: 0 });
    const deadAt = item(doc).deadAt as number;
    await new Promise((r) => setTimeout(r, 5));
    // The second 'claim' request is the reset's write (the first, refused, read the DEAD item).
    const store = new DynamoDbJobStore({ client: resending(doc, 'claim', 2), tableName: TABLE });
    const out = await store.claim(request({ messageId: 'm-fresh', owner: 'worker-b' }));
    expect(out).toMatchObject({ claimed: true, kind: 'fresh', wasDeadAt: deadAt });
  });

  it('a fast commit without effects', async () => {
    const doc = memory();
    const store = new DynamoDbJobStore({ client: resending(doc, 'claim-and-complete'), tableName: TABLE });
    const out = await store.claimAndComplete({ ...request(), maxAttempts: 3 }, { done: 1 });
    expect(out).toEqual({ ok: true });
  });

  for (const operation of ['checkpoint', 'complete', 'release', 'mark-dead', 'renew'] as const) {
    it(`a fenced ${operation}`, async () => {
      const doc = memory();
      const store = new DynamoDbJobStore({ client: resending(doc, operation), tableName: TABLE });
      const lease = await leased(store);
      await tick();
      if (operation === 'checkpoint') {
        const out = await store.checkpoint(lease, { step: 's', done: ['s'], at: Date.now() });
        expect(out.ok).toBe(true);
        await tick();
        expect((await store.complete(lease, 1)).ok).toBe(true);
      }
      if (operation === 'complete') expect((await store.complete(lease, 1)).ok).toBe(true);
      if (operation === 'release')
        await store.release(lease, Date.now() + 1_000, { message: 'x', errorClass: 'E' });
      if (operation === 'mark-dead') await store.markDead(lease, { message: 'x', errorClass: 'E' });
      if (operation === 'renew') await store.renew(lease, 60_000, Date.now() + 1_000);
      expect(item(doc).version).toBe(lease.version);
    });
  }

  it('a release that counts a conflict back', async () => {
    const doc = memory();
    const store = new DynamoDbJobStore({ client: resending(doc, 'release'), tableName: TABLE });
    const lease = await leased(store);
    await tick();
    await store.release(lease, Date.now() + 1_000, { message: 'x', errorClass: 'E' }, { conflict: true });
    expect(item(doc)).toMatchObject({ status: 'RETRY_WAIT', attempts: 0, conflicts: 1 });
  });

  it('the dead-letter fence', async () => {
    const doc = memory();
    const store = new DynamoDbJobStore({ client: resending(doc, 'renew'), tableName: TABLE });
    const lease = await leased(store);
    await store.renew(lease, 10_000, Date.now(), {
      deadLetter: { reason: 'max-attempts', errorMessage: 'x', errorClass: 'E' },
    });
    expect(item(doc)).toMatchObject({ deadReason: 'max-attempts' });
  });

  it('a cancel of a running job, of a waiting job and of no item', async () => {
    const doc = memory();
    const plain = new DynamoDbJobStore({ client: doc, tableName: TABLE });
    await leased(plain);
    const store = new DynamoDbJobStore({ client: resending(doc, 'cancel'), tableName: TABLE });
    expect(await store.cancel('job-1', { now: Date.now(), by: 'op' })).toMatchObject({
      outcome: 'cancelled',
      wasRunning: true,
    });
    const again = new DynamoDbJobStore({ client: resending(doc, 'cancel'), tableName: TABLE });
    expect(await again.cancel('job-2', { now: Date.now(), by: 'op' })).toEqual({ outcome: 'tombstone' });
  });

  it('a planned redrive reset, and its undo', async () => {
    const doc = memory();
    const plain = new DynamoDbJobStore({ client: doc, tableName: TABLE });
    const lease = await leased(plain);
    await plain.markDead(lease, { message: 'x', errorClass: 'E' });
    const before = item(doc);
    const now = Date.now();
    const store = new DynamoDbJobStore({ client: resending(doc, 'reset-for-redrive'), tableName: TABLE });
    expect(await store.resetForRedrive('job-1', now, now, { by: 'op' }, before.version)).toBe(true);
    const undo = new DynamoDbJobStore({ client: resending(doc, 'undo-redrive'), tableName: TABLE });
    expect(await undo.undoRedrive(before, before.version + 1, now + 1)).toBe(true);
    expect(item(doc)).toMatchObject({ status: 'DEAD', version: before.version + 2 });
  });
});

/** `doc` that runs `between` just before its `nth` request named `operation` (after the ones before it). */
function before(doc: InMemoryDynamoDb, operation: string, nth: number, between: () => void) {
  let seen = 0;
  return new Proxy(doc, {
    get(target, prop, receiver) {
      if (prop !== 'send') return Reflect.get(target, prop, receiver);
      return (command: unknown, options?: { leaseqOperation?: string }) => {
        if (options?.leaseqOperation === operation && ++seen === nth) between();
        return (target.send.bind(target) as (c: unknown, o?: unknown) => Promise<unknown>)(command, options);
      };
    },
  }) as unknown as DynamoDBDocumentClient;
}

const events = (n: number, at: number) =>
  Array.from({ length: n }, (_, i) => ({
    e: 'lease-lost' as const,
    at: at + i,
    attempt: 1,
    token: 1,
    why: 'x',
  }));

describe('where the edges meet', () => {
  it('a dead key past deadKeyUntil that TTL deletes between the refused claim and its reset is claimed fresh', async () => {
    const doc = memory();
    const plain = new DynamoDbJobStore({ client: doc, tableName: TABLE });
    const first = await leased(plain, { now: now0 - 120_000, leaseMs: 1_000 });
    await plain.markDead(first, { message: 'boom', errorClass: 'E', deadKeyTtlSeconds: 0 });
    await new Promise((r) => setTimeout(r, 5));
    const store = new DynamoDbJobStore({
      client: before(doc, 'claim', 2, () => {
        // TTL's sweep, late as DynamoDB's: the item's expiresAt long past.
        doc.seed(TABLE, { ...item(doc), expiresAt: 1 });
        expect(doc.expire()).toBe(1);
      }),
      tableName: TABLE,
    });
    const out = await store.claim(request({ messageId: 'm-fresh', owner: 'worker-b' }));
    expect(out).toMatchObject({ claimed: true, kind: 'fresh', lease: { owner: 'worker-b', attempts: 1 } });
  });

  it('a cancel of a full history whose trimmed write’s answer is lost', async () => {
    const doc = memory();
    const plain = new DynamoDbJobStore({ client: doc, tableName: TABLE });
    await leased(plain);
    doc.seed(TABLE, { ...item(doc), history: events(50, now0) });
    const store = new DynamoDbJobStore({ client: resending(doc, 'cancel', 2), tableName: TABLE });
    expect(await store.cancel('job-1', { now: Date.now(), by: 'op' })).toMatchObject({
      outcome: 'cancelled',
      wasRunning: true,
    });
    expect(item(doc).history).toHaveLength(50);
  });

  it('a planned redrive of a full history whose trimmed write’s answer is lost', async () => {
    const doc = memory();
    const plain = new DynamoDbJobStore({ client: doc, tableName: TABLE });
    const lease = await leased(plain);
    await plain.markDead(lease, { message: 'x', errorClass: 'E' });
    doc.seed(TABLE, { ...item(doc), history: events(50, now0) });
    const planned = item(doc).version;
    const now = Date.now();
    const store = new DynamoDbJobStore({ client: resending(doc, 'reset-for-redrive', 2), tableName: TABLE });
    expect(await store.resetForRedrive('job-1', now, now, { by: 'op' }, planned)).toBe(true);
    expect(item(doc)).toMatchObject({ status: 'RETRY_WAIT', version: planned + 1 });
  });
});

describe('a refusal with no item: the item went between the read and the write', () => {
  it('a cancel of a full history whose item TTL deletes before the trimmed write leaves a tombstone', async () => {
    const doc = memory();
    const plain = new DynamoDbJobStore({ client: doc, tableName: TABLE });
    await leased(plain);
    doc.seed(TABLE, { ...item(doc), history: events(50, now0) });
    const store = new DynamoDbJobStore({
      client: before(doc, 'cancel', 2, () => doc.remove(TABLE, { dedupKey: 'job-1' })),
      tableName: TABLE,
    });
    expect(await store.cancel('job-1', { now: Date.now(), by: 'op' })).toEqual({ outcome: 'tombstone' });
    expect(item(doc)).toMatchObject({ status: 'CANCELLED', history: [{ e: 'cancelled', by: 'op' }] });
  });
});
