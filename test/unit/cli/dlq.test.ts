import type { Message } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { describeRedrive } from '../../../cli/commands/dlq.ts';
import { deadLetterAttributes } from '../../../shared/core/adapters/sqs-job-queue.ts';
import type { JobItem } from '../../../shared/core/contract/job-item.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { SQS_MAX_VISIBILITY_SECONDS } from '../../../shared/core/decisions/backoff.ts';
import {
  assertKnownReason,
  type DeadLetterSummary,
  matchesFilter,
  SQS_REDRIVE_REASON,
  summarise,
  toDeadLetter,
} from '../../../shared/ops/dlq-letters.ts';
import { type RedriveItem, redriveVisibilitySeconds } from '../../../shared/ops/dlq-redrive.ts';
import {
  judgeRepeat,
  letterFacts,
  letterOwner,
  planRedrive,
  REDRIVE_CLOCK_MARGIN_MS,
} from '../../../shared/ops/dlq-redrive-plan.ts';
import { InvalidFilterError } from '../../../shared/ops/ops-errors.ts';

const body = JSON.stringify({
  v: 1,
  id: 'i',
  dedupKey: 'order-9',
  type: 'ledger.credit',
  payload: { secret: 1 },
});

describe('Function: toDeadLetter', () => {
  it('decodes leaseq reason attributes', () => {
    // Prepare
    const message: Message = {
      MessageId: 'm-1',
      Body: body,
      MessageAttributes: deadLetterAttributes({
        reason: 'permanent-error',
        errorClass: 'PermanentJobError',
        errorMessage: 'no',
        attempts: 3,
        dedupKey: 'order-9',
        worker: 'w-1',
        messageId: 'orig-1',
        type: 'ledger.credit',
      }),
      Attributes: { ApproximateReceiveCount: '2', SentTimestamp: '1714564800000' },
    };
    // Act
    const letter = toDeadLetter(message);
    // Assess
    expect(summarise(letter)).toMatchObject({
      messageId: 'm-1',
      dedupKey: 'order-9',
      type: 'ledger.credit',
      reason: 'permanent-error',
      errorClass: 'PermanentJobError',
      errorMessage: 'no',
      attempts: 3,
      worker: 'w-1',
      originalMessageId: 'orig-1',
      receiveCount: 2,
    });
    expect(summarise(letter)).not.toHaveProperty('body');
    expect(letter.body).toBe(body);
  });

  it('reads key and type from the body when SQS itself moved the message (no attributes)', () => {
    const letter = toDeadLetter({
      MessageId: 'm-2',
      Body: body,
      Attributes: { SentTimestamp: '1714564800000' },
    });
    expect(letter).toMatchObject({
      dedupKey: 'order-9',
      type: 'ledger.credit',
      reason: SQS_REDRIVE_REASON,
      deadAt: '2024-05-01T12:00:00.000Z',
    });
    expect(toDeadLetter({ MessageId: 'm-3', Body: 'not json' })).not.toHaveProperty('dedupKey');
  });

  it("takes no job type from a plain body's own type field (docs/envelope.md, Plain bodies)", () => {
    // A producer's own JSON, moved by SQS's redrive (a Powertools-era letter) or refused invalid-plain-key:
    // its `type` is the producer's, not a job type, and a `dlq redrive --type` must not be matched by it.
    const plain = JSON.stringify({ type: 'order.created', orderId: 'o-1' });
    expect(toDeadLetter({ MessageId: 'm-4', Body: plain })).not.toHaveProperty('type');
    const refused = toDeadLetter({
      MessageId: 'm-5',
      Body: plain,
      MessageAttributes: deadLetterAttributes({
        reason: 'invalid-plain-key',
        errorClass: 'InvalidEnvelopeError',
        errorMessage: 'plain body: the key path id selects nothing',
        attempts: 0,
        worker: 'w-1',
        messageId: 'orig-5',
      }),
    });
    expect(refused).toMatchObject({ reason: 'invalid-plain-key' });
    expect(refused).not.toHaveProperty('type');
  });
});

