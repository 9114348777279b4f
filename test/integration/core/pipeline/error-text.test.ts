import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { ERROR_TEXT_MAX } from '../../../../shared/error-text.ts';
import { TransientJobError } from '../../../../shared/errors.ts';
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
import { uniqueName } from '../../../support/env.ts';

// Issue item 4 against the emulator: a job error of 76,000 characters with a card number and a lone
// surrogate is released (lastError in DynamoDB), then dead-lettered: SQS accepts the letter, whose
// attributes are redacted, capped and valid text; the DEAD item's lastError is the same text.

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('errtext');
});
afterAll(() => env?.close());

const CARD = '4111111111111111';
const HEAD = `charge for card ${CARD} refused \uD800 by the gateway: `;
const HUGE = `${HEAD}${'x'.repeat(76_000 - HEAD.length)}`;

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

describe('Error text that leaves the worker', () => {
  it('a 76,000-character job error with a lone surrogate is released, then dead-lettered with valid, capped, redacted attributes', async () => {
    const job = defineJob({
      type: 'test.huge-error',
      payload: z.object({}),
      async run() {
        throw new TransientJobError(HUGE);
      },
    });
    const worker = makeWorker(env, JobRegistry.of([job]), {
      maxAttempts: 2,
      redactError: (text) => text.replace(/\d/g, '#'),
    });
    const dedupKey = uniqueName('huge');
    const messageId = await sendJob(env, { dedupKey, type: 'test.huge-error', payload: {} });

    // First attempt: released with the text as lastError (a DynamoDB write).
    const releasedFirst = await eventually(
      async () => {
        await worker.poll(1);
        return (await worker.store.get(dedupKey))?.status === JobStatus.RetryWait;
      },
      20_000,
      0,
    );
    expect(releasedFirst).toBe(true);
    const released = await worker.store.get(dedupKey);
    expect(released?.lastError).toHaveLength(ERROR_TEXT_MAX);
    // Second attempt: dead-lettered (the letter is sent, the item marked DEAD, the message deleted).
    const drained = await eventually(
      async () => {
        await worker.poll(1);
        const c = await queueCounts(env);
        return c.visible + c.inFlight + c.delayed === 0;
      },
      30_000,
      0,
    );
    expect(drained).toBe(true);
    expect(worker.metrics.get('JobDeadLettered')).toBe(1);

    const letters = await receiveAll(env, env.dlqUrl, 30, 2);
    expect(letters).toHaveLength(1);
    const attributes = readDeadLetterAttributes(letters[0]?.MessageAttributes);
    expect(attributes).toMatchObject({
      reason: 'max-attempts',
      errorClass: 'TransientJobError',
      originalMessageId: messageId,
    });
    for (const value of Object.values(attributes)) {
      expect(value.length).toBeLessThanOrEqual(ERROR_TEXT_MAX);
      expect(validForSqs(value)).toBe(true);
      expect(value).not.toContain(CARD);
    }
    const text = attributes.errorMessage ?? '';
    expect(text).toHaveLength(ERROR_TEXT_MAX);
    expect(text).toMatch(
      /^TransientJobError: charge for card #{16} refused \uFFFD by the gateway: x+… \[truncated: 76019 characters\]$/,
    );
    const dead = await worker.store.get(dedupKey);
    expect(dead?.status).toBe(JobStatus.Dead);
    expect(dead?.lastError).toBe(text);
    expect(released?.lastError).toBe(text);
  }, 180_000);
});
