import { describe, expect, it } from 'vitest';
import {
  checkpointUpdate,
  claimUpdate,
  completeUpdate,
  FENCE,
  giveUpUpdate,
  type JobItemUpdate,
  jobSummaryScan,
  redriveUpdate,
  renewUpdate,
} from '../../../../shared/core/adapters/dynamodb-job-expressions.ts';
import type { JobLease } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';

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
  }),
  redrive: redriveUpdate('jobs', 'k', 2_000, 99),
};

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
