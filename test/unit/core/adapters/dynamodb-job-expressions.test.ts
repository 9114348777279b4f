import { describe, expect, it } from 'vitest';
import { jobSummaryScan } from '../../../../shared/core/adapters/dynamodb-scans.ts';
import { HISTORY_MAX, type HistoryEvent } from '../../../../shared/core/contract/job-history.ts';
import type { JobLease } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { historyWrite } from '../../../../shared/core/decisions/history.ts';
import { checkpointUpdate } from '../../../../shared/core/protocol/checkpoint.ts';
import { claimUpdate, droppedCopyUpdate } from '../../../../shared/core/protocol/claim.ts';
import { completeUpdate } from '../../../../shared/core/protocol/complete.ts';
import { FENCE, leaseLostUpdate } from '../../../../shared/core/protocol/fence.ts';
import { giveUpUpdate } from '../../../../shared/core/protocol/give-up.ts';
import { withHistory } from '../../../../shared/core/protocol/history-writes.ts';
import { redriveUpdate } from '../../../../shared/core/protocol/redrive.ts';
import { renewUpdate } from '../../../../shared/core/protocol/renew.ts';
import { resetClaimUpdate } from '../../../../shared/core/protocol/reset.ts';
import type { JobItemUpdate } from '../../../../shared/core/protocol/update.ts';
import { parseCondition, parseUpdate } from '../../../../shared/testing/dynamodb-expressions.ts';

const lease: JobLease = {
  dedupKey: 'k',
  owner: 'w1',
  token: 7,
  attempts: 2,
  messageId: 'm',
  version: 3,
  leaseUntil: 5_000,
};
const claim = { dedupKey: 'k', owner: 'w1', messageId: 'm', type: 't', createdAt: 'c', now: 1_000 };

const updates: Record<string, JobItemUpdate> = {
  claim: claimUpdate('jobs', claim, { leaseUntil: 31_000, expiresAt: 99 }),
  claimOfFirstLife: claimUpdate('jobs', { ...claim, life: 0 }, { leaseUntil: 31_000, expiresAt: 99 }),
  claimOfLife: claimUpdate('jobs', { ...claim, life: 2 }, { leaseUntil: 31_000, expiresAt: 99 }),
  fastCommitOfLife: claimUpdate(
    'jobs',
    { ...claim, life: 1 },
    { leaseUntil: 1_000, expiresAt: 99 },
    { result: undefined, maxAttempts: 5 },
  ),
  ownClaimOfLife: claimUpdate(
    'jobs',
    { ...claim, life: 2, onlyIfMessageId: 'm' },
    { leaseUntil: 31_000, expiresAt: 99 },
  ),
  fastCommit: claimUpdate(
    'jobs',
    claim,
    { leaseUntil: 1_000, expiresAt: 99 },
    { result: undefined, maxAttempts: 5 },
  ),
  renew: renewUpdate('jobs', lease, 35_000, 99),
  checkpoint: checkpointUpdate('jobs', lease, { step: 's', done: ['s'], data: {}, at: 2_000 }),
  complete: completeUpdate('jobs', lease, { result: 1, now: 2_000, expiresAt: 99 }),
  release: giveUpUpdate('jobs', lease, {
    status: JobStatus.RetryWait,
    leaseUntil: 9_000,
    now: 2_000,
    error: { message: 'x'.repeat(2000), errorClass: 'Error' },
    refundAttempt: true,
    expiresAt: 99,
  }),
  markDead: giveUpUpdate('jobs', lease, {
    status: JobStatus.Dead,
    leaseUntil: 0,
    now: 2_000,
    error: { message: 'bad', errorClass: 'Error' },
    refundAttempt: false,
    expiresAt: 99,
    dead: {},
  }),
  redrive: redriveUpdate('jobs', 'k', 2_000, 99),
  markDeadWithTtl: giveUpUpdate('jobs', lease, {
    status: JobStatus.Dead,
    leaseUntil: 0,
    now: 2_000,
    error: { message: 'bad', errorClass: 'Error' },
    refundAttempt: false,
    expiresAt: 99,
    dead: { deadKeyUntil: 9_000 },
  }),
  releaseWithHistory: withHistory(
    giveUpUpdate('jobs', lease, {
      status: JobStatus.RetryWait,
      leaseUntil: 9_000,
      now: 2_000,
      error: { message: 'bad', errorClass: 'Error' },
      refundAttempt: false,
      expiresAt: 99,
    }),
    historyWrite('k', [], [{ e: 'failed', at: 2_000, errorClass: 'E', message: 'm', retryAt: 9_000 }], 2_000),
  ),
  checkpointReplacingHistory: withHistory(
    checkpointUpdate('jobs', lease, { step: 's', done: ['s'], at: 2_000 }),
    historyWrite('k', events(HISTORY_MAX), [{ e: 'step', at: 2_000, step: 's' }], 2_000),
  ),
  resetClaim: resetClaimUpdate(
    'jobs',
    claim,
    { token: 7, version: 3 },
    { leaseUntil: 31_000, expiresAt: 99 },
  ),
  leaseLost: leaseLostUpdate(
    'jobs',
    'k',
    { e: 'lease-lost', at: 1, why: 'w' },
    { problemShard: 'p01', problemAt: 1 },
  ),
  droppedAppend: droppedCopyUpdate('jobs', { dedupKey: 'k', token: 7 }, { event: dropped(1) }),
  droppedInPlace: droppedCopyUpdate(
    'jobs',
    { dedupKey: 'k', token: 7, history: [dropped(1)] },
    { event: dropped(2), index: 0 },
  ),
};

