import { Logger } from '@aws-lambda-powertools/logger';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { refusedMessageTarget } from '../../../../shared/core/pipeline/refused-job.ts';
import { TransientJobError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { type DynamoDbJobStore, memoryStores } from '../../../support/memory-stores.ts';

const NOW = 1_000_000;
const item = (over: Partial<JobItem> = {}): JobItem => ({
  dedupKey: 'k',
  status: JobStatus.RetryWait,
  leaseUntil: NOW - 1,
  token: 5,
  attempts: 1,
  version: 3,
  messageId: 'm-1',
  type: 't',
  ...over,
});
/** A message with id `id`, re-sent in place of `former`. */
const message = (id: string, former: readonly string[] = []) => ({
  identity: { messageId: id, originId: former[0] ?? id, formerIds: former },
});

describe('Function: refusedMessageTarget', () => {
  it('takes a job whose item waits for the message, by its id or one it was re-sent in place of', () => {
    expect(refusedMessageTarget(item(), message('m-1'), 't', NOW)).toEqual({
      kind: 'take',
      messageId: 'm-1',
    });
    expect(refusedMessageTarget(item(), message('m-9', ['m-1']), 't', NOW)).toEqual({
      kind: 'take',
      messageId: 'm-1',
    });
    const died = item({ status: JobStatus.InProgress, owner: 'w' });
    expect(refusedMessageTarget(died, message('m-1'), 't', NOW).kind).toBe('take');
  });

  it('hides the message while a lease or a backoff holds its job', () => {
    const held = item({ status: JobStatus.InProgress, owner: 'w', leaseUntil: NOW + 4000 });
    expect(refusedMessageTarget(held, message('m-1'), 't', NOW)).toEqual({ kind: 'wait', hideForMs: 4000 });
    const early = item({ leaseUntil: NOW + 500 });
    expect(refusedMessageTarget(early, message('m-1'), 't', NOW)).toEqual({ kind: 'wait', hideForMs: 500 });
  });

  it('calls the message a copy when no item waits for it', () => {
    const copy = (i: JobItem | undefined, m = message('m-1')) => refusedMessageTarget(i, m, 't', NOW).kind;
    expect(copy(undefined)).toBe('copy');
    expect(copy(item(), message('m-2'))).toBe('copy');
    expect(copy(item({ type: 'other' }))).toBe('copy');
    // A dead key whose deadKeyUntil passed is open to a fresh send: that message's letter is its only record.
    expect(copy(item({ status: JobStatus.Dead, deadKeyUntil: NOW - 1 }), message('m-2'))).toBe('copy');
  });

  it('calls a finished job (completed, cancelled, a dead key not open to this message) finished', () => {
    const kind = (i: JobItem, m = message('m-1')) => refusedMessageTarget(i, m, 't', NOW).kind;
    for (const status of [JobStatus.Completed, JobStatus.Dead, JobStatus.Cancelled]) {
      expect(kind(item({ status }))).toBe('finished');
      expect(kind(item({ status }), message('m-2'))).toBe('finished');
    }
    expect(kind(item({ status: JobStatus.Cancelled, type: undefined }))).toBe('finished');
    // Its own message (by any id it had) back after deadKeyUntil: the death has its letter already.
    const expired = item({ status: JobStatus.Dead, deadKeyUntil: NOW - 1 });
    expect(kind(expired)).toBe('finished');
    expect(kind(expired, message('m-9', ['m-1']))).toBe('finished');
    expect(kind(item({ status: JobStatus.Dead, deadKeyUntil: NOW + 1 }), message('m-2'))).toBe('finished');
  });

  it("drops a redrive's message of another life of the key (no letter), and never takes the newer job with it", () => {
    // Prepare: life 1's job waits (a fresh send reset the key); a redrive's message of life 0, whose
    // payload is refused now; and one of life 1, the item's own.
    const waiting = item({ life: 1, messageId: 'm-1' });
    const older = { identity: { messageId: 'm-9', originId: 'm-1', formerIds: ['m-1'], life: 0 } };
    const own = { identity: { ...older.identity, life: 1 } };
    const dead = item({ status: JobStatus.Dead, deadKeyUntil: NOW - 1, messageId: 'm-5' });

    // Act + Assess
    expect(refusedMessageTarget(waiting, older, 't', NOW)).toEqual({ kind: 'finished', item: waiting });
    expect(refusedMessageTarget(waiting, own, 't', NOW)).toEqual({ kind: 'take', messageId: 'm-1' });
    // A dead key past deadKeyUntil is not open to a redrive's message: it is no fresh send.
    expect(refusedMessageTarget(dead, older, 't', NOW).kind).toBe('finished');
  });
});

describe('Processor: a refused job whose item waits for its message (in-memory twin of refused-own-message.test.ts)', () => {
  /** A processor of `t.refused` whose payload `n` must be at least `min`, limited per `key` when given. */
  function processor(
    store: DynamoDbJobStore,
    queue: InMemoryQueue,
    min: number,
    key?: (p: { n: number }) => unknown,
  ) {
    const job = defineJob({
      type: 't.refused',
      payload: z.object({ n: z.number().min(min) }),
      ...(key ? { concurrency: { limit: 1, key: key as (p: { n: number }) => string } } : {}),
      async run(ctx) {
        if (ctx.attempt === 1) throw new TransientJobError('busy');
        return { result: 'ok' };
      },
    });
    return new JobProcessor({
      store,
      queue,
      leases: memoryStores().leases,
      registry: JobRegistry.of([job]),
      worker: `w-${min}`,
      logger: new Logger({ logLevel: 'SILENT' }),
      leaseMs: 3000,
      backoff: { baseSeconds: 0, capSeconds: 0 },
    });
  }

  it.each([
    [
      'a stricter schema',
      'invalid-bad-payload',
      (s: DynamoDbJobStore, q: InMemoryQueue) => processor(s, q, 10),
    ],
    [
      'a limit key that cannot be computed',
      'invalid-limit-key',
      (s: DynamoDbJobStore, q: InMemoryQueue) => processor(s, q, 0, () => 7),
    ],
  ])('%s, deployed while the job waits for its retry, ends the job DEAD (%s)', async (_, reason, next) => {
    // Prepare: the first attempt fails; the job waits in RETRY_WAIT for its message.
    const { store } = memoryStores();
    const queue = new InMemoryQueue();
    const id = queue.send(
      JSON.stringify(makeEnvelope({ id: 'j', type: 't.refused', dedupKey: 'k', payload: { n: 1 } })),
    );
    const [first] = queue.receive(1, { visibilitySeconds: 0 });
    expect((await processor(store, queue, 0).process(first as never)).action).toBe('retry');
    await new Promise((done) => setTimeout(done, 5));

    // Act: the next deploy's worker receives it.
    const [again] = queue.receive(1, { visibilitySeconds: 0 });
    expect(again?.messageId).toBe(id);
    const outcome = await next(store, queue).process(again as never);

    // Assess
    expect(outcome.action).toBe('dead-lettered');
    expect(await store.get('k')).toMatchObject({ status: JobStatus.Dead, deadReason: reason });
    expect(queue.deadLetters.map((l) => l.reason)).toEqual([
      expect.objectContaining({ reason, attempts: 2, messageId: id }),
    ]);
  });
});
