import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { runScenario } from './harness.ts';
import type { Meet, MeetHost } from './meet.ts';
import { Operators } from './operators.ts';
import { operatorArb } from './operators-scenario.ts';
import type { OperatorKind } from './scenario.ts';

/*
 * Issue 32's checks (operators.ts) catch what they are for: each test breaks the code under test on
 * purpose, the way its defect did, and sees its check fire. Off everywhere else in this file.
 */
const broken = vi.hoisted(() => ({ ownMessage: false, plan: false }));

// A job's own message not told from a copy (a dead key reset by the message it died under; a refused own
// message lettered as a copy, its job left waiting).
vi.mock('../../shared/core/decisions/message-identity.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../shared/core/decisions/message-identity.ts')>();
  return {
    ...real,
    isOwnMessage: (...args: Parameters<typeof real.isOwnMessage>) =>
      broken.ownMessage ? false : real.isOwnMessage(...args),
  };
});

// The same defect in the reset's own condition (the job store checks it twice: deadKeyToReset reads the
// refused item with isOwnMessage, and the reset's ConditionExpression asks DynamoDB again): with the
// shipped adapter under the model, both have to go for a dead key to be reset by its own message.
const OWN_MESSAGE_CLAUSE =
  'AND #messageId <> :messageId AND ((attribute_exists(#originId) AND #originId <> :origin) OR ' +
  '(attribute_not_exists(#originId) AND #messageId <> :origin))';
const ANY_MESSAGE_CLAUSE =
  'AND (#messageId = :messageId OR #messageId <> :messageId) AND ' +
  '(attribute_not_exists(#originId) OR #originId = :origin OR #originId <> :origin)';
vi.mock('../../shared/core/protocol/reset.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../shared/core/protocol/reset.ts')>();
  return {
    ...real,
    resetClaim: (...args: Parameters<typeof real.resetClaim>) => {
      const out = real.resetClaim(...args);
      if (!broken.ownMessage) return out;
      const condition = out.update.ConditionExpression ?? '';
      if (!condition.includes(OWN_MESSAGE_CLAUSE))
        throw new Error('the reset condition changed: update this mock');
      return {
        ...out,
        update: {
          ...out.update,
          ConditionExpression: condition.replace(OWN_MESSAGE_CLAUSE, ANY_MESSAGE_CLAUSE),
        },
      };
    },
  };
});

// A redrive planned without asking whose letter it is: every letter planned as the item's own.
vi.mock('../../shared/ops/dlq-redrive-plan.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../shared/ops/dlq-redrive-plan.ts')>();
  return {
    ...real,
    planRedrive: (...[item, now, letter]: Parameters<typeof real.planRedrive>) =>
      real.planRedrive(
        broken.plan && item && letter?.messageId
          ? { ...item, messageId: letter.messageId, history: [] }
          : item,
        now,
        letter,
      ),
  };
});

/** The checks (`tag/check`) with `tag` found in the first `runs` focused schedules of `kind`. */
async function found(kind: OperatorKind, tag: string, runs: number): Promise<string[]> {
  const checks = new Set<string>();
  for (const scenario of fc.sample(operatorArb(kind), { numRuns: runs, seed: 32 })) {
    const report = await runScenario(scenario);
    for (const v of report.violations) {
      const check = /^\[([a-z-]+\/[a-z-]+)\]/.exec(v)?.[1];
      if (check?.startsWith(`${tag}/`)) checks.add(check);
    }
    if (checks.size > 0) break;
  }
  return [...checks];
}

describe('Issue 32 checks catch what they are for', () => {
  it('a refused own message lettered as a copy is caught ([refused/own-ends-dead])', async () => {
    broken.ownMessage = true;
    try {
      expect(await found('redrive-edit', 'refused', 150)).toEqual(['refused/own-ends-dead']);
      expect(await found('deploy', 'refused', 60)).toEqual(['refused/own-ends-dead']);
    } finally {
      broken.ownMessage = false;
    }
  }, 600_000);

  it('a dead key reset by the message it died under is caught ([dead/runs-unasked])', async () => {
    broken.ownMessage = true;
    try {
      expect(await found('fresh-send', 'dead', 150)).toEqual(['dead/runs-unasked']);
    } finally {
      broken.ownMessage = false;
    }
  }, 600_000);

  it('a redrive by key or with an edited payload over another life of its key is caught', async () => {
    broken.plan = true;
    try {
      expect(await found('redrive-key', 'redrive', 150)).toEqual(['redrive/over-another-job']);
      expect(await found('redrive-edit', 'redrive', 150)).toEqual(['redrive/over-another-job']);
    } finally {
      broken.plan = false;
    }
  }, 600_000);
});

describe('Class: Operators ([dead/runs-unasked] on one write)', () => {
  /** A DEAD item, a watched key, and the operators' check over a host whose item the test moves. */
  function watched(): { ops: Operators; violations: string[]; set: (status: JobStatus) => void } {
    let item: { status: JobStatus; [field: string]: unknown } = {
      dedupKey: 'job-0',
      status: JobStatus.Dead,
      messageId: 'm-1',
      attempts: 4,
    };
    const violations: string[] = [];
    const host = { peek: () => item, violations, elapsed: () => 0, scenario: {} } as unknown as MeetHost;
    const ops = new Operators({} as Meet, host);
    ops.markingDead('job-0');
    return { ops, violations, set: (status) => (item = { ...item, status, attempts: 0 }) };
  }

  it('excuses a write in flight across a whole redrive reset (begun after it, done before its answer)', () => {
    // Prepare
    const { ops, violations, set } = watched();
    const start = ops.beforeWrite('job-0');

    // Act: the operator's redrive resets the key while the worker's write is in flight
    ops.resetting('job-0', 1);
    set(JobStatus.RetryWait);
    ops.resetting('job-0', -1);
    ops.wrote('job-0', start);

    // Assess
    expect(violations).toEqual([]);
  });

  it('still reports a DEAD job that leaves DEAD with no reset begun during the write', () => {
    // Prepare: a reset done before the write began excuses nothing
    const { ops, violations, set } = watched();
    ops.resetting('job-0', 1);
    ops.resetting('job-0', -1);
    const start = ops.beforeWrite('job-0');

    // Act
    set(JobStatus.RetryWait);
    ops.wrote('job-0', start);

    // Assess
    expect(violations).toHaveLength(1);
    expect(violations[0]).toMatch(/^\[dead\/runs-unasked\] job-0: DEAD \(message m-1/);
  });
});
