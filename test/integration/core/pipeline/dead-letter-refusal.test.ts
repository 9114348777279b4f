import { InvalidMessageContents } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AwsClients, destroyAwsClients } from '../../../../shared/aws/clients.ts';
import { readDeadLetterAttributes, SqsJobQueue } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { PermanentJobError, TransientJobError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  receiveAll,
  sendJob,
} from '../../../support/core-fixture.ts';
import { testClients, uniqueName } from '../../../support/env.ts';

// Issue 18, defect 3, against the emulator: job errors whose text SQS attributes and DynamoDB refuse (raw
// control characters as V8's JSON.parse messages carry them, ANSI colour codes, a lone surrogate, a cut
// that split a pair) reach the DLQ as one letter and a DEAD item with the job's own reason; a letter SQS
// refuses for its contents is sent again minimal instead of looping; and a dead-lettering cut short after
// its fence is finished by the next delivery with the recorded cause, without running the job again.

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('letters');
});
afterAll(() => env?.close());

/** True when SQS message attributes accept every character: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF. */
function validForSqs(text: string): boolean {
  for (const ch of text) {
    const c = ch.codePointAt(0) ?? 0;
    if (c >= 0xd800 && c <= 0xdfff) return false;
    if (c < 0x20 && c !== 0x9 && c !== 0xa && c !== 0xd) return false;
    if (c === 0xfffe || c === 0xffff) return false;
  }
  return true;
}

/** Polls `worker` until the jobs queue is empty. */
async function drain(worker: ReturnType<typeof makeWorker>, timeoutMs = 40_000): Promise<boolean> {
  return eventually(
    async () => {
      await worker.poll(1);
      const c = await queueCounts(env);
      return c.visible + c.inFlight + c.delayed === 0;
    },
    timeoutMs,
    0,
  );
}

/** Every letter in the DLQ now, as attribute maps (received once: they stay hidden for the test). */
async function letters(): Promise<Record<string, string>[]> {
  const all = await receiveAll(env, env.dlqUrl, 120, 1);
  return all.map((m) => readDeadLetterAttributes(m.MessageAttributes));
}

/**
 * An SQS client that answers the next `times` sends to the DLQ as SQS answers a letter whose attributes
 * it refuses (400 InvalidMessageContents), before they reach the emulator; every other call is real.
 * (The emulator itself refuses no attribute characters, and the worker no longer sends any it would.)
 */
function refusingClient(times: number): { clients: AwsClients; refused: () => number } {
  const clients = testClients();
  let refused = 0;
  clients.sqs.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { QueueUrl?: string; MessageAttributes?: Record<string, unknown> };
      if (context.commandName === 'SendMessageCommand' && input.QueueUrl === env.dlqUrl && refused < times) {
        refused += 1;
        throw new InvalidMessageContents({
          message: 'Invalid binary character #x0 was found in the message attributes',
          $metadata: { httpStatusCode: 400 },
        });
      }
      return next(args);
    },
    { step: 'initialize', name: 'refuseLetters' },
  );
  return { clients, refused: () => refused };
}

