import { Logger } from '@aws-lambda-powertools/logger';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEFAULTS } from '../../../../shared/core/contract/defaults.ts';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import {
  bounceSeconds,
  fifoWaitMs,
  RESEND_AT_RECEIVES,
  resendAtReceives,
} from '../../../../shared/core/pipeline/limit-bounce.ts';
import {
  concurrencyWaitMs,
  freeSlotOrder,
  InvalidLimitKeyError,
  LIMIT_KEY_MAX,
  slotKey,
  slotScope,
} from '../../../../shared/core/pipeline/limits.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { resolveSettings } from '../../../../shared/core/pipeline/settings.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { REDRIVE_MARGIN, REFUND_RECEIVES, redriveMaxReceiveCount } from '../../../../shared/resources.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

const schema = z.object({ tenant: z.unknown() });
const run = async () => ({ result: 'ok' });

describe('Function: slotScope / slotKey', () => {
  it('names a type-wide slot, a keyed slot and a shared (named) one as the spec says', () => {
    expect(slotKey(slotScope('mail.send', { limit: 3 }, {}), 0)).toBe('slot:mail.send:*#0');
    const byTenant = { limit: 3, key: (p: { tenant: string }) => p.tenant };
    expect(slotKey(slotScope('mail.send', byTenant as never, { tenant: 'acme' }), 2)).toBe(
      'slot:mail.send:k:acme#2',
    );
    expect(slotScope('mail.send', { limit: 1, name: 'smtp' }, {})).toBe('slot:smtp:*');
  });

  it.each([
    [
      'throws',
      () => {
        throw new TypeError('secret-payload-value');
      },
      /threw TypeError/,
    ],
    ['returns a number', () => 42, /returned number/],
    ['returns an empty string', () => '', /returned a string of 0 characters/],
    [
      'returns an over-long string',
      () => 'x'.repeat(LIMIT_KEY_MAX + 1),
      /returned a string of 201 characters/,
    ],
  ])('refuses a key function that %s, naming the limit and never the payload', (_, key, problem) => {
    const call = () =>
      slotScope('mail.send', { limit: 1, key: key as never }, { tenant: 'secret-payload-value' });
    expect(call).toThrow(InvalidLimitKeyError);
    expect(call).toThrow(problem);
    expect(call).toThrow(/concurrency limit mail\.send/);
    expect(call).not.toThrow(/secret-payload-value/);
  });
});

describe('Function: freeSlotOrder', () => {
  it('lists the slots a read shows free (absent, released or expired), never the one already tried', () => {
    const scope = 'slot:t:*';
    const items = [
      { leaseKey: slotKey(scope, 0), owner: 'a', leaseUntil: 2000, token: 1 },
      { leaseKey: slotKey(scope, 1), leaseUntil: 0, token: 1 },
      { leaseKey: slotKey(scope, 2), owner: 'b', leaseUntil: 999, token: 1 },
    ];
    const order = freeSlotOrder(5, items, scope, 1000, 3, () => 0);
    expect(order).toEqual([1, 2, 4]);
    // Rotated by the randomness, so readers of one busy scope spread over its free slots.
    expect(freeSlotOrder(5, items, scope, 1000, 3, () => 0.7)).toEqual([4, 1, 2]);
  });
});

describe('Function: bounceSeconds / concurrencyWaitMs', () => {
  it('jitters the delay up by at most half, in whole seconds from 1 to 900', () => {
    expect(bounceSeconds(1000, () => 0)).toBe(1);
    expect(bounceSeconds(2000, () => 0.99)).toBe(3);
    expect(bounceSeconds(0, () => 0.5)).toBe(1);
    expect(bounceSeconds(10_000_000, () => 0.5)).toBe(900);
    expect([1, 2, 3, 4, 5, 50].map(concurrencyWaitMs)).toEqual([1000, 2000, 4000, 8000, 16_000, 16_000]);
    // Re-sent before the redrive safety net could count bounces.
    expect(RESEND_AT_RECEIVES).toBeLessThan(REDRIVE_MARGIN);
  });
});

