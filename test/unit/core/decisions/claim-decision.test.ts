import { describe, expect, it } from 'vitest';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import {
  classifyClaim,
  decideRefusal,
  isOwnClaim,
  needsLeasedClaim,
} from '../../../../shared/core/decisions/claim-decision.ts';

const NOW = 1_800_000_000_000;

function item(overrides: Partial<JobItem> = {}): JobItem {
  return {
    dedupKey: 'order-1',
    status: JobStatus.InProgress,
    owner: 'worker-a',
    leaseUntil: NOW + 10_000,
    token: 7,
    attempts: 1,
    version: 1,
    messageId: 'm-1',
    ...overrides,
  };
}

describe('Function: decideRefusal', () => {
  it('deletes a duplicate of a completed job', () => {
    expect(decideRefusal(item({ status: JobStatus.Completed }), 'm-2', NOW)).toEqual({
      kind: 'duplicate-completed',
    });
  });

  it('deletes a racing copy (other message id, live lease)', () => {
    expect(decideRefusal(item(), 'm-2', NOW)).toEqual({ kind: 'duplicate-racing', owner: 'worker-a' });
  });

  it('hides our own message until the lease ends, without deleting it', () => {
    expect(decideRefusal(item(), 'm-1', NOW)).toEqual({ kind: 'own-message-early', hideForMs: 10_000 });
  });

  it("hides a limit's re-send of our own message (same origin, whatever its id) as our own message", () => {
    // Found by the interleaving model: a bounce re-sent the message of a job waiting for its retry, and
    // the re-send, taken for a racing copy, was deleted: the job was stranded IN_PROGRESS.
    expect(decideRefusal(item(), { messageId: 'm-7', originId: 'm-1' }, NOW)).toEqual({
      kind: 'own-message-early',
      hideForMs: 10_000,
    });
    expect(decideRefusal(item(), { messageId: 'm-7', originId: 'm-3' }, NOW)).toEqual({
      kind: 'duplicate-racing',
      owner: 'worker-a',
    });
    // An item a re-send claimed names that message's origin: a later re-send of it is ours too.
    const claimedByResend = item({ messageId: 'm-5', originId: 'm-1' });
    expect(decideRefusal(claimedByResend, { messageId: 'm-9', originId: 'm-1' }, NOW).kind).toBe(
      'own-message-early',
    );
    expect(decideRefusal(claimedByResend, 'm-1', NOW).kind).toBe('own-message-early');
    expect(decideRefusal(claimedByResend, 'm-2', NOW).kind).toBe('duplicate-racing');
    // A redrive's message (it names the letter's message, m-5) that a bounce re-sent: its origin is m-5.
    expect(decideRefusal(claimedByResend, { messageId: 'm-10', originId: 'm-5' }, NOW).kind).toBe(
      'own-message-early',
    );
    // A message an older worker re-sent (its `leaseq-resent-from` list only) is still known.
    expect(
      decideRefusal(item(), { messageId: 'm-7', originId: 'm-3', formerIds: ['m-3', 'm-1'] }, NOW).kind,
    ).toBe('own-message-early');
  });

  it('treats a job waiting for its retry like a live lease', () => {
    const waiting = item({ status: JobStatus.RetryWait, leaseUntil: NOW + 4000 });
    delete (waiting as { owner?: string }).owner;
    expect(decideRefusal(waiting, 'm-1', NOW)).toEqual({ kind: 'own-message-early', hideForMs: 4000 });
    expect(decideRefusal(waiting, 'm-9', NOW)).toEqual({ kind: 'duplicate-racing' });
  });

  it('drops copies of a dead-lettered job', () => {
    expect(decideRefusal(item({ status: JobStatus.Dead }), 'm-2', NOW)).toEqual({ kind: 'dead-copy' });
  });

  it('calls a refusal by an already expired lease contended (retry soon)', () => {
    expect(decideRefusal(item({ leaseUntil: NOW - 1 }), 'm-2', NOW)).toEqual({ kind: 'contended' });
  });

  it("drops a redrive's message of another life of the key, whatever the lease says (never handed back)", () => {
    // Prepare: a job of life 1 (a fresh send reset the key), waiting or running, live or ended; a
    // redrive's message sent in place of life 0's message m-1.
    const redriven = { messageId: 'm-9', originId: 'm-1', formerIds: ['m-1'], life: 0 };
    const items = [
      item({ life: 1 }),
      item({ life: 1, leaseUntil: NOW - 1 }),
      item({ life: 1, status: JobStatus.RetryWait, owner: undefined, leaseUntil: NOW - 1 }),
    ];

    // Act + Assess
    for (const old of items)
      expect(decideRefusal(old, redriven, NOW)).toEqual({ kind: 'other-life', life: 0 });
    // Its own life's item, or one met by a message of no life, decides as before.
    expect(decideRefusal(item({ messageId: 'm-1' }), redriven, NOW)).toEqual({
      kind: 'own-message-early',
      hideForMs: 10_000,
    });
    expect(decideRefusal(item({ life: 1, leaseUntil: NOW - 1 }), 'm-2', NOW)).toEqual({ kind: 'contended' });
    expect(decideRefusal(item({ life: 1, status: JobStatus.Dead }), redriven, NOW)).toEqual({
      kind: 'dead-copy',
    });
  });
});

