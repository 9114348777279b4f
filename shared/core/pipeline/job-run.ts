// The job's own run, shared by the fast path (E12) and the leased run (E4-E6): the one place a
// JobContext is built, the payload check that comes before any claim, and the loop that runs the job and
// commits it, re-running it when its commit hits an optimistic conflict.
import { InvalidEnvelopeError } from '../../errors.ts';
import type { JobEnvelope } from '../contract/envelope.ts';
import type { JobLease } from '../contract/job-store.ts';
import { conflictPause } from '../decisions/optimistic.ts';
import { type FencedSlot, JobContext } from '../model/job-context.ts';
import type { AnyJobDefinition, JobOutcome } from '../model/job-definition.ts';
import { validatePayload } from '../model/standard-schema.ts';
import type { JobLog } from '../observe/job-log.ts';
import { MetricName } from '../observe/metric-names.ts';
import type { EndTurn } from './row-turns.ts';
import type { Settings } from './settings.ts';

/**
 * The `ctx` a job runs with (the one place it is built): bound to a claimed lease, whose store writes
 * `leaseSignal` bounds; or, with no `leaseSignal`, to the fast path (no lease to checkpoint under or to
 * fence a named lease with: `ctx.step` and `ctx.withLease` send the job leased).
 */
export function jobContext(
  s: Settings,
  definition: AnyJobDefinition,
  lease: JobLease,
  signal: AbortSignal,
  leaseSignal: AbortSignal | undefined,
  slots: readonly FencedSlot[] | undefined,
): JobContext {
  const fastPath = leaseSignal === undefined;
  return new JobContext({
    tables: s.tables?.for(definition) ?? {},
    fastPath,
    leaseSignal,
    leases: fastPath ? undefined : s.leases,
    ...(slots ? { slots } : {}),
    testHooks: s.testHooks,
    store: s.store,
    lease,
    signal,
    worker: s.worker,
    metrics: s.metrics,
    optimisticTries: s.optimisticTries,
    random: s.random,
    now: s.now,
    errorText: s.errorText,
  });
}

/**
 * The payload as the job type's schema parses it. Checked before the claim and the fast path's run: a
 * payload nobody can run must not claim (or take over) the job item of its dedupKey.
 * @throws InvalidEnvelopeError for a payload its schema refuses (bad-payload: dead-lettered, never run).
 */
export async function checkedPayload(definition: AnyJobDefinition, envelope: JobEnvelope): Promise<unknown> {
  const parsed = await validatePayload(definition.payload, envelope.payload);
  if (!parsed.ok) throw new InvalidEnvelopeError('bad-payload', parsed.problem);
  return parsed.value;
}

/**
 * Runs the job on its checked payload, then `commit`s what it returned; while the commit's answer is an
 * optimistic conflict (`conflicted`), re-runs it after a short pause, up to `optimisticTries` runs.
 * Returns the last commit's answer. Rejects as soon as `signal` aborts (the job's own promise is left,
 * fenced).
 */
export async function runAndCommit<R>(
  s: Settings,
  run: {
    readonly definition: AnyJobDefinition;
    /** The payload {@link checkedPayload} returned. */
    readonly payload: unknown;
    readonly context: JobContext;
    readonly signal: AbortSignal;
    readonly log: JobLog;
    /** Names the commit in the conflict log line. */
    readonly what: string;
  },
  commit: (outcome: JobOutcome | undefined) => Promise<R>,
  conflicted: (answer: R) => boolean,
  /** The row a conflicted answer was refused on (conflict.ts conflictRow); undefined: unknown. */
  rowOf: (answer: R) => string | undefined = () => undefined,
): Promise<R> {
  const { definition, context, signal, log } = run;
  // After a conflict the re-run waits for its turn on the row behind this worker's other jobs that
  // conflicted on it (row-turns.ts): held for one run and its commit.
  let endTurn: EndTurn | undefined;
  try {
    for (let tryNumber = 1; ; tryNumber++) {
      const outcome = (await abortable(definition.run(context, run.payload), signal)) || undefined;
      signal.throwIfAborted();
      const answer = await commit(outcome);
      endTurn?.();
      endTurn = undefined;
      if (!conflicted(answer)) return answer;
      s.metrics.count(MetricName.OptimisticConflict);
      log.info(`${run.what} hit an optimistic conflict; re-reading and retrying`, { try: tryNumber });
      if (tryNumber >= s.optimisticTries) return answer;
      await conflictPause(tryNumber, s.random);
      const row = rowOf(answer);
      if (row !== undefined) endTurn = await s.rowTurns.take(row, signal);
    }
  } finally {
    endTurn?.();
  }
}

/**
 * Resolves with the job's result, or rejects as soon as `signal` aborts (the job keeps running, fenced).
 * `work` gets its handlers before anything else: a run left behind (its signal aborted before it began,
 * or during its first synchronous section) may still reject, and unhandled that would end a Node worker.
 */
function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}