describe('Function: matchesFilter', () => {
  const letter: DeadLetterSummary = {
    messageId: 'm',
    dedupKey: 'k-1',
    type: 'ledger.credit',
    reason: 'invalid-bad-schema',
  };
  it('requires every given field to match', () => {
    expect(matchesFilter(letter, {})).toBe(true);
    expect(matchesFilter(letter, { type: 'ledger.credit' })).toBe(true);
    expect(matchesFilter(letter, { type: 'ledger.transfer' })).toBe(false);
    expect(matchesFilter(letter, { reason: 'invalid-bad-schema', dedupKey: 'k-1' })).toBe(true);
    expect(matchesFilter(letter, { reason: 'invalid-bad-schema', dedupKey: 'k-2' })).toBe(false);
  });
  it('matches a reason exactly, or by a prefix ending in *', () => {
    expect(matchesFilter(letter, { reason: 'invalid' })).toBe(false);
    expect(matchesFilter(letter, { reason: 'invalid-*' })).toBe(true);
    expect(matchesFilter(letter, { reason: 'max-*' })).toBe(false);
  });
});

describe('Function: planRedrive', () => {
  const now = 1_000_000;
  const job = (status: JobItem['status'], leaseUntil = 0): JobItem => ({
    dedupKey: 'k',
    status,
    leaseUntil,
    token: 1,
    attempts: 5,
    version: 3,
    messageId: 'm',
    owner: 'w-1',
  });
  it('resets any item neither finished nor running, sends when there is none, skips the others', () => {
    expect(planRedrive(job(JobStatus.Dead), now)).toEqual({ action: 'reset-and-send' });
    expect(planRedrive(undefined, now).action).toBe('send');
    // A waiting job, or one whose lease ended (its worker died, or marking it DEAD failed), would keep
    // its used-up attempts and die again at once: its attempts start again too.
    expect(planRedrive(job(JobStatus.RetryWait), now).action).toBe('reset-and-send');
    expect(planRedrive(job(JobStatus.InProgress, now - REDRIVE_CLOCK_MARGIN_MS - 1), now).action).toBe(
      'reset-and-send',
    );
    expect(planRedrive(job(JobStatus.InProgress, now + 1), now)).toEqual({
      action: 'skip',
      skip: 'running',
      why: 'job is running now (lease held by w-1)',
    });
    expect(planRedrive(job(JobStatus.Completed), now)).toMatchObject({
      action: 'skip',
      why: /already completed/,
    });
  });

  it('never resets the item of a job of another type (a dedup-key-collision letter, issue 18)', () => {
    const dead = { ...job(JobStatus.Dead), type: 'ledger.transfer' };
    expect(planRedrive(dead, now, { type: 'report.send' })).toEqual({
      action: 'skip',
      skip: 'other-type',
      why: 'the dedupKey belongs to a job of type ledger.transfer; send this report.send job under a key of its own',
    });
    expect(planRedrive(dead, now, { type: 'ledger.transfer' })).toEqual({ action: 'reset-and-send' });
  });

  it('never resets or sends over the same-type job of another message for a never-claimed letter (attempts 0: a bad payload or envelope; rev18 D, issue 31)', () => {
    const other = {
      ...job(JobStatus.InProgress, now - REDRIVE_CLOCK_MARGIN_MS - 1),
      type: 'ledger.transfer',
      attempts: 2,
      deadReason: 'permanent-error',
    };
    const copy = {
      type: 'ledger.transfer',
      attempts: 0,
      messageId: 'copy',
      recorded: true,
      reason: 'invalid-bad-payload',
    };
    for (const item of [
      other,
      { ...other, status: JobStatus.Dead },
      { ...other, status: JobStatus.RetryWait },
    ]) {
      expect(planRedrive(item, now, copy)).toMatchObject({ action: 'skip', skip: 'other-message' });
    }
    // Finished jobs: stale, whatever the letter (a cancelled job's copy was reported redriven).
    expect(planRedrive({ ...other, status: JobStatus.Cancelled }, now, copy)).toMatchObject({
      skip: 'cancelled',
    });
    expect(planRedrive({ ...other, status: JobStatus.Completed }, now, copy)).toMatchObject({
      skip: 'completed',
    });
    // A dead key past its deadKeyTtl takes the copy as a fresh send.
    const expired = { ...other, status: JobStatus.Dead, deadKeyUntil: now - 1 };
    expect(planRedrive(expired, now, copy).action).toBe('send');
    // A claimed job's letter (attempts from 1) of the item's message still resets it; a collision is skipped.
    expect(
      planRedrive(other, now, { type: 'ledger.transfer', attempts: 2, messageId: 'm', recorded: true })
        .action,
    ).toBe('reset-and-send');
    expect(planRedrive(other, now, { type: 'report.send', attempts: 0 }).action).toBe('skip');
  });

  it('resets and sends a never-claimed letter the item waits on: its own message, its death, or the message a redrive sent', () => {
    const waiting = { ...job(JobStatus.RetryWait), type: 't', attempts: 1 };
    const refused = {
      type: 't',
      attempts: 0,
      messageId: 'm',
      recorded: true,
      reason: 'invalid-payload-missing',
      diedAt: now,
    };
    expect(planRedrive(waiting, now, refused).action).toBe('reset-and-send');
    const other = { ...refused, messageId: 'sent-by-redrive' };
    const deadOfIt = { ...waiting, status: JobStatus.Dead, deadReason: 'invalid-payload-missing' };
    expect(planRedrive(deadOfIt, now, other).action).toBe('reset-and-send');
    const redriven = {
      ...waiting,
      attempts: 0,
      history: [{ e: 'redrive' as const, at: now - 1000, by: 'ops' }],
    };
    expect(planRedrive(redriven, now, other).action).toBe('reset-and-send');
    // A letter from before that redrive is not its message.
    expect(planRedrive(redriven, now, { ...other, diedAt: now - 2000 })).toMatchObject({
      skip: 'other-message',
    });
  });
});

