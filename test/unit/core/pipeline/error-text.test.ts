import { Logger } from '@aws-lambda-powertools/logger';
import { context, trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { ERROR_TEXT_MAX, REDACT_ERROR_THREW, type RedactError } from '../../../../shared/error-text.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryJobStore } from '../../../../shared/testing/in-memory-job-store.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';

// Issue item 4: a job error carrying a card number and 76,000 characters went verbatim into log lines,
// span events, the letter's attributes and lastError. Here the job fails in a step on the in-memory
// stores, is retried once (release: lastError) and dead-lettered (letter, markDead), with the Powertools
// logger's output and the spans captured; what leaves must be redacted, capped and valid text.

const CARD = '4111111111111111';
/** 76,000 characters with the card number near the start (inside the cap) and a lone surrogate. */
const HEAD = `charge for card ${CARD} refused \uD800 by the gateway: `;
const HUGE = `${HEAD}${'x'.repeat(76_000 - HEAD.length)}`;
const maskDigits: RedactError = (text) => text.replace(/\d/g, '#');
/** True when SQS message attributes accept every character: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF. */
function validForSqs(text: string): boolean {
  // Iterating by code point: a lone surrogate comes out alone, in 0xD800-0xDFFF.
  for (const ch of text) {
    const c = ch.codePointAt(0) ?? 0;
    if (c >= 0xd800 && c <= 0xdfff) return false;
    if (c < 0x20 && c !== 0x9 && c !== 0xa && c !== 0xd) return false;
    if (c === 0xfffe || c === 0xffff) return false;
  }
  return true;
}

let lines: string[];
let exporter: InMemorySpanExporter;

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
  lines = [];
  // Outside dev mode Powertools writes through a Console on process.stdout / process.stderr.
  vi.stubEnv('POWERTOOLS_DEV', '');
  const capture = (chunk: string | Uint8Array) => {
    lines.push(...String(chunk).split('\n').filter(Boolean));
    return true;
  };
  vi.spyOn(process.stdout, 'write').mockImplementation(capture);
  vi.spyOn(process.stderr, 'write').mockImplementation(capture);
  exporter = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  );
});
afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
  vi.useRealTimers();
  trace.disable();
  context.disable();
});

function setup(message: string, redactError?: RedactError) {
  const job = defineJob({
    type: 'test.charge',
    payload: z.object({ n: z.number() }),
    async run(ctx) {
      await ctx.step('charge', async () => {
        throw new Error(message);
      });
    },
  });
  const store = new InMemoryJobStore();
  const queue = new InMemoryQueue({ visibilitySeconds: 30 });
  const processor = new JobProcessor({
    store,
    queue,
    registry: JobRegistry.of([job]),
    worker: 'w-1',
    logger: new Logger({ serviceName: 'leaseq-test', logLevel: 'DEBUG' }),
    leaseMs: 3000,
    maxAttempts: 2,
    backoff: { baseSeconds: 1, capSeconds: 1 },
    random: () => 0.5,
    ...(redactError ? { redactError } : {}),
  });
  queue.send(
    JSON.stringify(makeEnvelope({ id: 'e-1', type: 'test.charge', dedupKey: 'job-1', payload: { n: 1 } })),
  );
  return { store, queue, processor };
}

/** First attempt (released with a backoff), then the last (dead-lettered). */
async function failTwice({ store, queue, processor }: ReturnType<typeof setup>) {
  const [first] = queue.receive(1);
  if (!first) throw new Error('no message');
  expect((await processor.process(first)).action).toBe('retry');
  const released = await store.get('job-1');
  await vi.advanceTimersByTimeAsync(5000);
  const [second] = queue.receive(1);
  if (!second) throw new Error('no second delivery');
  expect((await processor.process(second)).action).toBe('dead-lettered');
  const dead = await store.get('job-1');
  const [letter] = queue.deadLetters;
  if (!released?.lastError || !dead?.lastError || !letter) throw new Error('nothing stored');
  expect(dead.status).toBe(JobStatus.Dead);
  return { released: released.lastError, dead: dead.lastError, letter };
}

