// Every CLI renderer fed what a hostile producer writes (security issue, item 2): the text it returns, and
// the bytes print / note / printJson write, carry no raw control, C1 or bidi character. Deliberately
// independent of cli/safe-text.ts: it checks the renderers' output, not how they escape.
import type { Message } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { describeDeadLetter, describeDeadLetters } from '../../../cli/commands/dlq.ts';
import { describeJob } from '../../../cli/commands/inspect.ts';
import { describeLeases } from '../../../cli/commands/leases.ts';
import { formatError, oneLine } from '../../../cli/errors.ts';
import { note, print, printJson, renderFields, renderTable } from '../../../cli/format.ts';
import { DLQ_ATTRIBUTE_PREFIX } from '../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { summarise, toDeadLetter } from '../../../shared/ops/dlq-letters.ts';
import type { InspectReport } from '../../../shared/ops/inspect.ts';
import type { LeasesReport } from '../../../shared/ops/leases.ts';
import { jobTimeline } from '../../../shared/ops/timeline.ts';
import { asciiJson, C1_AND_BIDI, CLEAR_SCREEN, RETITLE, rawControls } from '../../support/hostile-text.ts';

const NOW = Date.parse('2026-05-01T12:00:00Z');
const HOSTILE = `${RETITLE}${CLEAR_SCREEN} ${C1_AND_BIDI}`;

/** A pure-ASCII JSON body: its escapes turn into control characters only once it is parsed. */
const asciiBody = asciiJson({
  v: 1,
  id: 'i-1',
  dedupKey: RETITLE,
  type: CLEAR_SCREEN,
  createdAt: '2026-05-01T12:00:00Z',
  payload: { note: HOSTILE, [C1_AND_BIDI]: 1 },
});

function rawAttributes(fields: Record<string, string | number>): Message['MessageAttributes'] {
  return Object.fromEntries(
    Object.entries(fields).map(([name, value]) => [
      `${DLQ_ATTRIBUTE_PREFIX}${name}`,
      { DataType: typeof value === 'number' ? 'Number' : 'String', StringValue: String(value) },
    ]),
  );
}

const letters: Message[] = [
  { MessageId: 'm-ascii', Body: asciiBody, Attributes: { SentTimestamp: String(NOW) } },
  { MessageId: 'm-raw', Body: `not json ${HOSTILE}\r\nsecond line`, Attributes: {} },
  {
    MessageId: 'm-attr',
    Body: asciiJson({ v: 1, dedupKey: 'order-1', type: 'ledger.credit', payload: {} }),
    // Written raw, as another sender could: leaseq's own letters are already made valid on the way out
    // (deadLetterAttributes), so this is the renderer's defence alone.
    MessageAttributes: rawAttributes({
      reason: 'permanent-error',
      errorClass: `Boom${RETITLE}`,
      errorMessage: `failed\n${CLEAR_SCREEN} ${C1_AND_BIDI}`,
      attempts: 1,
      dedupKey: 'order-1',
      worker: `w-1${C1_AND_BIDI}`,
      messageId: 'orig-1',
      type: 'ledger.credit',
    }),
  },
];