describe('Function: letterOwner (issue 31: a redrive never sends a letter over another job)', () => {
  const now = 5_000_000;
  const item = (over: Partial<JobItem> = {}): JobItem => ({
    dedupKey: 'k',
    type: 't',
    status: JobStatus.RetryWait,
    leaseUntil: 0,
    token: 9,
    attempts: 1,
    version: 4,
    messageId: 'm2',
    ...over,
  });
  const reset = { e: 'reset' as const, at: now - 1000, wasDeadAt: now - 60_000 };

  it("tells the item's own letter, a letter from before a dead key's reset, another message's, and a moved letter", () => {
    expect(letterOwner(item(), { messageId: 'm2', recorded: true })).toBe('own');
    expect(
      letterOwner(item({ history: [reset] }), { messageId: 'm1', recorded: true, diedAt: now - 60_000 }),
    ).toBe('newer-job');
    // The job's own letter after the reset is its own, however old the reset.
    expect(
      letterOwner(item({ history: [reset] }), { messageId: 'm2', recorded: true, diedAt: now - 60_000 }),
    ).toBe('own');
    expect(letterOwner(item(), { messageId: 'm1', recorded: true, diedAt: now })).toBe('other');
    // A letter the queue's own redrive moved carries no record: its own id only counts when it matches.
    expect(letterOwner(item(), { messageId: 'm1', recorded: false, diedAt: now })).toBe('unknown');
  });

  it("plans a letter from before the reset as 'newer-job' and another message's as 'older-letter', in every unfinished status", () => {
    for (const status of [JobStatus.Dead, JobStatus.RetryWait, JobStatus.InProgress]) {
      const current = item({ status, leaseUntil: 1, history: [reset] });
      expect(
        planRedrive(current, now, {
          type: 't',
          attempts: 3,
          messageId: 'm1',
          recorded: true,
          diedAt: now - 60_000,
        }),
      ).toMatchObject({ action: 'skip', skip: 'newer-job' });
      expect(
        planRedrive(item({ status, leaseUntil: 1 }), now, {
          type: 't',
          attempts: 3,
          messageId: 'm1',
          recorded: true,
        }),
      ).toMatchObject({ action: 'skip', skip: 'older-letter' });
    }
  });

  it('reads a decoded letter: leaseq records its message; a moved letter offers its own id', () => {
    const recorded = toDeadLetter({
      MessageId: 'dlq-1',
      Body: body,
      MessageAttributes: deadLetterAttributes({
        reason: 'permanent-error',
        errorClass: 'E',
        errorMessage: 'no',
        attempts: 2,
        dedupKey: 'order-9',
        worker: 'w',
        messageId: 'm-orig',
        type: 'ledger.credit',
      }),
    });
    expect(letterFacts(recorded)).toMatchObject({ messageId: 'm-orig', recorded: true, attempts: 2 });
    const moved = toDeadLetter({ MessageId: 'm-moved', Body: body, Attributes: { SentTimestamp: '1000' } });
    expect(letterFacts(moved)).toEqual({
      type: 'ledger.credit',
      reason: 'sqs-max-receives',
      messageId: 'm-moved',
      recorded: false,
      diedAt: 1000,
    });
  });
});