/** Every error text that left: stored, lettered, logged, on spans. */
function everythingThatLeft(stored: { released: string; dead: string; letter: { reason: object } }) {
  const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  const logErrors = logged.flatMap((l) => (typeof l.error === 'string' ? [l.error] : []));
  const spans = exporter.getFinishedSpans();
  const spanTexts = spans.flatMap((s) => [
    s.status.message ?? '',
    ...s.events.flatMap((e) => Object.values(e.attributes ?? {}).map(String)),
    ...Object.values(s.attributes).map(String),
  ]);
  return {
    logged,
    logErrors,
    spans,
    texts: [
      stored.released,
      stored.dead,
      ...Object.values(stored.letter.reason).map(String),
      ...logErrors,
      ...spanTexts,
    ],
  };
}

describe('error text that leaves the process', () => {
  it('a 76,000-character error with a card number: redacted, capped and valid in lastError, the letter, the logs and the spans', async () => {
    const stored = await failTwice(setup(HUGE, maskDigits));
    const { logged, logErrors, spans, texts } = everythingThatLeft(stored);
    // The job's error reached every place (so the checks below see it there).
    expect(logErrors.filter((e) => e.startsWith('Error: charge for card')).length).toBeGreaterThanOrEqual(2);
    const exceptions = spans.flatMap((s) => s.events.filter((e) => e.name === 'exception'));
    expect(exceptions.length).toBeGreaterThanOrEqual(2);
    expect(stored.letter.reason).toMatchObject({ reason: 'max-attempts', errorClass: 'Error' });

    for (const text of texts) {
      expect(text).not.toContain(CARD);
      expect(validForSqs(text)).toBe(true);
      expect(text.length).toBeLessThanOrEqual(ERROR_TEXT_MAX);
    }
    for (const line of lines) expect(line.length).toBeLessThan(ERROR_TEXT_MAX + 1000);
    expect(lines.join('\n')).not.toContain(CARD);
    // Cut with a visible marker that says how long the text was ("Error: " + the message).
    expect(HUGE).toHaveLength(76_000);
    expect(stored.dead).toMatch(
      /^Error: charge for card #{16} refused \uFFFD by the gateway: x+… \[truncated: 76007 characters\]$/,
    );
    expect(stored.dead).toHaveLength(ERROR_TEXT_MAX);
    expect(stored.letter.reason).toMatchObject({ errorMessage: stored.dead });
    expect(stored.released).toBe(stored.dead);
    expect(logged.find((l) => l.message === 'job dead-lettered')).toMatchObject({ error: stored.dead });
    for (const exception of exceptions) {
      expect(exception.attributes).toMatchObject({ 'exception.message': stored.dead });
    }
  });

  it('without a hook the text is still capped and valid (only the redaction is the deployment’s)', async () => {
    const stored = await failTwice(setup(HUGE));
    const { texts } = everythingThatLeft(stored);
    for (const text of texts) {
      expect(validForSqs(text)).toBe(true);
      expect(text.length).toBeLessThanOrEqual(ERROR_TEXT_MAX);
    }
    expect(stored.dead).toContain(CARD);
    expect(stored.dead).toContain('refused \uFFFD by');
  });

  it('a redactError that throws withholds the text and does not break the pipeline', async () => {
    const stored = await failTwice(
      setup(HUGE, () => {
        throw new Error(`cannot redact ${CARD}`);
      }),
    );
    const { logErrors, texts } = everythingThatLeft(stored);
    expect(stored.dead).toBe(REDACT_ERROR_THREW);
    expect(stored.released).toBe(REDACT_ERROR_THREW);
    expect(stored.letter.reason).toMatchObject({ errorMessage: REDACT_ERROR_THREW });
    expect(logErrors).toContain(REDACT_ERROR_THREW);
    for (const text of texts) expect(text).not.toContain(CARD);
  });

  it('a lone surrogate in a short message becomes U+FFFD everywhere', async () => {
    const stored = await failTwice(setup('bad byte \uDC00 here', maskDigits));
    expect(stored.dead).toBe('Error: bad byte \uFFFD here');
    expect(stored.letter.reason).toMatchObject({ errorMessage: 'Error: bad byte \uFFFD here' });
  });
});
