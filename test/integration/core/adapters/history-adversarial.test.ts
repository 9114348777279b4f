// The job history's writes against the emulator's DynamoDB, where they could break the protocol: an item
// near 400 KB (an event must never make a write fail that fit without it), and the best-effort writes.
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { queryProblemShard } from '../../../../shared/core/adapters/dynamodb-problems.ts';
import { HISTORY_MAX, problemShard } from '../../../../shared/core/contract/job-history.ts';
import type { Checkpoint } from '../../../../shared/core/contract/job-item.ts';
import type { ClaimRequest, JobLease } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { StoreRefusedError } from '../../../../shared/errors.ts';
import { type CoreEnv, coreEnv, eventually, sleep } from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

let env: CoreEnv;
let store: DynamoDbJobStore;

beforeAll(async () => {
  env = await coreEnv('hist-adv');
  store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
});
afterAll(() => env?.close());

let messages = 0;
function request(dedupKey: string, owner: string, leaseMs: number): ClaimRequest {
  // Message ids of one length: a claim must not change the item's size.
  messages += 1;
  return {
    dedupKey,
    owner,
    messageId: `m-${String(messages).padStart(8, '0')}`,
    type: 'test.history',
    createdAt: new Date().toISOString(),
    leaseMs,
    now: Date.now(),
  };
}

async function claimed(req: ClaimRequest): Promise<JobLease> {
  const result = await store.claim(req);
  if (!result.claimed) throw new Error(`expected a claim, item is ${JSON.stringify(result.existing)}`);
  return result.lease;
}

const cp = (n: number): Checkpoint => ({ step: 's', done: ['s'], at: Date.now(), data: 'c'.repeat(n) });

/**
 * Fills the lease's item with a checkpoint to `slack` bytes under what DynamoDB takes (found by trying:
 * only the store knows its count), so a write adding more than `slack` bytes is refused for size.
 */
async function fillTo(lease: JobLease, slack: number): Promise<void> {
  let lo = 390 * 1024; // fits
  let hi = 400 * 1024; // does not
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    try {
      await store.checkpoint(lease, cp(mid));
      lo = mid;
    } catch (error) {
      if (!(error instanceof StoreRefusedError)) throw error;
      hi = mid;
    }
  }
  await store.checkpoint(lease, cp(lo - slack));
}

describe('History events on an item near 400 KB', () => {
  // A takeover's event waits in the lease for its next write; on a full item it must not make that
  // write fail for size, where it fit before the history (a renewal adds nothing, the completion ~25 B).
  const firstWrites: [string, (b: JobLease) => Promise<unknown>][] = [
    ['renew', (b) => store.renew(b, 30_000, Date.now())],
    ['checkpoint', (b) => store.checkpoint(b, { ...(b.checkpoint as Checkpoint), at: Date.now() })],
    ['complete', (b) => store.complete(b, null)],
  ];
  it.each(firstWrites)(
    'a takeover of a full item: its %s fits, the pending event is left out',
    async (name, write) => {
      // Prepare: w-a fills the item to 100 B under 400 KB and dies; w-b takes over (a takeover event pending).
      const key = uniqueName('full-take');
      const a = await claimed(request(key, 'w-a', 1500));
      await fillTo(a, 100);
      await sleep(Math.max(0, a.leaseUntil - Date.now() + 50));
      const b = await claimed(request(key, 'w-b', 30_000));
      expect(b.pendingHistory?.map((e) => e.e)).toEqual(['takeover']);

      // Act
      const first = await write(b);
      const done = name === 'complete' ? first : await store.complete(b, null);

      // Assess: the job completes; the event that did not fit is gone, not carried to every later write.
      expect(done).toEqual({ ok: true });
      const item = await store.get(key);
      expect(item?.status).toBe(JobStatus.Completed);
      expect(item?.history).toBeUndefined();
      expect(item?.problemShard).toBe(problemShard(key));
      expect(b.pendingHistory ?? []).toEqual([]);
    },
  );
});

describe('A redrive of a dead job on an item near 400 KB', () => {
  it('makes the job runnable again (the redrive event is left out when it does not fit)', async () => {
    // Prepare: the job fills its item to 60 B under 400 KB, then is marked DEAD (~30 B more: its error
    // text gives way, deadAt). A redrive before the history never grew the item.
    const key = uniqueName('full-dead');
    const a = await claimed(request(key, 'w-a', 30_000));
    await fillTo(a, 60);
    await store.markDead(a, { message: 'x', errorClass: 'Error', reason: 'permanent' });
    expect((await store.get(key))?.status).toBe(JobStatus.Dead);

    // Act
    const redriveAt = Date.now();
    const redriven = await store.resetForRedrive(key, redriveAt, redriveAt, { by: 'ops@host' });

    // Assess: runnable, its checkpoint kept, its problems index keys set.
    expect(redriven).toBe(true);
    const item = await store.get(key);
    expect(item).toMatchObject({ status: JobStatus.RetryWait, attempts: 0 });
    expect(item?.checkpoint?.step).toBe('s');
    expect(item?.deadAt).toBeUndefined();
    expect(item?.problemShard).toBe(problemShard(key));
    expect(item?.problemAt).toBe(redriveAt);
  });
});