describe('Function: resendAtReceives / fifoWaitMs', () => {
  it('re-sends below every redrive count the construct gives, and below a smaller one the worker is told', () => {
    for (const fifo of [false, true]) {
      const smallest = redriveMaxReceiveCount({ maxAttempts: 1, batchSize: 1, fifo });
      expect(resendAtReceives(fifo, undefined)).toBeLessThan(smallest);
      expect(resendAtReceives(fifo, 3)).toBe(2);
      expect(resendAtReceives(fifo, 1)).toBe(1);
    }
    expect(resendAtReceives(false, undefined)).toBe(RESEND_AT_RECEIVES);
  });

  it("keeps the FIFO redrive's refund room at the default refund budget", () => {
    expect(REFUND_RECEIVES).toBe(DEFAULTS.maxRefunds);
  });

  it("leaves a job its refunds and its attempts after the bounces before its re-send, within the construct's count", () => {
    // The receives that use no attempt before the re-send (bounces, and conflicts, which give back only
    // below the standard queue's re-send point), then every refund (an outage's attempt given back, at any
    // receive) and every attempt: all must come before the queue's redrive moves the message unrun.
    for (const fifo of [false, true]) {
      for (const batchSize of [1, 2, 10]) {
        for (const maxAttempts of [1, 2, 5]) {
          const receives = resendAtReceives(fifo, undefined) - 1 + DEFAULTS.maxRefunds + maxAttempts;
          const count = redriveMaxReceiveCount({ maxAttempts, batchSize, fifo });
          expect(
            receives,
            `fifo ${fifo}, batch ${batchSize}, maxAttempts ${maxAttempts}`,
          ).toBeLessThanOrEqual(count);
        }
      }
    }
  });

  it('holds a FIFO head with hides that double (2 s to 30 s): its receives before a re-send cover 3 minutes, and no hide keeps its group asleep longer than 30 s', () => {
    expect([1, 2, 3, 4, 5, 9, 10, 40].map((r) => fifoWaitMs(r) / 1000)).toEqual([
      2, 4, 8, 16, 30, 30, 30, 30,
    ]);
    let waited = 0;
    for (let r = 1; r < resendAtReceives(true, undefined); r++) waited += fifoWaitMs(r);
    expect(waited).toBe(180_000);
  });
});

describe('Registry: concurrency option', () => {
  const job = (concurrency: unknown) =>
    defineJob({ type: 't.limited', payload: schema, run, concurrency: concurrency as never });

  it('accepts one limit or a list (a per-key limit and a type-wide cap)', () => {
    expect(() => JobRegistry.of([job({ limit: 3 })])).not.toThrow();
    expect(() =>
      JobRegistry.of([
        job([
          { limit: 3, key: () => 'k' },
          { limit: 10, name: 'smtp' },
        ]),
      ]),
    ).not.toThrow();
  });

  it.each([
    [{ limit: 0 }, /concurrency\.limit must be a whole number from 1 to 1000, received 0/],
    [{ limit: 1.5 }, /received 1\.5/],
    [{ limit: '3' }, /received string/],
    [{ limit: 3, key: 'tenant' }, /concurrency\.key must be a function/],
    [{ limit: 3, name: 'has space' }, /concurrency\.name "has space" is not valid/],
    [[], /one limit or a list of 1 to 4, received 0/],
    [[{ limit: 1 }, null], /concurrency\[1\] must be an object/],
  ])('refuses %j with a clear ConfigError', (concurrency, message) => {
    expect(() => JobRegistry.of([job(concurrency)])).toThrow(message);
  });

  it('refuses two limits of one type that would share their slots (two keyed or two type-wide, one name)', () => {
    // Tenant "42" and account "42" would name the same slots `slot:t.limited:k:42#<i>`: the two limits
    // would count each other's jobs, and a job whose two keys are equal would wait for itself forever.
    const twoKeyed = [
      { limit: 1, key: (p: { tenant: string }) => p.tenant },
      { limit: 1, key: (p: { account: string }) => p.account },
    ];
    expect(() => JobRegistry.of([job(twoKeyed)])).toThrow(
      /concurrency\[1\] would share its slots with concurrency\[0\].*give one a distinct name/,
    );
    expect(() => JobRegistry.of([job([{ limit: 5 }, { limit: 2, name: 't.limited' }])])).toThrow(
      /concurrency\[1\] would share its slots with concurrency\[0\]/,
    );
    expect(() =>
      JobRegistry.of([job([twoKeyed[0], { ...twoKeyed[1], name: 'accounts' }, { limit: 9 }])]),
    ).not.toThrow();
  });

  it('refuses a slot owner name holding ":k:" (a key value of another limit could name the same slots)', () => {
    // Type-wide `slot:a:k:b:*#0` is also type `a` keyed with the value `b:*`.
    expect(() => JobRegistry.of([job({ limit: 2, name: 'a:k:b' })])).toThrow(/holds ":k:"/);
    expect(() => JobRegistry.of([job({ limit: 2, name: 'a:kb' })])).not.toThrow();
  });

  it('refuses at start a worker with a limited type and no leases table', () => {
    const options = {
      store: memoryStores().store,
      queue: new InMemoryQueue(),
      registry: JobRegistry.of([job({ limit: 3 })]),
      worker: 'w1',
      logger: new Logger({ logLevel: 'SILENT' }),
    };
    expect(() => resolveSettings(options)).toThrow(
      /job type t\.limited has concurrency limits.*LEASEQ_LEASES_TABLE/,
    );
    expect(() => resolveSettings({ ...options, leases: memoryStores().leases })).not.toThrow();
  });
});