describe('Renderers: producer text is never printed raw', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('pure-ASCII JSON asciiBody: the test body has no control character before parsing', () => {
    expect(asciiBody).toMatch(/^[\x20-\x7e]+$/);
  });

  it('toDeadLetter shows a dedup key or type read back from a bad body only when it matches the envelope', () => {
    // Act
    const [hostile, raw, fine] = letters.map((m) => summarise(toDeadLetter(m)));
    // Assess
    expect(hostile).not.toHaveProperty('dedupKey');
    expect(hostile).not.toHaveProperty('type');
    expect(hostile?.unreadable).toEqual(['dedupKey', 'type']);
    expect(raw).not.toHaveProperty('unreadable');
    expect(fine).toMatchObject({ dedupKey: 'order-1', type: 'ledger.credit' });
    expect(fine).not.toHaveProperty('unreadable');
  });

  it('dlq list: the table escapes every cell and marks unreadable hint fields', () => {
    // Act
    const text = describeDeadLetters(
      letters.map((m) => summarise(toDeadLetter(m))),
      NOW,
    );
    // Assess
    expect(rawControls(text)).toEqual([]);
    expect(text.split('\n')).toHaveLength(4);
    expect(text).toContain('(unreadable)');
    expect(text).toContain('Boom\\u001b]0;pwned\\u0007');
  });

  it('dlq show: fields, attributes and bodies (JSON or not) are escaped', () => {
    for (const message of letters) {
      // Act
      const text = describeDeadLetter(toDeadLetter(message), NOW);
      // Assess
      expect(rawControls(text)).toEqual([]);
    }
    const rawView = describeDeadLetter(toDeadLetter(letters[1] as Message), NOW);
    expect(rawView).toContain('not json \\u001b]0;pwned\\u0007');
    expect(rawView).toContain('\\u000d\nsecond line');
    const attrView = describeDeadLetter(toDeadLetter(letters[2] as Message), NOW);
    expect(attrView).toMatch(/^error: +Boom\\u001b.* failed \\u001b\[2J/m);
    expect(attrView).toContain('leaseq.errorMessage = failed\\u000a\\u001b[2J');
    const jsonView = describeDeadLetter(toDeadLetter(letters[0] as Message), NOW);
    expect(jsonView).toMatch(/^dedup key: +\(unreadable\)$/m);
    expect(jsonView).toContain('"dedupKey": "\\u001b]0;pwned\\u0007');
  });

  it('inspect: last error, result, checkpoint data and owner are escaped', () => {
    // Prepare
    const job: InspectReport['job'] = {
      dedupKey: 'order-1',
      status: JobStatus.InProgress,
      owner: `w-1${RETITLE}`,
      leaseUntil: NOW + 5000,
      token: 3,
      attempts: 2,
      version: 4,
      messageId: 'm-1',
      type: 'ledger.credit',
      lastError: `no\n${CLEAR_SCREEN}`,
      lastErrorClass: `E${C1_AND_BIDI}`,
      checkpoint: { step: `s${RETITLE}`, done: [CLEAR_SCREEN], data: { x: C1_AND_BIDI }, at: NOW },
      result: { note: HOSTILE },
      history: [
        {
          e: 'failed',
          at: NOW - 1000,
          owner: `w-0${RETITLE}`,
          token: 2,
          attempt: 1,
          errorClass: `E${C1_AND_BIDI}`,
          message: `boom${CLEAR_SCREEN}`,
          retryAt: NOW,
        },
      ],
    };
    const report: InspectReport = {
      at: new Date(NOW).toISOString(),
      job,
      timeline: jobTimeline(job),
      lease: { remainingMs: 5000 },
      ownerLeases: [
        {
          leaseKey: `k${RETITLE}`,
          owner: 'o',
          token: 1,
          state: 'held',
          leaseUntil: NOW + 1000,
          remainingMs: 1000,
        },
      ],
    } as InspectReport;
    // Act
    const text = describeJob(report, NOW);
    // Assess
    expect(rawControls(text)).toEqual([]);
    expect(text).toMatch(/^last error: +E\\u009b2J.* no \\u001b\[2J\\u001b\[H ALL JOBS OK$/m);
    expect(text).toMatch(/^\S+ +failed +attempt 1, owner w-0\\u001b\]0;.*boom\\u001b\[2J/m);
  });

  it('leases: every cell is escaped', () => {
    const report: LeasesReport = {
      at: new Date(NOW).toISOString(),
      stuckAfterMs: 600_000,
      jobLeases: [
        {
          dedupKey: RETITLE,
          type: CLEAR_SCREEN,
          owner: C1_AND_BIDI,
          token: 1,
          attempts: 1,
          leaseUntil: NOW,
          remainingMs: 0,
          checkpointStep: HOSTILE,
        },
      ],
      namedLeases: [],
    } as LeasesReport;
    expect(rawControls(describeLeases(report, false))).toEqual([]);
  });

  it('renderTable and renderFields escape values and fold their newlines', () => {
    const table = renderTable([{ header: 'A' }, { header: 'B' }], [[RETITLE, `x\ny${C1_AND_BIDI}`]]);
    const fields = renderFields([['a', `x\n${CLEAR_SCREEN}`]]);
    expect(rawControls(table)).toEqual([]);
    expect(table.split('\n')).toHaveLength(2);
    expect(fields).toBe('a: x \\u001b[2J\\u001b[H ALL JOBS OK');
  });

  it('the one-line error printer escapes a producer text quoted in an error message', () => {
    // Act
    const line = formatError(new Error(`job failed: ${HOSTILE}`), false);
    const debug = formatError(new Error(`job failed: ${HOSTILE}`, { cause: new Error(RETITLE) }), true);
    // Assess
    expect(rawControls(line.slice(0, -1), false)).toEqual([]);
    expect(line.endsWith('\n')).toBe(true);
    expect(line.split('\n')).toHaveLength(2);
    expect(rawControls(debug)).toEqual([]);
    expect(oneLine(CLEAR_SCREEN)).toBe('\\u001b[2J\\u001b[H ALL JOBS OK');
  });

  it('print, note and printJson write no raw control, C1 or bidi byte', () => {
    // Prepare
    const out: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      out.push(String(chunk));
      return true;
    });
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      out.push(String(chunk));
      return true;
    });
    // Act
    print(HOSTILE);
    note(HOSTILE);
    printJson({ key: HOSTILE, [C1_AND_BIDI]: [RETITLE] });
    // Assess
    vi.restoreAllMocks();
    const bytes = out.join('');
    expect(rawControls(bytes)).toEqual([]);
    expect(JSON.parse(out[2] as string)).toEqual({ key: HOSTILE, [C1_AND_BIDI]: [RETITLE] });
  });
});