describe('Function: planRedrive, with an operator clock that may run ahead of the workers', () => {
  const now = 100_000_000;
  const minute = 60_000;
  const running = (leaseUntil: number) =>
    ({
      dedupKey: 'k',
      status: JobStatus.InProgress,
      leaseUntil,
      token: 1,
      attempts: 5,
      version: 3,
    }) as JobItem;

  it('skips a lease at its exact end: the stores still hold it (over is `leaseUntil < now`)', () => {
    expect(planRedrive(running(now), now).action).toBe('skip');
  });

  it('skips a lease over only minutes ago by this clock, and resets one over longer than the margin', () => {
    expect(planRedrive(running(now - minute), now).action).toBe('skip');
    expect(planRedrive(running(now - REDRIVE_CLOCK_MARGIN_MS), now).action).toBe('skip');
    expect(planRedrive(running(now - REDRIVE_CLOCK_MARGIN_MS - 1), now).action).toBe('reset-and-send');
  });
});

describe('Function: judgeRepeat (a later letter of a job this redrive already sent back, issue 23)', () => {
  const at = Date.parse('2024-05-01T12:00:00Z');
  const item = (version: number): JobItem => ({
    dedupKey: 'order-9',
    type: 'ledger.credit',
    status: JobStatus.RetryWait,
    version,
    token: 3,
    attempts: 0,
    leaseUntil: 0,
    messageId: 'sent-by-redrive',
  });
  const letter = (originalMessageId: string, sentAt: number) =>
    toDeadLetter({
      MessageId: `dlq-${originalMessageId}-${sentAt}`,
      Body: body,
      MessageAttributes: deadLetterAttributes({
        reason: 'permanent-error',
        errorClass: 'PermanentJobError',
        errorMessage: 'no',
        attempts: 1,
        dedupKey: 'order-9',
        worker: 'w-1',
        messageId: originalMessageId,
        type: 'ledger.credit',
      }),
      Attributes: { SentTimestamp: String(sentAt) },
    });
  const sentIds = new Set(['sent-by-redrive']);

  it('a letter of the message this redrive sent is the job dead again', () => {
    expect(judgeRepeat(letter('sent-by-redrive', at + 1000), sentIds, { versionAfter: 5, at }, item(5))).toBe(
      'dead-again',
    );
  });

  it('a letter of another message is a second letter of the same death while the item is as the reset left it', () => {
    // No claim since the reset (the version a claim moves is the reset's): no death since, whenever it came.
    expect(judgeRepeat(letter('orig-1', at + 1000), sentIds, { versionAfter: 5, at }, item(5))).toBe(
      'duplicate',
    );
  });

  it('a letter that was in the DLQ a clock margin before the reset is a second letter of the same death', () => {
    const before = at - REDRIVE_CLOCK_MARGIN_MS - 1;
    expect(judgeRepeat(letter('orig-1', before), sentIds, { versionAfter: 5, at }, item(7))).toBe(
      'duplicate',
    );
  });

  it('a letter newer than that, of a job claimed since the reset, is the job dead again', () => {
    expect(judgeRepeat(letter('orig-1', at - 60_000), sentIds, { versionAfter: 5, at }, item(7))).toBe(
      'dead-again',
    );
    expect(judgeRepeat(letter('orig-1', at + 1000), sentIds, { versionAfter: 5, at }, item(7))).toBe(
      'dead-again',
    );
  });
});