describe('Dead letters for every input (issue 18, defect 3)', () => {
  it('job errors with control characters, ANSI codes, a lone surrogate or a split pair: one letter each, the item DEAD with its reason', async () => {
    // Prepare: four texts SQS attributes refuse as they are.
    const texts = [
      'Unexpected token \u0000 in JSON at position 3',
      '\u001b[31mconnection refused\u001b[39m',
      'half a pair: \ud800 and more',
      `${'y'.repeat(1021)}\ud83d`,
    ];
    const job = defineJob({
      type: 'test.bad-text',
      payload: z.object({ i: z.number() }),
      async run(_ctx, p) {
        throw new PermanentJobError(texts[p.i] ?? 'unknown');
      },
    });
    const worker = makeWorker(env, JobRegistry.of([job]), { maxAttempts: 3 });
    const keys = texts.map(() => uniqueName('badtext'));
    for (const [i, dedupKey] of keys.entries()) {
      await sendJob(env, { dedupKey, type: 'test.bad-text', payload: { i } });
    }

    // Act
    const drained = await drain(worker);

    // Assess
    expect(drained).toBe(true);
    const got = await letters();
    expect(got.map((l) => l.dedupKey).sort()).toEqual([...keys].sort());
    for (const letter of got) {
      expect(letter).toMatchObject({
        reason: 'permanent-error',
        errorClass: 'PermanentJobError',
        attempts: '1',
      });
      for (const value of Object.values(letter)) expect(validForSqs(value)).toBe(true);
    }
    for (const dedupKey of keys) {
      const item = await worker.store.get(dedupKey);
      expect(item).toMatchObject({
        status: JobStatus.Dead,
        attempts: 1,
        lastErrorClass: 'PermanentJobError',
      });
      expect(validForSqs(item?.lastError ?? '')).toBe(true);
    }
    expect(worker.metrics.get('JobDeadLettered')).toBe(texts.length);
  }, 180_000);

  it('a release whose lastError has a lone surrogate is stored; the job is dead-lettered after maxAttempts with its own error', async () => {
    // Prepare
    const job = defineJob({
      type: 'test.lone-release',
      payload: z.object({}),
      async run() {
        throw new TransientJobError('gateway said \ud800 then hung up');
      },
    });
    const worker = makeWorker(env, JobRegistry.of([job]), { maxAttempts: 2 });
    const dedupKey = uniqueName('lone');
    await sendJob(env, { dedupKey, type: 'test.lone-release', payload: {} });

    // Act
    const released = await eventually(
      async () => {
        await worker.poll(1);
        return (await worker.store.get(dedupKey))?.status === JobStatus.RetryWait;
      },
      20_000,
      0,
    );
    const first = await worker.store.get(dedupKey);
    const drained = await drain(worker);

    // Assess
    expect(released).toBe(true);
    expect(first?.lastError).toBe('TransientJobError: gateway said \uFFFD then hung up');
    expect(drained).toBe(true);
    const got = await letters();
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({
      reason: 'max-attempts',
      errorClass: 'TransientJobError',
      errorMessage: 'TransientJobError: gateway said \uFFFD then hung up',
      attempts: '2',
    });
    expect(await worker.store.get(dedupKey)).toMatchObject({ status: JobStatus.Dead, attempts: 2 });
  }, 180_000);

  it('a letter SQS refuses for its contents is final: one minimal letter (reason and job id, no free text), the item DEAD', async () => {
    // Prepare
    let runs = 0;
    const job = defineJob({
      type: 'test.refused-letter',
      payload: z.object({}),
      async run() {
        runs += 1;
        throw new PermanentJobError('card 4111 declined');
      },
    });
    const refusing = refusingClient(1);
    const worker = makeWorker(env, JobRegistry.of([job]), {
      maxAttempts: 3,
      queue: new SqsJobQueue({
        client: refusing.clients.sqs,
        queueUrl: env.queueUrl,
        deadLetterQueueUrl: env.dlqUrl,
      }),
    });
    const dedupKey = uniqueName('refused');
    const messageId = await sendJob(env, { dedupKey, type: 'test.refused-letter', payload: {} });

    try {
      // Act
      const drained = await drain(worker, 20_000);

      // Assess
      expect(refusing.refused()).toBe(1);
      expect(drained).toBe(true);
      expect(runs).toBe(1);
      const got = await letters();
      expect(got).toHaveLength(1);
      expect(got[0]).toMatchObject({ reason: 'permanent-error', dedupKey, originalMessageId: messageId });
      expect(JSON.stringify(got[0])).not.toContain('4111');
      expect(await worker.store.get(dedupKey)).toMatchObject({
        status: JobStatus.Dead,
        lastError: 'PermanentJobError: card 4111 declined',
      });
    } finally {
      destroyAwsClients(refusing.clients);
    }
  }, 180_000);

  it('a dead-lettering cut short after its fence is finished by the next delivery with the recorded cause; the job does not run again', async () => {
    // Prepare: the DLQ send fails once (a 5xx after the SDK's retries), after the fence landed.
    let runs = 0;
    const job = defineJob({
      type: 'test.interrupted-letter',
      payload: z.object({}),
      async run() {
        runs += 1;
        throw new PermanentJobError('the account is closed');
      },
    });
    const clients = testClients();
    let failed = 0;
    // Before the SDK's retries (initialize), so the worker sees the failure they would end with.
    clients.sqs.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { QueueUrl?: string };
        if (context.commandName === 'SendMessageCommand' && input.QueueUrl === env.dlqUrl && failed === 0) {
          failed += 1;
          throw Object.assign(new Error('We encountered an internal error. Please try again.'), {
            name: 'InternalError',
            $metadata: { httpStatusCode: 500 },
          });
        }
        return next(args);
      },
      { step: 'initialize', name: 'failOneLetter' },
    );
    const worker = makeWorker(env, JobRegistry.of([job]), {
      maxAttempts: 3,
      queue: new SqsJobQueue({ client: clients.sqs, queueUrl: env.queueUrl, deadLetterQueueUrl: env.dlqUrl }),
    });
    const dedupKey = uniqueName('interrupted');
    await sendJob(env, { dedupKey, type: 'test.interrupted-letter', payload: {} });

    try {
      // Act: the first delivery fences, fails to send, keeps M; the next one after the lease takes over.
      const kept = await eventually(
        async () => {
          await worker.poll(1);
          return failed === 1;
        },
        20_000,
        0,
      );
      const between = await worker.store.get(dedupKey);
      const drained = await drain(worker);

      // Assess
      expect(kept).toBe(true);
      expect(between).toMatchObject({
        status: JobStatus.InProgress,
        deadReason: 'permanent-error',
        lastError: 'PermanentJobError: the account is closed',
      });
      expect(drained).toBe(true);
      expect(runs).toBe(1);
      const got = await letters();
      expect(got).toHaveLength(1);
      expect(got[0]).toMatchObject({
        reason: 'permanent-error',
        errorClass: 'PermanentJobError',
        errorMessage: 'PermanentJobError: the account is closed',
        dedupKey,
      });
      expect(await worker.store.get(dedupKey)).toMatchObject({
        status: JobStatus.Dead,
        deadReason: 'permanent-error',
      });
    } finally {
      destroyAwsClients(clients);
    }
  }, 180_000);
});