describe('The problems index of a give-up on an item near 400 KB', () => {
  // The index keys travelled with the history write: a dead marking (or a release) that left its event
  // out for size left the keys out too, and `dlq list` and `jobs --status DEAD` (which read the index)
  // missed the job.
  const giveUps: [string, JobStatus, (a: JobLease) => Promise<void>][] = [
    [
      'dead marking',
      JobStatus.Dead,
      (a) => store.markDead(a, { message: 'x'.repeat(200), errorClass: 'Error', reason: 'permanent' }),
    ],
    [
      'release',
      JobStatus.RetryWait,
      (a) => store.release(a, Date.now() + 60_000, { message: 'x'.repeat(200), errorClass: 'Error' }),
    ],
  ];
  it.each(giveUps)('a %s whose event does not fit still enters the index', async (_name, status, giveUp) => {
    // Prepare: the job fills its item to 60 B under 400 KB: no room for a `dead` or `failed` event.
    const key = uniqueName('full-index');
    const a = await claimed(request(key, 'w-a', 30_000));
    await fillTo(a, 60);

    // Act
    await giveUp(a);

    // Assess: the event was left out, the index keys were not; the index (eventually consistent) lists it.
    const item = await store.get(key);
    expect(item?.status).toBe(status);
    expect(item?.history).toBeUndefined();
    expect(item?.problemShard).toBe(problemShard(key));
    expect(typeof item?.problemAt).toBe('number');
    const listed = await eventually(async () => {
      const page = await queryProblemShard(env.clients.doc, env.jobsTable, {
        shard: problemShard(key),
        since: (item?.problemAt ?? 0) - 1,
        pageSize: 100,
      });
      return page.items.some((entry) => entry.dedupKey === key && entry.status === status);
    });
    expect(listed).toBe(true);
  });
});

describe('Two writers on a full history (issue 31, reasoned case)', () => {
  /** A job whose history holds `events` `failed` events (full by default), released and claimable. */
  async function fullHistory(key: string, events = HISTORY_MAX): Promise<void> {
    for (let i = 0; i < events; i++) {
      const lease = await claimed(request(key, 'w-fill', 30_000));
      await store.release(lease, Date.now() - 1, { message: `attempt ${i}`, errorClass: 'Error' });
    }
    expect((await store.get(key))?.history).toHaveLength(events);
  }

  /**
   * A store whose first refused request (`after: 'refusal'`), or first read (`'read'`), runs `between`
   * before it is answered: the other writer lands between this store's two requests.
   */
  function storeRacing(between: () => Promise<unknown>, after: 'refusal' | 'read'): DynamoDbJobStore {
    let raced = false;
    const race = async () => {
      if (raced) return;
      raced = true;
      await between();
    };
    const client = {
      send: async (command: never, options: never) => {
        let out: unknown;
        try {
          out = await env.clients.doc.send(command, options);
        } catch (error) {
          if (after === 'refusal' && error instanceof ConditionalCheckFailedException) await race();
          throw error;
        }
        if (after === 'read' && (command as object) instanceof GetCommand) await race();
        return out;
      },
    } as unknown as DynamoDBDocumentClient;
    return new DynamoDbJobStore({ client, tableName: env.jobsTable });
  }

  it("an operator's cancel keeps the event a running holder appended between its two requests", async () => {
    // Prepare: a full history; w-b takes over from w-a (a takeover event pending in its lease).
    const key = uniqueName('race-cancel');
    await fullHistory(key);
    const a = await claimed(request(key, 'w-a', 1000));
    const later = a.leaseUntil + 1000;
    const b = await claimed({ ...request(key, 'w-b', 30_000), now: later });
    expect(b.pendingHistory?.map((e) => e.e)).toEqual(['takeover']);

    // Act: the cancel's append is refused (full); before its trimmed replace lands, w-b's heartbeat
    // writes the takeover event.
    const operator = storeRacing(() => store.renew(b, 30_000, later + 10), 'refusal');
    const result = await operator.cancel(key, { by: 'ops@host', now: Date.now() });

    // Assess: cancelled, and both events kept within the bound.
    expect(result.outcome).toBe('cancelled');
    const history = (await store.get(key))?.history ?? [];
    expect(history.length).toBeLessThanOrEqual(HISTORY_MAX);
    expect(history.map((e) => e.e).slice(-2)).toEqual(['takeover', 'cancelled']);
  });

  it('a redrive keeps a dropped copy counted between its two requests', async () => {
    // Prepare: a full history ending in a `dropped` event, the job DEAD.
    const key = uniqueName('race-redrive');
    await fullHistory(key, HISTORY_MAX - 2);
    const a = await claimed(request(key, 'w-a', 30_000));
    await store.markDead(a, { message: 'x', errorClass: 'Error', reason: 'permanent' });
    const dead = await store.get(key);
    if (!dead) throw new Error('no item');
    await store.recordDroppedCopy(dead, 'm-copy-1', Date.now());
    const counted = await store.get(key);
    expect(counted?.history).toHaveLength(HISTORY_MAX);
    expect(counted?.history?.at(-1)).toMatchObject({ e: 'dropped', count: 1 });

    // Act: the redrive's append is refused (full); after it reads the item, before its trimmed replace
    // lands, a second copy is counted.
    const operator = storeRacing(async () => {
      if (counted) await store.recordDroppedCopy(counted, 'm-copy-2', Date.now());
    }, 'read');
    const redriven = await operator.resetForRedrive(key, Date.now(), Date.now(), { by: 'ops@host' });

    // Assess: redriven, and the second copy still counted.
    expect(redriven).toBe(true);
    const history = (await store.get(key))?.history ?? [];
    expect(history.length).toBeLessThanOrEqual(HISTORY_MAX);
    expect(history.at(-2)).toMatchObject({ e: 'dropped', count: 2 });
    expect(history.at(-1)).toMatchObject({ e: 'redrive' });
  });
});
