// `runJob`: one job, run in memory through the worker's own pipeline (claim, heartbeat, steps and their
// checkpoints, the fenced commit, release with backoff, dead-lettering), with leaseq's own DynamoDB
// adapters on the in-memory DynamoDB (its jobs and leases tables and the job's application tables) and the
// in-memory queue. Time is skipped: a backoff does not wait. What the test sees is what the processor decided, not a re-enactment of it.

import { Logger } from '@aws-lambda-powertools/logger';
import { DynamoDbJobStore } from '../core/adapters/dynamodb-job-store.ts';
import { DynamoDbLeaseStore } from '../core/adapters/dynamodb-lease-store.ts';
import { DynamoDbRateStore } from '../core/adapters/dynamodb-rate-store.ts';
import { DEFAULTS } from '../core/contract/defaults.ts';
import { makeEnvelope } from '../core/contract/envelope.ts';
import type { Checkpoint } from '../core/contract/job-item.ts';
import type { JobQueue } from '../core/contract/job-queue.ts';
import type { Effect, JobStore } from '../core/contract/job-store.ts';
import type { BackoffPolicy } from '../core/decisions/backoff.ts';
import type { StepOutcome } from '../core/model/job-context.ts';
import type { AnyJobDefinition, JobDefinition } from '../core/model/job-definition.ts';
import { JobRegistry } from '../core/model/registry.ts';
import type { TableMap } from '../core/model/table.ts';
import { JobProcessor } from '../core/pipeline/processor.ts';
import { EffectTables } from '../jobs/effect-tables.ts';
import { InMemoryDynamoDb } from './in-memory-dynamodb/client.ts';
import { leaseqTables } from './in-memory-dynamodb/tables.ts';
import { InMemoryQueue } from './in-memory-queue.ts';

/** An item of an application table, in document form. */
export type TableRow = Record<string, unknown>;

/** An error as the job item and the dead letter record it: its class and its message. */
export interface RecordedError {
  readonly name: string;
  readonly message: string;
}

/** A failure to inject: thrown by the step named `name` (instead of running it) or by the attempt. */
export interface InjectedFailure {
  readonly error: unknown;
  /** How many times it is thrown (the first runs of the step, or the first attempts). @default 1 */
  readonly times?: number;
}

export interface RunJobOptions<T extends TableMap> {
  /** Rows each table holds before the job runs, by the key the job declared the table under. @default empty */
  readonly tables?: { readonly [K in keyof T]?: readonly TableRow[] };
  /** @default `<type>-test` */
  readonly dedupKey?: string;
  /** Attempts before the job is dead-lettered `max-attempts` (the worker setting). @default 5 */
  readonly maxAttempts?: number;
  /** Optimistic conflicts given back (no attempt used) before the job is dead-lettered `max-conflicts`. @default 20 */
  readonly maxConflicts?: number;
  /**
   * Stop after this many deliveries of the message: a job not settled by then comes back `retried`.
   * @default until the job completes or is dead-lettered
   */
  readonly attempts?: number;
  /** Throw `error` in place of the step `name` (nothing of that step commits). */
  readonly failStep?: InjectedFailure & { readonly name: string };
  /** Throw `error` at the start of the first `times` attempts, before the job's code runs. */
  readonly failAttempt?: InjectedFailure;
  /** Backoff policy of retries (skipped, not waited). @default the worker's: 2 s base, 900 s cap */
  readonly backoff?: BackoffPolicy;
  /** Randomness of the backoff jitter. @default () => 0.5 (deterministic) */
  readonly random?: () => number;
  /** In-process tries of an optimistic write. @default 3 */
  readonly optimisticTries?: number;
  /** `ctx.testHooksEnabled`. @default false */
  readonly testHooks?: boolean;
  /** Print the worker's log lines. @default false */
  readonly logs?: boolean;
}

/** What one delivery of the message did. */
export interface AttemptReport {
  /** The processor's action: `completed`, `retry`, `dead-lettered`, ... */
  readonly action: string;
  /** The error the attempt failed with (as the job item recorded it). */
  readonly error?: RecordedError;
  /** The backoff chosen before the next delivery, in seconds. */
  readonly backoffSeconds?: number;
}

interface RunJobCommon<T extends TableMap> {
  /** Every delivery, in order. */
  readonly attempts: readonly AttemptReport[];
  /** Every row of each table after the run, in key order, by the key the job declared the table under. */
  readonly tables: { readonly [K in keyof T]: TableRow[] };
  /** The effects that committed (steps' and the completion's), in commit order; named-lease fences left out. */
  readonly effects: readonly Effect[];
  /** The job's last checkpoint. */
  readonly checkpoint?: Checkpoint;
}

