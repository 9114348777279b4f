import { describe, expect, it } from 'vitest';
import type { HistoryEvent } from '../../../shared/core/contract/job-history.ts';
import type { JobItem } from '../../../shared/core/contract/job-item.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { jobTimeline } from '../../../shared/ops/timeline.ts';

const T0 = Date.parse('2026-12-01T00:00:00.000Z');

function item(history: HistoryEvent[], extra: Partial<JobItem> = {}): JobItem {
  return {
    dedupKey: 'k',
    status: JobStatus.InProgress,
    owner: 'w-c',
    leaseUntil: T0 + 60_000,
    token: 12,
    attempts: 3,
    version: 5,
    messageId: 'm',
    type: 't',
    createdAt: new Date(T0).toISOString(),
    claimedAt: T0 + 20_000,
    history,
    ...extra,
  };
}

describe('Function: jobTimeline', () => {
  it('shows once an event a resent renewal appended twice (same kind, time, token and owner)', () => {
    // Prepare
    const takeover: HistoryEvent = {
      e: 'takeover',
      at: T0 + 20_000,
      owner: 'w-c',
      token: 12,
      attempt: 3,
      fromOwner: 'w-b',
      fromToken: 11,
      leaseEndedAt: T0 + 19_000,
      fromClaimedAt: T0 + 10_000,
      fromAttempt: 2,
    };

    // Act
    const timeline = jobTimeline(item([takeover, { ...takeover }]));

    // Assess: created, the takeover (which is the current claim: no separate `claimed` line).
    expect(timeline.map((e) => e.kind)).toEqual(['created', 'takeover']);
    expect(timeline[1]?.detail).toBe(
      'its lease (token 11, attempt 2, claimed 2026-12-01T00:00:10.000Z) ended 1.0 s before',
    );
  });

  it('names the error class once: the worker stores the message as `Name: message` already', () => {
    // Found by test/integration/cli/inspect-history.test.ts: real workers' events read
    // "TransientJobError: TransientJobError: first run fails".
    const failed: HistoryEvent = {
      e: 'failed',
      at: T0 + 1000,
      owner: 'w-a',
      token: 10,
      attempt: 1,
      errorClass: 'TransientJobError',
      message: 'TransientJobError: first run fails',
      retryAt: T0 + 2000,
    };
    const dead: HistoryEvent = {
      e: 'dead',
      at: T0 + 3000,
      owner: 'w-c',
      token: 12,
      attempt: 3,
      reason: 'permanent-error',
      errorClass: 'PermanentJobError',
      // A message that does not start with its class (a redactError hook's text) still gets it.
      message: 'redacted',
    };

    // Act
    const timeline = jobTimeline(item([failed, dead], { status: JobStatus.Dead, claimedAt: undefined }));

    // Assess
    expect(timeline.map((e) => e.detail)).toEqual([
      undefined,
      'TransientJobError: first run fails; retry in 1.0 s',
      'PermanentJobError: redacted',
    ]);
  });

  it('keeps two events of one kind that differ (two failures of two attempts)', () => {
    // Prepare
    const failed = (token: number, attempt: number): HistoryEvent => ({
      e: 'failed',
      at: T0 + attempt * 1000,
      owner: 'w-a',
      token,
      attempt,
      errorClass: 'E',
      message: 'm',
      retryAt: T0 + attempt * 1000 + 500,
    });

    // Act
    const timeline = jobTimeline(item([failed(10, 1), failed(11, 2)]));

    // Assess
    expect(timeline.filter((e) => e.kind === 'failed').map((e) => e.token)).toEqual([10, 11]);
  });

  it('shows an event of a kind it does not know (written by a newer leaseq) instead of failing the whole timeline', () => {
    // Found by the inspector's review: the job page of such an item was an error page.
    const unknown = {
      e: 'paused',
      at: T0 + 30_000,
      owner: 'w-x',
      reason: '<b>x</b>',
    } as unknown as HistoryEvent;
    const odd = { at: 'not a time' } as unknown as HistoryEvent;

    const timeline = jobTimeline(item([unknown, odd]));

    const shown = timeline.find((e) => e.title.includes('paused'));
    expect(shown).toMatchObject({ at: T0 + 30_000, owner: 'w-x' });
    expect(timeline.every((e) => Number.isFinite(e.at))).toBe(true);
  });
});
