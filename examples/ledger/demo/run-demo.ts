import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { BatchGetCommand, BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { AwsClients } from '../../../shared/aws/clients.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { runLimited } from '../../../shared/core/pipeline/batch.ts';
import { ConfigError } from '../../../shared/errors.ts';
import { listDeadLetters } from '../../../shared/ops/dlq.ts';
import { sendMessages } from '../../../shared/producer/send-messages.ts';
import { RestartPolicy } from '../../../shared/runner/restart-policy.ts';
import { WorkerPool } from '../../../shared/runner/worker-pool.ts';
import { siblingModule } from '../../../shared/sibling-module.ts';
import { workerEnv } from '../../../shared/worker/config.ts';
import { planWorkload, type Workload, type WorkloadMix } from './workload.ts';

/** The job module the demo workers run. */
const LEDGER_JOB_MODULE = siblingModule(new URL('../', import.meta.url).href, 'jobs');

/** Names the demo works on (the provisioned local stack). */
export interface DemoNames {
  readonly queueUrl: string;
  readonly dlqUrl: string;
  readonly jobsTable: string;
  readonly leasesTable: string;
  readonly ledgerTable: string;
}

export interface DemoOptions {
  readonly clients: AwsClients;
  readonly endpoint: string | undefined;
  readonly names: DemoNames;
  readonly mix?: WorkloadMix;
  /** Worker processes. @default 3 */
  readonly workers?: number;
  /**
   * Who runs the jobs: local worker processes (started here, killed by the crashing jobs and replaced),
   * or `lambda`, the stack's deployed function fired by its event source mapping (nothing started here;
   * its counters are not collected). @default 'local'
   */
  readonly runtime?: 'local' | 'lambda';
  /** Job lease of the demo workers; short so crashes recover fast. @default 3000 */
  readonly leaseMs?: number;
  /** Attempts before a job is dead-lettered. @default 5 */
  readonly maxAttempts?: number;
  /** Give up waiting after this long. @default 600000 */
  readonly timeoutMs?: number;
  /** Folder for worker logs. */
  readonly logDir: string;
  /** Stops the run early (Ctrl-C). */
  readonly signal?: AbortSignal;
  /** Called about twice a second with the live numbers. */
  readonly onProgress?: (progress: DemoProgress) => void;
  /** Lines worth telling a person (a worker died and was replaced). */
  readonly onEvent?: (line: string) => void;
}

export interface DemoProgress {
  /** Who runs the jobs (the deployed function's counters are not collected). */
  readonly runtime: 'local' | 'lambda';
  readonly total: number;
  readonly sent: number;
  readonly done: number;
  readonly dead: number;
  readonly expected: number;
  readonly duplicatesSkipped: number;
  readonly retries: number;
  readonly leasesTakenOver: number;
  readonly workersAlive: number;
  readonly workerRestarts: number;
}

export interface AccountCheck {
  readonly account: string;
  readonly expected: number;
  readonly actual: number | undefined;
  readonly ok: boolean;
}

export interface DeadLetterSummary {
  readonly dedupKey: string;
  readonly reason: string;
  readonly errorClass: string;
  readonly attempts: string;
  /**
   * Letters in the DLQ for this job. More than 1 when a worker died between sending the letter and
   * marking the job DEAD: the DLQ is at-least-once (SQS sends are not transactional with DynamoDB), and
   * a redrive of either copy runs the job once, since the claim deduplicates.
   */
  readonly copies: number;
}

export interface DemoResult {
  readonly runId: string;
  /** Who ran the jobs. */
  readonly runtime: 'local' | 'lambda';
  readonly workload: Workload['counts'] & { readonly messages: number };
  readonly completed: number;
  readonly deadLettered: number;
  readonly missing: readonly string[];
  readonly accounts: readonly AccountCheck[];
  readonly moneyExpected: number;
  readonly moneyActual: number;
  readonly deadLetters: readonly DeadLetterSummary[];
  readonly counters: Readonly<Record<string, number>>;
  readonly perWorker: readonly { readonly id: string; readonly succeeded: number; readonly exit: string }[];
  readonly workerRestarts: number;
  readonly elapsedMs: number;
  readonly timedOut: boolean;
  readonly aborted: boolean;
  /** True when every job ended as expected and every balance matches. */
  readonly verified: boolean;
}

const COUNTERS = [
  'JobSucceeded',
  'DuplicateSkipped',
  'JobRetried',
  'JobDeadLettered',
  'LeaseExpired',
  'LeaseLost',
  'OwnMessageEarly',
  'OptimisticConflict',
  'CacheHit',
  'StoreUnavailable',
] as const;

/**
 * The main job people run: seeds the run's accounts, starts worker processes (replacing any that die),
 * sends the planned workload, waits until every job is done or dead-lettered, then verifies the ledger
 * against what exactly-once effects must give.
 */
export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const started = Date.now();
  const { clients, names } = options;
  const runId = `demo-${new Date().toISOString().slice(0, 19).replace(/[-:T]/g, '')}-${randomBytes(2).toString('hex')}`;
  const workload = planWorkload(runId, options.mix);
  await seedAccounts(clients, names.ledgerTable, workload.accounts, workload.initialBalance);

  let stopping = false;
  let restarts = 0;
  const pool =
    options.runtime === 'lambda'
      ? undefined
      : new WorkerPool({
          count: options.workers ?? 3,
          logDir: join(options.logDir, runId),
          jobsModule: LEDGER_JOB_MODULE,
          metricsFile: join(options.logDir, '..', 'metrics', `demo-${process.pid}.json`),
          env: {
            ...(options.endpoint ? { AWS_ENDPOINT_URL: options.endpoint } : {}),
            POWERTOOLS_LOG_LEVEL: 'INFO',
            LEASEQ_BACKOFF_BASE_SECONDS: '1',
            LEASEQ_BACKOFF_CAP_SECONDS: '8',
            ...workerEnv({
              ...names,
              tables: { ledger: names.ledgerTable },
              // The demo's flaky, slow, crashing and poison jobs are test hooks in their payloads.
              testHooks: true,
              leaseMs: options.leaseMs ?? 3000,
              maxAttempts: options.maxAttempts ?? 5,
            }),
          },
        });
  // The crash jobs kill workers on purpose, after they polled: those are replaced. Workers that keep
  // dying before their first poll end the run with the reason (RestartPolicy), not a restart loop.
  const policy = new RestartPolicy({ baseDelayMs: 100, maxDelayMs: 2000 });
  let gaveUp: string | undefined;
  let wakeGaveUp = () => {};
  const gaveUpAsked = new Promise<'gave-up'>((resolve) => {
    wakeGaveUp = () => resolve('gave-up');
  });
  pool?.on('exit', (info) => {
    if (stopping) return;
    const decision = policy.decide(info);
    if (decision.action === 'give-up') {
      gaveUp = decision.reason;
      wakeGaveUp();
      return;
    }
    restarts = policy.restarts;
    options.onEvent?.(`worker ${info.id} died (${RestartPolicy.describe(info)}); starting a replacement`);
    setTimeout(() => {
      if (!stopping) void pool.spawn();
    }, decision.delayMs).unref();
  });
  const total = (counter: string) => pool?.total(counter) ?? 0;

  const states = new Map<string, string>();
  let sent = 0;
  const progress = (): DemoProgress => ({
    runtime: options.runtime ?? 'local',
    total: workload.messages.length,
    sent,
    done: countStates(states, JobStatus.Completed),
    dead: countStates(states, JobStatus.Dead),
    expected: workload.counts.unique,
    duplicatesSkipped: total('DuplicateSkipped'),
    retries: total('JobRetried'),
    leasesTakenOver: total('LeaseExpired'),
    workersAlive: pool?.alive ?? 0,
    workerRestarts: restarts,
  });
  const ticker = setInterval(() => options.onProgress?.(progress()), 500);
  let timedOut = false;
  try {
    if ((await Promise.race([pool?.start(), gaveUpAsked])) === 'gave-up')
      throw new ConfigError(gaveUp ?? 'workers keep dying before they poll');
    const report = await sendMessages(clients.sqs, names.queueUrl, workload.messages, {
      ...(options.signal ? { signal: options.signal } : {}),
      onProgress: (p) => {
        sent = p.sent;
      },
    });
    if (report.failed > 0) {
      throw new Error(
        `SQS refused ${report.failed} demo messages: ${report.failures[0]?.message ?? 'unknown'}`,
      );
    }
    const deadline = started + (options.timeoutMs ?? 600_000);
    const keys = [...workload.expectedDone, ...workload.expectedDead];
    while (!options.signal?.aborted) {
      if (gaveUp) throw new ConfigError(gaveUp ?? 'workers keep dying before they poll');
      await refreshStates(clients, names.jobsTable, keys, states);
      const p = progress();
      if (
        p.done + p.dead >= keys.length &&
        workload.expectedDone.every((k) => states.get(k) === JobStatus.Completed)
      )
        break;
      if (Date.now() > deadline) {
        timedOut = true;
        break;
      }
      await sleep(1000, options.signal);
    }
  } finally {
    clearInterval(ticker);
    options.onProgress?.(progress());
    stopping = true;
    await pool?.stop(10_000);
  }

  // A stopped run still reports where every job got to.
  await refreshStates(clients, names.jobsTable, [...workload.expectedDone, ...workload.expectedDead], states);
  const balances = await readBalances(clients, names.ledgerTable, workload.accounts);
  const accounts = workload.accounts.map((account) => {
    const expected = workload.expectedBalances[account] ?? 0;
    const actual = balances.get(account);
    return { account, expected, actual, ok: actual === expected };
  });
  const deadLetters = await runDeadLetters(clients, names.dlqUrl, runId, started);
  const counters = pool ? Object.fromEntries(COUNTERS.map((c) => [c, pool.total(c)])) : {};
  const missing = workload.expectedDone.filter((k) => states.get(k) !== JobStatus.Completed);
  const deadOk = workload.expectedDead.every((k) => states.get(k) === JobStatus.Dead);
  const moneyExpected = accounts.reduce((n, a) => n + a.expected, 0);
  const moneyActual = accounts.reduce((n, a) => n + (a.actual ?? 0), 0);
  return {
    runId,
    runtime: options.runtime ?? 'local',
    workload: { ...workload.counts, messages: workload.messages.length },
    completed: countStates(states, JobStatus.Completed),
    deadLettered: countStates(states, JobStatus.Dead),
    missing,
    accounts,
    moneyExpected,
    moneyActual,
    deadLetters,
    counters,
    perWorker: [...(pool?.workers.values() ?? [])].map((w) => ({
      id: w.id,
      succeeded: w.counters.JobSucceeded ?? 0,
      exit: w.exitSignal ?? (w.exitCode === null ? 'running' : `exit ${w.exitCode}`),
    })),
    workerRestarts: restarts,
    elapsedMs: Date.now() - started,
    timedOut,
    aborted: options.signal?.aborted ?? false,
    verified: !timedOut && missing.length === 0 && deadOk && accounts.every((a) => a.ok),
  };
}