describe('Processor: concurrency limits (in-memory stores)', () => {
  function setup(key: (p: { tenant: unknown }) => string) {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((done) => {
      release = done;
    });
    const limited = defineJob({
      type: 't.limited',
      payload: schema,
      concurrency: { limit: 1, key },
      async run() {
        await gate;
        return { result: 'ok' };
      },
    });
    const { store, leases } = memoryStores();
    const queue = new InMemoryQueue();
    const processor = new JobProcessor({
      store,
      queue,
      leases,
      registry: JobRegistry.of([limited]),
      worker: 'w1',
      logger: new Logger({ logLevel: 'SILENT' }),
      leaseMs: 3000,
    });
    const send = (dedupKey: string, tenant: unknown) =>
      queue.send(
        JSON.stringify(makeEnvelope({ id: dedupKey, type: 't.limited', dedupKey, payload: { tenant } })),
      );
    return { processor, store, queue, leases, send, release: () => release() };
  }

  it('bounces a job whose key has no free slot: no job item written, no attempt, slot freed after the first ends', async () => {
    const t = setup((p) => String(p.tenant));
    t.send('a1', 'A');
    t.send('a2', 'A');
    const [r1, r2] = t.queue.receive(2);
    const first = t.processor.process(r1 as never);
    // Let the first take its slot.
    await new Promise((done) => setTimeout(done, 20));
    const second = await t.processor.process(r2 as never);
    expect(second.action).toBe('limited');
    expect(second.disposition).toBe('retain');
    expect(await t.store.get('a2')).toBeUndefined();
    t.release();
    expect((await first).action).toBe('completed');
    // Released after the commit: nobody holds the slot.
    const item = await t.leases.get('slot:t.limited:k:A#0');
    expect(item?.owner).toBeUndefined();
  });

  it('dead-letters a job whose key function returns no key (invalid-limit-key), never claiming it', async () => {
    const t = setup(() => 7 as never);
    t.send('bad', 'A');
    const [record] = t.queue.receive(1);
    const outcome = await t.processor.process(record as never);
    expect(outcome.action).toBe('dead-lettered');
    expect(t.queue.deadLetters[0]?.reason.reason).toBe('invalid-limit-key');
    expect(await t.store.get('bad')).toBeUndefined();
  });
});

describe('Processor: a run left behind at its deadline keeps its slot', () => {
  it('does not free the slot to another job while the abandoned run is still running', async () => {
    let running = 0;
    let most = 0;
    const limited = defineJob({
      type: 't.limited',
      payload: schema,
      concurrency: { limit: 1 },
      async run() {
        running++;
        most = Math.max(most, running);
        // Ignores its signal for a while after the deadline (well within one slot lease).
        await new Promise((done) => setTimeout(done, 1500));
        running--;
        return { result: 'ok' };
      },
    });
    const queue = new InMemoryQueue();
    const { store, leases } = memoryStores();
    const processor = new JobProcessor({
      store,
      queue,
      leases,
      registry: JobRegistry.of([limited]),
      worker: 'w1',
      logger: new Logger({ logLevel: 'SILENT' }),
      leaseMs: 5000,
    });
    for (const id of ['a', 'b']) {
      queue.send(
        JSON.stringify(makeEnvelope({ id, type: 't.limited', dedupKey: id, payload: { tenant: 'A' } })),
      );
    }
    const [ra, rb] = queue.receive(2);
    // The invocation's deadline comes 1.1 s in: a's run is abandoned, still running.
    const a = await processor.process(ra as never, { deadline: Date.now() + 1100 });
    expect(a.disposition).toBe('retain');
    expect(running).toBe(1);
    const b = await processor.process(rb as never);
    expect(most).toBe(1);
    expect(b.action).toBe('limited');
    // Once the left-behind run ends, its slot is given back at once (not one lease later).
    await new Promise((done) => setTimeout(done, 600));
    expect(running).toBe(0);
    expect((await processor.process(rb as never)).action).toBe('completed');
  });
});

describe('Processor: a slot acquire the leases table refuses', () => {
  it('never throws out of process: the record is given back with nothing held or claimed', async () => {
    const limited = defineJob({ type: 't.limited', payload: schema, concurrency: { limit: 2 }, run });
    const queue = new InMemoryQueue();
    const { doc, store, leases } = memoryStores();
    const processor = new JobProcessor({
      store,
      queue,
      leases,
      registry: JobRegistry.of([limited]),
      worker: 'w1',
      logger: new Logger({ logLevel: 'SILENT' }),
    });
    queue.send(
      JSON.stringify(makeEnvelope({ id: 'r', type: 't.limited', dedupKey: 'r', payload: { tenant: 'A' } })),
    );
    const [record] = queue.receive(1);
    // A permanent refusal, as DynamoDB answers a role without the action (AccessDeniedException, 400).
    const denied = Object.assign(new Error('not authorized to perform: dynamodb:UpdateItem'), {
      name: 'AccessDeniedException',
      $metadata: { httpStatusCode: 400 },
    });
    doc.faults.failNext('lease-acquire', denied);
    const outcome = await processor.process(record as never);
    expect(outcome.disposition).toBe('retain');
    expect(outcome.action).toBe('store-unavailable');
    // Nothing held, nothing claimed: the next receive takes a slot and runs it once.
    expect(await leases.getMany(['slot:t.limited:*#0', 'slot:t.limited:*#1'])).toEqual([]);
    expect((await processor.process(record as never)).action).toBe('completed');
  });
});