/** How the run ended. */
export type RunJobResult<T extends TableMap = TableMap> = RunJobCommon<T> &
  (
    | { readonly status: 'completed'; readonly result: unknown }
    | { readonly status: 'retried'; readonly error: RecordedError; readonly backoffSeconds: number }
    | { readonly status: 'dead-lettered'; readonly reason: string; readonly error: RecordedError }
  );

/**
 * Runs `job` on `payload` in memory through the worker's pipeline until it completes or is dead-lettered
 * (or `options.attempts` deliveries have run), retries after their backoff without waiting for it.
 *
 * ```ts
 * const run = await runJob(reserve, { sku: 'a', qty: 2 }, { tables: { stock: [{ sku: 'a', qty: 5, version: 0 }] } });
 * expect(run.status).toBe('completed');
 * expect(run.tables.stock).toEqual([{ sku: 'a', qty: 3, version: 1 }]);
 * ```
 */
export async function runJob<P, T extends TableMap>(
  job: JobDefinition<P, T>,
  payload: unknown,
  options: RunJobOptions<T> = {},
): Promise<RunJobResult<T>> {
  const declared: TableMap = job.tables ?? {};
  for (const key of Object.keys(options.tables ?? {})) {
    if (!(key in declared)) {
      throw new Error(
        `runJob: job ${job.type} declares no table ${key} (it declares: ${Object.keys(declared).join(', ') || 'none'})`,
      );
    }
  }
  // Physical name = logical name: one in-memory table per declared table.
  const doc = new InMemoryDynamoDb({
    tables: leaseqTables({
      jobs: JOBS_TABLE,
      leases: LEASES_TABLE,
      app: Object.fromEntries(Object.values(declared).map((t) => [t.name, t])),
    }),
  });
  for (const [key, rows] of Object.entries(options.tables ?? {}) as [string, readonly TableRow[]][]) {
    const table = declared[key];
    if (table) for (const row of rows) doc.seed(table.name, row);
  }
  const leases = new DynamoDbLeaseStore({ client: doc, tableName: LEASES_TABLE });
  const committed: Effect[] = [];
  const store = recordingEffects(new DynamoDbJobStore({ client: doc, tableName: JOBS_TABLE }), committed);

  // Skipped time: a backoff moves this offset instead of waiting.
  let skipped = 0;
  const now = () => Date.now() + skipped;
  const queue = new InMemoryQueue({ now });
  let backoff: number | undefined;
  const port: JobQueue = {
    changeVisibility: async (receipt, seconds) => {
      backoff = seconds;
      await queue.changeVisibility(receipt, seconds);
    },
    delete: (receipt) => queue.delete(receipt),
    sendToDeadLetter: (body, reason, groupId) => queue.sendToDeadLetter(body, reason, groupId),
  };

  const processor = new JobProcessor({
    store,
    queue: port,
    registry: JobRegistry.of([withInjectedFailures(job, options)]),
    tables: new EffectTables(doc, Object.fromEntries(Object.values(declared).map((t) => [t.name, t.name]))),
    leases,
    rates: new DynamoDbRateStore({ client: doc, tableName: LEASES_TABLE }),
    testHooks: options.testHooks ?? false,
    worker: 'run-job',
    logger: new Logger({ serviceName: 'leaseq-run-job', logLevel: options.logs ? 'DEBUG' : 'SILENT' }),
    maxAttempts: options.maxAttempts ?? 5,
    ...(options.maxConflicts === undefined ? {} : { maxConflicts: options.maxConflicts }),
    random: options.random ?? (() => 0.5),
    now,
    ...(options.backoff ? { backoff: options.backoff } : {}),
    ...(options.optimisticTries ? { optimisticTries: options.optimisticTries } : {}),
  });

  const dedupKey = options.dedupKey ?? `${job.type}-test`;
  queue.send(JSON.stringify(makeEnvelope({ id: `${dedupKey}#1`, dedupKey, type: job.type, payload })));
  const reports: AttemptReport[] = [];
  const limit = options.attempts ?? Number.POSITIVE_INFINITY;
  const common = async () => {
    const checkpoint = (await store.get(dedupKey))?.checkpoint;
    const tables = Object.fromEntries(
      Object.entries(declared).map(([key, t]) => [key, doc.items(t.name)]),
    ) as RunJobCommon<T>['tables'];
    return { attempts: reports, tables, effects: committed, ...(checkpoint ? { checkpoint } : {}) };
  };
  // Each attempt is one delivery or two (a fast-path run that needs a lease goes again at once).
  const safety =
    Math.min(limit, (options.maxAttempts ?? 5) + (options.maxConflicts ?? DEFAULTS.maxConflicts)) * 4 + 10;
  for (let delivery = 0; delivery < safety; delivery++) {
    let [record] = queue.receive(1);
    if (!record) {
      const at = queue.nextVisibleAt();
      if (at === undefined) break;
      // Just past it: a retry is due when its time has passed, not at the same millisecond.
      skipped += at - now() + 1;
      [record] = queue.receive(1);
      if (!record) break;
    }
    backoff = undefined;
    const outcome = await processor.process(record);
    if (outcome.disposition === 'delete') await queue.delete(record.receiptHandle);
    if (outcome.action === 'completed') {
      reports.push({ action: 'completed' });
      return { status: 'completed', result: (await store.get(dedupKey))?.result, ...(await common()) };
    }
    if (outcome.action === 'dead-lettered') {
      const letter = queue.deadLetters.at(-1);
      const error = recorded(letter?.reason.errorClass, letter?.reason.errorMessage);
      reports.push({ action: 'dead-lettered', error });
      return { status: 'dead-lettered', reason: letter?.reason.reason ?? '', error, ...(await common()) };
    }
    // A copy handed back without running the job (its retry time not quite reached) is no attempt.
    if (HAND_BACKS.has(outcome.action)) continue;
    const item = await store.get(dedupKey);
    const error = recorded(item?.lastErrorClass, item?.lastError);
    reports.push({
      action: outcome.action,
      ...(item?.lastError === undefined ? {} : { error }),
      ...(backoff === undefined ? {} : { backoffSeconds: backoff }),
    });
    if (reports.length >= limit) {
      return { status: 'retried', error, backoffSeconds: backoff ?? 0, ...(await common()) };
    }
  }
  throw new Error(
    `runJob: job ${job.type} neither completed nor was dead-lettered after ${reports.length} deliveries ` +
      `(${reports.map((r) => r.action).join(', ')})`,
  );
}