/** Writes every account with `balance` (version 1). The chaos harness seeds its accounts with it too. */
export async function seedAccounts(
  clients: AwsClients,
  table: string,
  accounts: readonly string[],
  balance: number,
) {
  for (let i = 0; i < accounts.length; i += 25) {
    await clients.doc.send(
      new BatchWriteCommand({
        RequestItems: {
          [table]: accounts
            .slice(i, i + 25)
            .map((account) => ({ PutRequest: { Item: { account, balance, version: 1 } } })),
        },
      }),
    );
  }
}

/** Reads the status of every key not yet COMPLETED or DEAD into `states` (batched, strongly consistent). */
export async function refreshStates(
  clients: AwsClients,
  table: string,
  keys: readonly string[],
  states: Map<string, string>,
) {
  const pending = keys.filter((k) => {
    const s = states.get(k);
    return s !== JobStatus.Completed && s !== JobStatus.Dead;
  });
  const chunks: string[][] = [];
  for (let i = 0; i < pending.length; i += 100) chunks.push(pending.slice(i, i + 100));
  await runLimited(chunks, 4, async (chunk) => {
    let request:
      | Record<
          string,
          {
            Keys: Record<string, string>[];
            ProjectionExpression: string;
            ExpressionAttributeNames: Record<string, string>;
            ConsistentRead: boolean;
          }
        >
      | undefined = {
      [table]: {
        Keys: chunk.map((dedupKey) => ({ dedupKey })),
        ProjectionExpression: 'dedupKey, #s',
        ExpressionAttributeNames: { '#s': 'status' },
        ConsistentRead: true,
      },
    };
    while (request && Object.keys(request).length > 0) {
      const out = await clients.doc.send(new BatchGetCommand({ RequestItems: request }));
      for (const item of out.Responses?.[table] ?? []) states.set(String(item.dedupKey), String(item.status));
      request = out.UnprocessedKeys as typeof request;
    }
  });
}