function events(n: number): HistoryEvent[] {
  return Array.from({ length: n }, (_, i) => ({ e: 'step', at: i, step: `s${i}` }));
}

function dropped(count: number): HistoryEvent {
  return { e: 'dropped', at: count, count, messageId: `m${count}` };
}

/** The update applied to `item` if its condition holds, by the in-memory DynamoDB evaluator; else undefined. */
function apply(update: JobItemUpdate, item: Record<string, unknown>): Record<string, unknown> | undefined {
  const p = { names: update.ExpressionAttributeNames, values: update.ExpressionAttributeValues };
  if (update.ConditionExpression && !parseCondition(update.ConditionExpression, p)(item)) return undefined;
  return parseUpdate(update.UpdateExpression ?? '', p)(item);
}

/** The `#name` and `:value` placeholders an expression uses. */
function placeholders(update: JobItemUpdate, sigil: '#' | ':'): Set<string> {
  const text = `${update.UpdateExpression ?? ''} ${update.ConditionExpression ?? ''}`;
  const pattern = sigil === '#' ? /#[A-Za-z]+/g : /:[A-Za-z]+/g;
  return new Set(text.match(pattern) ?? []);
}

describe('Module: dynamodb-job-expressions', () => {
  // DynamoDB refuses an expression with an undeclared placeholder, and a declared one it does not use.
  it.each(Object.entries(updates))('%s declares exactly the placeholders it uses', (_name, update) => {
    expect(new Set(Object.keys(update.ExpressionAttributeNames ?? {}))).toEqual(placeholders(update, '#'));
    expect(new Set(Object.keys(update.ExpressionAttributeValues))).toEqual(placeholders(update, ':'));
  });

  it('puts every write after the claim under the fence of this lease', () => {
    for (const name of ['renew', 'checkpoint', 'complete', 'release', 'markDead']) {
      const update = updates[name];
      expect(update?.ConditionExpression?.startsWith(FENCE), name).toBe(true);
      expect(update?.ExpressionAttributeValues).toMatchObject({
        ':owner': 'w1',
        ':token': 7,
        ':inProgress': JobStatus.InProgress,
      });
      expect(update?.Key).toEqual({ dedupKey: 'k' });
    }
    expect(updates.checkpoint?.ExpressionAttributeValues[':version']).toBe(3);
  });

  it('claims IN_PROGRESS; the fast commit completes and also refuses checkpoints and used-up attempts', () => {
    expect(updates.claim?.ExpressionAttributeValues[':status']).toBe(JobStatus.InProgress);
    expect(updates.claim?.ConditionExpression).not.toContain('#checkpoint');
    expect(updates.fastCommit?.ExpressionAttributeValues).toMatchObject({
      ':status': JobStatus.Completed,
      ':result': null,
      ':maxAttempts': 5,
    });
    expect(updates.fastCommit?.ConditionExpression).toContain('attribute_not_exists(#checkpoint)');
  });

  it('cuts the last error to 1000 characters and refunds the attempt only when asked', () => {
    expect(String(updates.release?.ExpressionAttributeValues[':lastError'])).toHaveLength(1000);
    expect(updates.release?.UpdateExpression).toContain('#attempts = #attempts - :one');
    expect(updates.markDead?.UpdateExpression).not.toContain('#attempts');
  });

  describe('the history (docs/protocol.md, "History")', () => {
    const held = {
      dedupKey: 'k',
      status: JobStatus.InProgress,
      owner: 'w1',
      token: 7,
      version: 3,
      attempts: 2,
    };

    it('appends to the list in the same write, creating it when absent, and sets the problems keys', () => {
      const first = apply(updates.releaseWithHistory as JobItemUpdate, held);
      expect(first).toMatchObject({
        history: [{ e: 'failed' }],
        problemShard: expect.stringMatching(/^p\d\d$/),
        problemAt: 2_000,
      });
      const again = apply(updates.releaseWithHistory as JobItemUpdate, { ...held, history: [dropped(1)] });
      expect((again?.history as HistoryEvent[] | undefined)?.map((e) => e.e)).toEqual(['dropped', 'failed']);
    });

    it('replaces a list that would pass HISTORY_MAX with its newest events and counts the dropped ones', () => {
      const out = apply(updates.checkpointReplacingHistory as JobItemUpdate, {
        ...held,
        history: events(HISTORY_MAX),
        historyDropped: 4,
      });
      const history = (out?.history ?? []) as HistoryEvent[];
      expect(history).toHaveLength(HISTORY_MAX);
      expect(history[0]).toMatchObject({ step: 's1' });
      expect(history.at(-1)).toMatchObject({ e: 'step', step: 's' });
      expect(out?.historyDropped).toBe(5);
      // A step is no problem: it sets no problems index keys.
      expect(out?.problemShard).toBeUndefined();
    });

    it('writes nothing of the history for a write without events', () => {
      expect(withHistory(updates.complete as JobItemUpdate, undefined)).toBe(updates.complete);
      expect(historyWrite('k', undefined, [], 1)).toBeUndefined();
    });

    it('marks DEAD with deadAt, and deadKeyUntil only for a type with a deadKeyTtl', () => {
      expect(apply(updates.markDead as JobItemUpdate, held)).toMatchObject({ status: 'DEAD', deadAt: 2_000 });
      expect(
        apply(updates.markDead as JobItemUpdate, { ...held, deadKeyUntil: 1 })?.deadKeyUntil,
      ).toBeUndefined();
      expect(apply(updates.markDeadWithTtl as JobItemUpdate, held)).toMatchObject({ deadKeyUntil: 9_000 });
    });

    it('resets a DEAD key only past its deadKeyUntil, of the same type and token, keeping its history', () => {
      const dead = {
        dedupKey: 'k',
        status: JobStatus.Dead,
        type: 't',
        token: 7,
        version: 3,
        attempts: 5,
        deadAt: 500,
        deadKeyUntil: 999,
        deadReason: 'max-attempts',
        checkpoint: { step: 's' },
        lastError: 'e',
        history: [dropped(1)],
      };
      const update = updates.resetClaim as JobItemUpdate;
      expect(apply(update, dead)).toMatchObject({
        status: JobStatus.InProgress,
        attempts: 1,
        token: 8,
        version: 4,
        owner: 'w1',
        history: [dropped(1)],
      });
      const reset = apply(update, dead) ?? {};
      for (const gone of ['deadAt', 'deadKeyUntil', 'deadReason', 'checkpoint', 'lastError']) {
        expect(reset[gone]).toBeUndefined();
      }
      expect(apply(update, { ...dead, deadKeyUntil: 1_000 })).toBeUndefined();
      expect(apply(update, { ...dead, deadKeyUntil: undefined })).toBeUndefined();
      expect(apply(update, { ...dead, token: 8 })).toBeUndefined();
      expect(apply(update, { ...dead, type: 'other' })).toBeUndefined();
      expect(apply(update, { ...dead, status: JobStatus.Completed })).toBeUndefined();
      // The dead job's own message, back because its delete failed, is a copy: never a reset.
      expect(apply(update, { ...dead, messageId: claim.messageId })).toBeUndefined();
      // The reset starts the key's next life.
      expect(reset.life).toBe(1);
      expect(apply(update, { ...dead, life: 1 })?.life).toBe(2);
    });

    it("claims with a message of one life (a redrive's) only an item of that life, or none", () => {
      // Prepare: a job waiting for its retry, at the first life (no `life`) and after two resets.
      const waiting = {
        dedupKey: 'k',
        status: JobStatus.RetryWait,
        leaseUntil: 0,
        type: 't',
        token: 7,
        version: 3,
      };
      const first = updates.claimOfFirstLife as JobItemUpdate;
      const third = updates.claimOfLife as JobItemUpdate;

      // Act + Assess
      expect(apply(first, waiting)).toMatchObject({ status: JobStatus.InProgress });
      expect(apply(first, { ...waiting, life: 2 })).toBeUndefined();
      expect(apply(third, { ...waiting, life: 2 })).toMatchObject({ status: JobStatus.InProgress, life: 2 });
      expect(apply(third, waiting)).toBeUndefined();
      expect(apply(third, { ...waiting, life: 1 })).toBeUndefined();
      expect(apply(third, {})).toMatchObject({ status: JobStatus.InProgress });
      expect(
        apply(updates.ownClaimOfLife as JobItemUpdate, { ...waiting, messageId: 'm', life: 1 }),
      ).toBeUndefined();
      const fast = updates.fastCommitOfLife as JobItemUpdate;
      expect(apply(fast, { ...waiting, attempts: 0, life: 1 })).toMatchObject({
        status: JobStatus.Completed,
      });
      expect(apply(fast, { ...waiting, attempts: 0 })).toBeUndefined();
      // A message of no life (a producer's) takes any life, as before.
      expect(apply(updates.claim as JobItemUpdate, { ...waiting, life: 2 })).toMatchObject({ life: 2 });
    });

    it('appends a lost lease only to an existing item with room, changing no protocol field', () => {
      const update = updates.leaseLost as JobItemUpdate;
      expect(apply(update, held)).toEqual({
        ...held,
        history: [{ e: 'lease-lost', at: 1, why: 'w' }],
        problemShard: 'p01',
        problemAt: 1,
      });
      expect(apply(update, {})).toBeUndefined();
      expect(apply(update, { ...held, history: events(HISTORY_MAX) })).toBeUndefined();
    });

    it('counts a dropped copy in place when the last event is one, only over the DEAD item it read', () => {
      const dead = { dedupKey: 'k', status: JobStatus.Dead, token: 7 };
      expect(apply(updates.droppedAppend as JobItemUpdate, dead)?.history).toEqual([dropped(1)]);
      expect(
        apply(updates.droppedInPlace as JobItemUpdate, { ...dead, history: [dropped(1)] })?.history,
      ).toEqual([dropped(2)]);
      // Another copy counted first (the list changed), or the item was reset: not counted here.
      expect(
        apply(updates.droppedInPlace as JobItemUpdate, { ...dead, history: [dropped(1), dropped(2)] }),
      ).toBeUndefined();
      expect(apply(updates.droppedAppend as JobItemUpdate, { ...dead, token: 8 })).toBeUndefined();
    });
  });

  it('scans the jobs table through a projection, filtered by status when asked', () => {
    const all = jobSummaryScan('jobs');
    const names = new Set(all.ProjectionExpression?.match(/#[A-Za-z]+/g) ?? []);
    expect(new Set(Object.keys(all.ExpressionAttributeNames ?? {}))).toEqual(names);
    expect(all.FilterExpression).toBeUndefined();
    expect(all.ProjectionExpression).not.toMatch(/#result|#data|#done/);
    const running = jobSummaryScan('jobs', JobStatus.InProgress);
    expect(running).toMatchObject({
      FilterExpression: '#status = :status',
      ExpressionAttributeValues: { ':status': JobStatus.InProgress },
    });
  });
});