describe('Function: classifyClaim', () => {
  it('tells fresh, retry and takeover apart', () => {
    expect(classifyClaim(undefined)).toBe('fresh');
    expect(classifyClaim(item({ status: JobStatus.RetryWait }))).toBe('retry');
    expect(classifyClaim(item({ leaseUntil: NOW - 1 }))).toBe('takeover');
  });
});

describe('Function: isOwnClaim', () => {
  const mine = { owner: 'w1', messageId: 'm1', now: 1000 };
  const ours = (over: Partial<JobItem>) => item({ owner: 'w1', messageId: 'm1', claimedAt: 1000, ...over });

  it('is true only for the item this very claim wrote (same owner, message and claim time)', () => {
    expect(isOwnClaim(ours({}), mine)).toBe(true);
    expect(isOwnClaim(ours({ claimedAt: 999 }), mine)).toBe(false); // an earlier claim of ours
    expect(isOwnClaim(ours({ owner: 'w2' }), mine)).toBe(false);
    expect(isOwnClaim(ours({ messageId: 'm2' }), mine)).toBe(false);
    expect(isOwnClaim(ours({ status: JobStatus.Completed }), mine)).toBe(false);
  });
});

describe('Function: needsLeasedClaim', () => {
  const ended = { leaseUntil: NOW - 1 };
  const checkpoint = { step: 'debit', done: ['debit'], at: NOW - 5 };

  it('asks for a claim for a checkpointed or used-up job whose lease is over', () => {
    expect(needsLeasedClaim(item({ ...ended, checkpoint }), 5, NOW)).toBe(true);
    expect(needsLeasedClaim(item({ ...ended, attempts: 5 }), 5, NOW)).toBe(true);
    expect(needsLeasedClaim(item({ ...ended, status: JobStatus.RetryWait, checkpoint }), 5, NOW)).toBe(true);
  });

  it('leaves live leases, finished jobs and plain refusals to the refusal decision', () => {
    expect(needsLeasedClaim(item({ checkpoint }), 5, NOW)).toBe(false);
    expect(needsLeasedClaim(item({ ...ended, attempts: 4 }), 5, NOW)).toBe(false);
    expect(needsLeasedClaim(item({ ...ended, status: JobStatus.Completed, checkpoint }), 5, NOW)).toBe(false);
    expect(needsLeasedClaim(item({ ...ended, status: JobStatus.Dead, attempts: 5 }), 5, NOW)).toBe(false);
  });
});