const HAND_BACKS: ReadonlySet<string> = new Set([
  'contended',
  'own-message-early',
  'deferred',
  'limited',
  'resent',
]);

/** An error as recorded (`<class>: <message>`), split back into its class and message. */
function recorded(name = '', text = ''): RecordedError {
  return { name, message: text.startsWith(`${name}: `) ? text.slice(name.length + 2) : text };
}

/** The job with `failStep` and `failAttempt` woven into its run. */
function withInjectedFailures(job: AnyJobDefinition, options: RunJobOptions<TableMap>): AnyJobDefinition {
  const { failStep, failAttempt } = options;
  if (!failStep && !failAttempt) return job;
  let stepFailures = 0;
  return {
    ...job,
    async run(ctx, payload) {
      if (failAttempt && ctx.attempt <= (failAttempt.times ?? 1)) throw failAttempt.error;
      if (failStep) {
        const step = ctx.step.bind(ctx);
        // An own property shadows the method for this attempt's context only.
        Object.defineProperty(ctx, 'step', {
          configurable: true,
          value: <R>(name: string, build: () => Promise<StepOutcome<R>>) =>
            step<R>(
              name,
              name === failStep.name && stepFailures < (failStep.times ?? 1)
                ? async () => {
                    stepFailures += 1;
                    throw failStep.error;
                  }
                : build,
            ),
        });
      }
      return job.run(ctx, payload);
    },
  };
}

const JOBS_TABLE = 'run-job-jobs';
const LEASES_TABLE = 'run-job-leases';

/**
 * The job store, recording the effects of every write that committed (named-lease fences left out: they
 * are ConditionChecks on the leases table).
 */
function recordingEffects(store: JobStore, committed: Effect[]): JobStore {
  const record = (effects: readonly Effect[] | undefined) => {
    for (const e of effects ?? []) if (e.ConditionCheck?.TableName !== LEASES_TABLE) committed.push(e);
  };
  const writes: Partial<JobStore> = {
    checkpoint: async (lease, checkpoint, effects, options) => {
      const out = await store.checkpoint(lease, checkpoint, effects, options);
      if (out.ok) record(effects);
      return out;
    },
    complete: async (lease, result, effects, options) => {
      const out = await store.complete(lease, result, effects, options);
      if (out.ok) record(effects);
      return out;
    },
    claimAndComplete: async (request, result, effects, options) => {
      const out = await store.claimAndComplete(request, result, effects, options);
      if (out.ok) record(effects);
      return out;
    },
  };
  return new Proxy(store, {
    get(target, name) {
      const own = writes[name as keyof JobStore];
      if (own !== undefined) return own;
      const value = Reflect.get(target, name, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
