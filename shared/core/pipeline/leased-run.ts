// E4-E6, the leased run: the job runs under its heartbeat (E4 renewals; E5 checkpoints are the job's
// own ctx.step writes), then commits fenced (E6, commit.ts); a failure goes to release.ts.
import { JobCancelledError, LeaseLostError, OptimisticConflictError } from '../../errors.ts';
import type { Effect } from '../contract/job-store.ts';
import { leaseSafetyMs } from '../decisions/lease-timing.ts';
import { Heartbeat } from '../leases/heartbeat.ts';
import { conflictRow, describeConflict, rowUnversioned } from '../model/conflict.ts';
import { namedLeaseLost } from '../model/job-context.ts';
import { MetricName } from '../observe/metric-names.ts';
import type { Attempt } from './attempt.ts';
import { commit, jobCompleted } from './commit.ts';
import type { DeadLetterer } from './dead-letterer.ts';
import { jobContext, runAndCommit } from './job-run.ts';
import type { RecordAction } from './outcome.ts';
import { settleFailure } from './release.ts';
import type { Settings } from './settings.ts';

/** Runs a claimed job under its heartbeat and ends the attempt: committed, or the failure's decision. */
export async function runLeased(
  s: Settings,
  attempt: Attempt,
  deadLetterer: DeadLetterer,
): Promise<RecordAction> {
  const { lease, log, leaseMs, deadline } = attempt;
  const started = s.now();
  const heartbeat = new Heartbeat({
    target: attempt.renewer,
    intervalMs: Math.min(s.heartbeatMs, Math.max(100, Math.floor(leaseMs / 3))),
    leaseUntil: lease.leaseUntil,
    // Beats are counted from the claim's request: a slow claim answer is renewed at once.
    renewedAt: attempt.claimedAt,
    safetyMs: leaseSafetyMs(leaseMs),
    ...(deadline === undefined ? {} : { deadline }),
    now: s.now,
    onRenewed: (until) => {
      s.metrics.count(MetricName.LeaseRenewed);
      log.debug('lease renewed', { leaseUntil: until });
    },
    onRenewFailed: (error) =>
      log.warn('lease renewal failed; will retry before the lease ends', { error: s.errorText(error) }),
    // Counted once, where the failure is handled.
    onLost: (error) =>
      log.warn(
        error instanceof JobCancelledError ? 'job cancelled: aborting it' : 'lease lost: aborting the job',
        {
          error: s.errorText(error),
        },
      ),
  }).start();
  const signal = heartbeat.signal;
  let failure: unknown;
  let failed = false;
  try {
    await runAndCommitFenced(s, attempt, heartbeat);
  } catch (thrown) {
    failed = true;
    // The commit's conflict, once its tries are spent, stands even if the time ran out while its detail
    // was read back: without the read-back it would have been this attempt's failure too.
    const settled = thrown instanceof LeaseLostError || thrown instanceof OptimisticConflictError;
    failure = signal.aborted && !settled ? (signal.reason ?? thrown) : thrown;
  } finally {
    await heartbeat.stop();
  }
  // Committed: nothing below may turn the job into a failure.
  if (!failed) return jobCompleted(s, attempt, started, log);
  return settleFailure(s, attempt, failure, deadLetterer);
}

/** Runs the job and commits it fenced by the job lease and its named leases. */
async function runAndCommitFenced(s: Settings, attempt: Attempt, heartbeat: Heartbeat): Promise<void> {
  const { definition, lease, log } = attempt;
  const { signal, leaseSignal } = heartbeat;
  const context = jobContext(s, definition, lease, signal, leaseSignal, attempt.slots);
  let effectCount = 0;
  let committed: readonly Effect[] = [];
  try {
    const answer = await runAndCommit(
      s,
      { definition, payload: attempt.payload, context, signal, log, what: 'completion' },
      (outcome) => {
        const effects = outcome?.effects ?? [];
        effectCount = effects.length;
        const fenced = effectCount > 0 ? [...effects, ...context.leaseFences()] : effects;
        committed = fenced;
        return commit(s, lease, outcome?.result, fenced, leaseSignal, log);
      },
      // A refusal at a named lease's fence is that lease lost, not a conflict to re-run.
      (refused) => !refused.ok && context.lostLeaseAt(refused, effectCount) === undefined,
      (refused) => (refused.ok ? undefined : conflictRow(committed, refused.index, context.tables)),
    );
    if (!answer.ok) {
      const lost = context.lostLeaseAt(answer, effectCount);
      if (lost) throw namedLeaseLost(lost, 'completion');
      const detail = await describeConflict(committed, answer, context.tables, signal);
      throw new OptimisticConflictError('completion', s.optimisticTries, undefined, detail, {
        rowUnversioned: rowUnversioned(detail),
      });
    }
  } finally {
    // Named leases a job took are held until here, so its commit was fenced by them.
    await context.releaseLeases();
  }
}
