// A limit's bounce re-sends a message under a new id (limit-bounce.ts); whatever asks "is this the job's
// own message?" must see the message it was first sent as, however often it was re-sent.
import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import type {
  ClaimRequest,
  ClaimResult,
  StoreCallOptions,
} from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import type { AnyJobDefinition } from '../../../../shared/core/model/job-definition.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { RESEND_AT_RECEIVES } from '../../../../shared/core/pipeline/limit-bounce.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

const schema = z.object({ tenant: z.string() });
const SLOT = 'slot:t.limited:k:A#0';

/** A store that counts leased claims (the fast path commits without one). */
class ClaimCountingStore extends DynamoDbJobStore {
  claims = 0;
  override async claim(req: ClaimRequest, options?: StoreCallOptions): Promise<ClaimResult> {
    this.claims += 1;
    return super.claim(req, options);
  }
}

function setup(definition: Partial<AnyJobDefinition> & { run: AnyJobDefinition['run'] }) {
  const job = defineJob({
    type: 't.limited',
    payload: schema,
    concurrency: { limit: 1, key: (p: { tenant: string }) => p.tenant },
    ...(definition as object),
  } as never) as AnyJobDefinition;
  const { store, leases } = memoryStores({ jobStore: (o) => new ClaimCountingStore(o) });
  // The queue's own clock, moved on to the next visible message (a bounce hides or delays it).
  let ahead = 0;
  const queueNow = () => Date.now() + ahead;
  const queue = new InMemoryQueue({ now: queueNow });
  const processor = new JobProcessor({
    store,
    queue,
    leases,
    registry: JobRegistry.of([job]),
    worker: 'w1',
    logger: new Logger({ logLevel: 'SILENT' }),
    leaseMs: 3000,
    maxAttempts: 1,
  });
  const send = (dedupKey: string) =>
    queue.send(
      JSON.stringify(makeEnvelope({ id: dedupKey, type: 't.limited', dedupKey, payload: { tenant: 'A' } })),
    );
  /** The only message of the queue, received (visibility 0) until it is at `receives`. */
  const receiveAt = (receives: number): SQSRecord => {
    for (;;) {
      const [record] = queue.receive(1, { visibilitySeconds: 0 });
      if (!record) {
        const next = queue.nextVisibleAt();
        if (next === undefined) throw new Error('no message in the queue');
        ahead += next - queueNow();
        continue;
      }
      if (Number(record.attributes.ApproximateReceiveCount) >= receives) return record;
    }
  };
  /** Bounces the job's message on its busy slot until a bounce re-sent it, `times` times. */
  const bounceResends = async (times: number) => {
    for (let i = 0; i < times; i++) {
      const before = queue.messages().map((m) => m.messageId);
      const outcome = await processor.process(receiveAt(RESEND_AT_RECEIVES));
      expect(outcome.action).toBe('resent');
      const after = queue.messages().map((m) => m.messageId);
      expect(after).toHaveLength(1);
      expect(after).not.toEqual(before);
    }
  };
  return { processor, store, queue, leases, send, receiveAt, bounceResends };
}

describe('Processor: a message re-sent by limit bounces keeps its identity', () => {
  it("is still the job's own message after 12 re-sends: hidden until its lease ends, never deleted as a copy", async () => {
    // Prepare: the job runs (its item names the message), and its slot is busy (a run left behind).
    const t = setup({ run: async () => ({ result: 'ok' }) });
    const first = t.send('own');
    const held = await t.store.claim({
      dedupKey: 'own',
      owner: 'w0',
      messageId: first,
      type: 't.limited',
      createdAt: new Date().toISOString(),
      leaseMs: 60_000,
      now: Date.now(),
    });
    expect(held.claimed).toBe(true);
    const slot = await t.leases.tryAcquire(SLOT, 'w0/run-left-behind', 60_000, Date.now());
    expect(slot.acquired).toBe(true);
    await t.bounceResends(12);
    if (slot.acquired) await t.leases.release(slot.lease);

    // Act: the message, once more back while the job's lease runs.
    const outcome = await t.processor.process(t.receiveAt(1));

    // Assess: kept (hidden) as the job's own message; the job still has it.
    expect(outcome.action).toBe('own-message-early');
    expect(t.queue.size).toBe(1);
  });

  it("does not reset a dead key for the dead job's own message re-sent by a bounce (deadKeyTtl passed)", async () => {
    // Prepare: the job runs under its message and holds its slot; the message comes back early, bounces on
    // that slot and is re-sent; then the job dies (deadKeyTtl 1 s) and the slot is free.
    let runs = 0;
    const t = setup({
      deadKeyTtl: 1,
      run: async () => {
        runs += 1;
        return { result: 'ok' };
      },
    });
    const first = t.send('dead');
    const held = await t.store.claim({
      dedupKey: 'dead',
      owner: 'w0',
      messageId: first,
      type: 't.limited',
      createdAt: new Date().toISOString(),
      leaseMs: 60_000,
      now: Date.now(),
    });
    const slot = await t.leases.tryAcquire(SLOT, 'w0/dead/run', 60_000, Date.now());
    await t.bounceResends(1);
    if (!held.claimed) throw new Error('expected the claim');
    await t.store.markDead(held.lease, {
      message: 'gave up',
      errorClass: 'PermanentJobError',
      deadKeyTtlSeconds: 1,
    });
    if (slot.acquired) await t.leases.release(slot.lease);
    const item = await t.store.get('dead');
    await new Promise((done) => setTimeout(done, Math.max(0, (item?.deadKeyUntil ?? 0) - Date.now() + 50)));

    // Act: the re-sent message, after the dead key's deadKeyUntil.
    const outcome = await t.processor.process(t.receiveAt(1));

    // Assess: a copy of the dead job, dropped; the job did not run again and is still DEAD.
    expect(outcome.action).toBe('dead-copy');
    expect(runs).toBe(0);
    expect((await t.store.get('dead'))?.status).toBe(JobStatus.Dead);
  });

  it('runs a re-sent message of a fast-path job leased (its receive count is 1 again)', async () => {
    // Prepare: the job's message bounced until a bounce re-sent it (a fast run left behind holds the slot).
    const t = setup({ fastPath: true, run: async () => ({ result: 'ok' }) });
    t.send('fast');
    const slot = await t.leases.tryAcquire(SLOT, 'w0/fast-run-left-behind', 60_000, Date.now());
    await t.bounceResends(1);
    if (slot.acquired) await t.leases.release(slot.lease);

    // Act
    const record = t.receiveAt(1);
    expect(record.attributes.ApproximateReceiveCount).toBe('1');
    const outcome = await t.processor.process(record);

    // Assess: completed under a claim (leased), not on the fast path.
    expect(outcome.action).toBe('completed');
    expect(t.store.claims).toBe(1);
  });
});