async function readBalances(
  clients: AwsClients,
  table: string,
  accounts: readonly string[],
): Promise<Map<string, number>> {
  const out = await clients.doc.send(
    new BatchGetCommand({
      RequestItems: { [table]: { Keys: accounts.map((account) => ({ account })), ConsistentRead: true } },
    }),
  );
  return new Map((out.Responses?.[table] ?? []).map((item) => [String(item.account), Number(item.balance)]));
}

/** The entry of {@link runDeadLetters} for the letters of bodies that are no job (the malformed one). */
export const NOT_A_JOB = '(not a job envelope)';

/**
 * The run's dead letters, one entry per job with its letter count. Browsing makes them visible again at
 * once, so `leaseq dlq list` right after the demo sees them. A body that is not an envelope has no dedup
 * key; it belongs to this run when it was dead-lettered after the run started.
 */
async function runDeadLetters(
  clients: AwsClients,
  dlqUrl: string,
  runId: string,
  since: number,
): Promise<DeadLetterSummary[]> {
  const letters = await listDeadLetters(clients.sqs, dlqUrl, { limit: 1000 });
  const mine = new Map<string, DeadLetterSummary>();
  for (const letter of letters) {
    const ours = letter.dedupKey
      ? letter.dedupKey.startsWith(runId)
      : letter.deadAt !== undefined && Date.parse(letter.deadAt) >= since;
    if (!ours) continue;
    const dedupKey = letter.dedupKey ?? NOT_A_JOB;
    mine.set(dedupKey, {
      dedupKey,
      reason: letter.reason,
      errorClass: letter.errorClass ?? '?',
      attempts: letter.attempts === undefined ? '?' : String(letter.attempts),
      copies: (mine.get(dedupKey)?.copies ?? 0) + 1,
    });
  }
  return [...mine.values()].sort((a, b) => a.dedupKey.localeCompare(b.dedupKey));
}

function countStates(states: Map<string, string>, status: string): number {
  let n = 0;
  for (const s of states.values()) if (s === status) n += 1;
  return n;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
