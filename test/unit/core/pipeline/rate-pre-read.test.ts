// A rate-limited type reads its job item before it spends a permit (dropFinishedCopy, refusal.ts): a copy
// of a finished job is dropped there. A DEAD key whose deadKeyUntil passed is no finished job for a fresh
// send: that send runs, and spends its permit.
import { Logger } from '@aws-lambda-powertools/logger';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

describe('Processor: the rate limit read before the permit', () => {
  it('runs a fresh send of a DEAD key past its deadKeyUntil; drops the dead job own message', async () => {
    // Prepare: the job died under its message, with a dead key of 1 s, and that time passed.
    let runs = 0;
    const job = defineJob({
      type: 't.rated',
      payload: z.object({ tenant: z.string() }),
      rateLimit: { key: (p: { tenant: string }) => p.tenant, limit: 100, perSeconds: 1 },
      deadKeyTtl: 1,
      async run() {
        runs += 1;
        return { result: 'ok' };
      },
    });
    const { store, rates } = memoryStores();
    const queue = new InMemoryQueue();
    const processor = new JobProcessor({
      store,
      queue,
      rates,
      registry: JobRegistry.of([job]),
      worker: 'w1',
      logger: new Logger({ logLevel: 'SILENT' }),
      leaseMs: 3000,
    });
    const send = (id: string) =>
      queue.send(
        JSON.stringify(makeEnvelope({ id, type: 't.rated', dedupKey: 'k', payload: { tenant: 'A' } })),
      );
    const first = send('e1');
    const held = await store.claim({
      dedupKey: 'k',
      owner: 'w0',
      messageId: first,
      type: 't.rated',
      createdAt: new Date().toISOString(),
      leaseMs: 60_000,
      now: Date.now(),
    });
    if (!held.claimed) throw new Error('expected the claim');
    await store.markDead(held.lease, {
      message: 'gave up',
      errorClass: 'PermanentJobError',
      deadKeyTtlSeconds: 1,
    });
    const dead = await store.get('k');
    await new Promise((done) => setTimeout(done, Math.max(0, (dead?.deadKeyUntil ?? 0) - Date.now() + 50)));

    // Act: the dead job's own message back (its delete failed), then a fresh send.
    const [own] = queue.receive(1, { visibilitySeconds: 0 });
    if (!own) throw new Error('expected the message');
    const ownOutcome = await processor.process(own);
    // The batch deletes a message whose outcome is not a failure (the event source does).
    await queue.delete(own.receiptHandle);
    send('e2');
    const [fresh] = queue.receive(1, { visibilitySeconds: 0 });
    if (!fresh) throw new Error('expected the fresh send');
    const freshOutcome = await processor.process(fresh);

    // Assess: the own message is a dead copy; the fresh send ran and completed the key.
    expect(ownOutcome.action).toBe('dead-copy');
    expect(freshOutcome.action).toBe('completed');
    expect(runs).toBe(1);
    expect((await store.get('k'))?.status).toBe(JobStatus.Completed);
  });
});