describe('Function: redriveVisibilitySeconds', () => {
  it('holds a page of 10 letters for a minute plus the time the rate takes to send them', () => {
    expect(redriveVisibilitySeconds(undefined)).toBe(60);
    expect(redriveVisibilitySeconds(5)).toBe(62);
    expect(redriveVisibilitySeconds(1 / 60)).toBe(660);
  });

  it("never asks for more than SQS's 12 h maximum, which a rate below ~0.83 letters/h would (issue 23)", () => {
    expect(SQS_MAX_VISIBILITY_SECONDS).toBe(43_200);
    expect(redriveVisibilitySeconds(10 / (43_200 - 60))).toBe(43_200);
    expect(redriveVisibilitySeconds(0.5 / 3600)).toBe(43_200);
    expect(redriveVisibilitySeconds(Number.MIN_VALUE)).toBe(43_200);
  });
});

describe('Function: describeRedrive', () => {
  it('counts letters that came back during the redrive, and second letters of one death, apart from the letters it sent', () => {
    const item = (outcome: RedriveItem['outcome']): RedriveItem => ({
      messageId: `m-${outcome}`,
      reason: 'permanent-error',
      outcome,
      reset: outcome === 'redriven',
    });
    const text = describeRedrive({
      dryRun: false,
      matched: 2,
      redriven: 1,
      skipped: 0,
      deadAgain: 1,
      duplicates: 1,
      failed: 0,
      notMatched: 0,
      seen: 3,
      dlqDepth: 3,
      items: [item('redriven'), item('dead-again'), item('duplicate')],
    });
    expect(text).toMatch(
      /redrove 1 \(1 of them dead-lettered again while it ran; their new letters stay in the DLQ\), skipped 0, failed 0; 1 second letter of a death it sent back, left in the DLQ;/,
    );
  });
});

describe('Function: describeRedrive, with skipped letters (issue 31)', () => {
  it('names each skip reason in the OUTCOME column and counts the skips by reason', () => {
    // Prepare
    const skipped = (skip: RedriveItem['skip'], i: number): RedriveItem => ({
      messageId: `m-${i}`,
      dedupKey: 'order-9',
      reason: 'permanent-error',
      outcome: 'skipped',
      skip,
      reset: false,
      detail: 'why',
    });

    // Act
    const text = describeRedrive({
      dryRun: false,
      matched: 3,
      redriven: 0,
      skipped: 3,
      deadAgain: 0,
      duplicates: 0,
      failed: 0,
      notMatched: 0,
      seen: 3,
      dlqDepth: 3,
      items: [skipped('newer-job', 1), skipped('older-letter', 2), skipped('newer-job', 3)],
    });

    // Assess
    expect(text).toMatch(/m-1 +order-9 +permanent-error +skipped \(newer-job\) +no +why/);
    expect(text).toContain('skipped 3 (2 newer-job, 1 older-letter)');
  });
});

describe('Function: assertKnownReason', () => {
  it('takes a known reason or a prefix of one, and names the known ones otherwise', () => {
    expect(() => assertKnownReason('invalid-bad-payload')).not.toThrow();
    expect(() => assertKnownReason('dedup-key-collision')).not.toThrow();
    expect(() => assertKnownReason('invalid-*')).not.toThrow();
    expect(() => assertKnownReason('max-attempt')).toThrow(/expected one of permanent-error, max-attempts/);
    expect(() => assertKnownReason('nope*')).toThrow(InvalidFilterError);
  });
});
