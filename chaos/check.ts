import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { AwsClients } from '../shared/aws/clients.ts';
import { JobStatus } from '../shared/core/contract/statuses.ts';
import { listDeadLetters } from '../shared/ops/dlq.ts';
import { queueStats, totalDepth } from '../shared/ops/queue-stats.ts';
import { ACKNOWLEDGED, type CancelRecord } from './canceller.ts';
import { FAST_TYPES, TALLY_PREFIX, tallyKey } from './jobs.ts';
import type { Death } from './killer.ts';
import type { WorkerLogEvents } from './logs.ts';
import { MEET_PREFIX } from './meet-jobs.ts';
import type { Window } from './timing.ts';
import type { ChaosWorkload } from './workload.ts';

export interface CheckNames {
  readonly queueUrl: string;
  readonly dlqUrl: string;
  readonly jobsTable: string;
  readonly ledgerTable: string;
}

/** What happened during the run, as the harness saw it (the store's side is read by the checker). */
export interface RunEvents {
  readonly deaths: readonly Death[];
  /** Fault and pause windows. */
  readonly windows: readonly Window[];
  readonly logs: WorkerLogEvents;
  /** Worker counters summed over the pool (LeaseExpired, JobRetried, FastPathFallback, ...). */
  readonly counters: Readonly<Record<string, number>>;
  /** The fast path's one-write commits the workers tried (a killed worker's count is its last report). */
  readonly fastCommitCalls: number;
  readonly leaseMs: number;
  /** The cancels the harness made during the run, with their answers. */
  readonly cancels: readonly CancelRecord[];
}

export interface CheckFigures {
  readonly sent: number;
  readonly unique: number;
  readonly completed: number;
  readonly dead: number;
  readonly deadExpected: number;
  readonly lost: number;
  readonly stuck: number;
  readonly doubleEffects: number;
  readonly missingEffects: number;
  readonly moneyExpected: number;
  readonly moneyActual: number;
  readonly accountsWrong: number;
  readonly queueLeft: number;
  readonly dlqLetters: number;
  readonly takeovers: number;
  readonly retries: number;
  readonly healthyOwnersAborted: number;
  /** Of those, aborts that began outside every fault or pause window (plus a lease of slack). */
  readonly abortedOutsideFaults: number;
  /** "Lease lost" reports that were a renewal refused by the worker's own completed commit. */
  readonly renewalRacedOwnCommit: number;
  /** Longest time from a worker's death to the finish of a job taken over from it. */
  readonly longestRecoveryMs: number | null;
  readonly longestRecoveryJob: string | null;
  /** Jobs taken over from a dead worker. */
  readonly recoveredJobs: number;
  /** The fast path: jobs of a fast type, and how they ended (see {@link fastFigures}). */
  readonly fast: FastFigures;
  /** The tenant mix: per tenant, its jobs and the most committed runs seen at once (see {@link tenantFigures}). */
  readonly tenants: TenantFigures;
  /** The cancels: how many got each answer, and how many jobs broke a cancel's promise. */
  readonly cancels: CancelFigures;
}

export interface TenantFigures {
  /** Each tenant's `concurrency` limit. */
  readonly limit: number;
  readonly burstTenant: string;
  readonly perTenant: Readonly<Record<string, TenantFigure>>;
}

export interface TenantFigure {
  readonly jobs: number;
  /** Committed runs (COMPLETED jobs with their final tally and its start time). */
  readonly committed: number;
  /** The most committed runs whose [start, commit] intervals overlap at one instant. */
  readonly maxConcurrent: number;
}

export interface CancelFigures {
  /** Cancels by answer (`cancelled running`, `cancelled waiting`, `tombstone`, `finished`, ...). */
  readonly byAnswer: Readonly<Record<string, number>>;
  /** Acknowledged cancels (cancelled, tombstone, already-cancelled). */
  readonly acknowledged: number;
  /** Jobs breaking a cancel: acknowledged but not CANCELLED, an effect after it, in the DLQ; or cancelled unasked. */
  readonly violations: number;
}

/** How the fast-path jobs ended, from their rows; the attempts from the workers' counters. */
export interface FastFigures {
  /** Unique jobs of a fast type. */
  readonly jobs: number;
  /** Completed by their one-write commit (the row's claim, completion and lease end are one instant). */
  readonly oneWrite: number;
  /** Completed leased: after a failed fast attempt, or by a redelivery. */
  readonly leased: number;
  /** One-write commits tried (a commit refused as a duplicate or re-run on a conflict counts too). */
  readonly commitCalls: number;
  /** Fast attempts that failed and were recorded under a lease (metric FastPathFallback). */
  readonly fallbacks: number;
}

export interface CheckResult {
  readonly figures: CheckFigures;
  readonly violations: readonly string[];
  /** Dedup keys behind each violation (first few), to reproduce it. */
  readonly evidence: Readonly<Record<string, readonly string[]>>;
}

interface JobRow {
  readonly dedupKey: string;
  readonly status: string;
  readonly owner?: string;
  readonly attempts?: number;
  readonly token?: number;
  readonly completedAt?: number;
  readonly updatedAt?: number;
  readonly type?: string;
  readonly claimedAt?: number;
  readonly leaseUntil?: number;
}

/** Concurrency violations name this (the report finds their evidence by it). */
const OVER_LIMIT = 'committed runs of one tenant over its concurrency limit';

const FAST = new Set<string>(Object.values(FAST_TYPES));

/**
 * A row completed by the fast path's one write: claimed, completed and its lease ended at the commit's one
 * instant (a leased completion comes after its claim, with the lease still running).
 */
function oneWrite(row: JobRow): boolean {
  return (
    row.status === JobStatus.Completed &&
    row.completedAt !== undefined &&
    row.completedAt === row.claimedAt &&
    row.completedAt === row.leaseUntil
  );
}

/**
 * Reads the store directly at the end of a run (the queue's attributes, the DLQ with its reason
 * attributes, the run's rows of the jobs table and of the ledger) and judges it against the workload:
 * every job done or dead, the dead set the poison set, no effect twice, money conserved.
 */
export async function checkRun(
  clients: AwsClients,
  names: CheckNames,
  workload: ChaosWorkload,
  events: RunEvents,
): Promise<CheckResult> {
  const runId = workload.runId;
  const jobs = await scanPrefix<JobRow>(clients, names.jobsTable, 'dedupKey', [runId]);
  const ledger = await scanPrefix<Record<string, unknown>>(clients, names.ledgerTable, 'account', [
    `${runId}-`,
    `${TALLY_PREFIX}${runId}`,
  ]);
  const queueDepth = await queueStats(clients.sqs, names.queueUrl);
  const depth = totalDepth(queueDepth);
  const letters = await listDeadLetters(clients.sqs, names.dlqUrl, { limit: 10_000 });

  const byKey = new Map(jobs.map((j) => [j.dedupKey, j]));
  const evidence: Record<string, string[]> = {};
  const violations: string[] = [];
  const note = (violation: string, keys: readonly string[]) => {
    if (keys.length === 0) return;
    violations.push(`${violation}: ${keys.length}`);
    evidence[violation] = keys.slice(0, 20);
  };

  // Cancelled jobs: acknowledged ones must end CANCELLED; one whose cancel failed may end either way.
  const acked = new Set(events.cancels.filter((c) => ACKNOWLEDGED.has(c.answer)).map((c) => c.dedupKey));
  const unsure = new Set(events.cancels.filter((c) => c.answer === 'error').map((c) => c.dedupKey));
  const statusOf = (k: string) => byKey.get(k)?.status;
  // Jobs that must complete: the workload's, less those cancelled; an unsure one by how it ended.
  const mustComplete = workload.expectedDone.filter(
    (k) => !acked.has(k) && (!unsure.has(k) || statusOf(k) !== JobStatus.Cancelled),
  );
  const mustCompleteSet = new Set(mustComplete);
  const expected = [...workload.expectedDone, ...workload.expectedDead];
  const lost = expected.filter((k) => !byKey.has(k));
  const stuck = expected.filter((k) => {
    const s = statusOf(k);
    return s !== undefined && s !== JobStatus.Completed && s !== JobStatus.Dead && s !== JobStatus.Cancelled;
  });
  const notCompleted = mustComplete.filter((k) => {
    const s = statusOf(k);
    return s !== undefined && s !== JobStatus.Completed && !stuck.includes(k);
  });
  const poison = new Set(workload.expectedDead);
  const deadRows = jobs.filter((j) => j.status === JobStatus.Dead);
  const wrongDead = deadRows.filter((j) => !poison.has(j.dedupKey)).map((j) => j.dedupKey);
  const poisonNotDead = workload.expectedDead.filter((k) => byKey.get(k)?.status !== JobStatus.Dead);
  const letterKeys = new Set(letters.map((l) => l.dedupKey ?? ''));
  const poisonWithoutLetter = workload.expectedDead.filter((k) => !letterKeys.has(k));
  // The `--meet` variant's letters (meet.ts) are its own checks'.
  const foreignLetters = letters
    .filter((l) => l.dedupKey !== undefined && !poison.has(l.dedupKey) && !l.dedupKey.startsWith(MEET_PREFIX))
    .map((l) => `${l.dedupKey} (${l.reason})`);
  note('lost jobs (no row in the jobs table)', lost);
  note('stuck jobs (not COMPLETED, DEAD or CANCELLED at the end)', stuck);
  note(
    'jobs that should have completed but ended DEAD or CANCELLED',
    notCompleted.map((k) => `${k} (${statusOf(k)})`),
  );
  note('dead jobs outside the poison set', wrongDead);
  note('poison jobs not DEAD', poisonNotDead);
  note('poison jobs without a dead letter', poisonWithoutLetter);
  note('dead letters of jobs outside the poison set', foreignLetters);

  // Effects: every step of a completed job exactly once, nothing of a dead one.
  const tallies = new Map<string, number>();
  for (const row of ledger) {
    const key = String(row.account);
    if (key.startsWith(`${TALLY_PREFIX}${runId}`)) tallies.set(key, Number(row.applied ?? 0));
  }
  const doubles: string[] = [];
  const missing: string[] = [];
  for (const key of mustComplete) {
    const steps = workload.transfers.has(key) ? ['debit', 'final'] : ['final'];
    for (const step of steps) {
      const applied = tallies.get(tallyKey(key, step)) ?? 0;
      if (applied > 1) doubles.push(`${key}#${step} x${applied}`);
      if (applied === 0 && byKey.get(key)?.status === JobStatus.Completed) missing.push(`${key}#${step}`);
    }
  }
  for (const key of workload.expectedDead) {
    for (const step of ['debit', 'final']) {
      if ((tallies.get(tallyKey(key, step)) ?? 0) > 0)
        doubles.push(`${key}#${step} (poison job had an effect)`);
    }
  }
  note('double effects', doubles);
  // A cancelled job that had not completed when the cancel was written may keep the checkpoints it made
  // before; its completion (the final tally, committed with it) must never come.
  const cancelBroken: string[] = [];
  const noteCancel = (violation: string, keys: readonly string[]) => {
    cancelBroken.push(...keys);
    note(violation, keys);
  };
  noteCancel(
    'acknowledged cancels whose job did not end CANCELLED',
    [...acked].filter((k) => statusOf(k) !== JobStatus.Cancelled).map((k) => `${k} (${statusOf(k)})`),
  );
  noteCancel(
    'cancelled jobs with a completion committed (after the cancel)',
    [...acked, ...[...unsure].filter((k) => statusOf(k) === JobStatus.Cancelled)].filter(
      (k) => (tallies.get(tallyKey(k, 'final')) ?? 0) > 0,
    ),
  );
  noteCancel(
    'cancelled jobs in the DLQ',
    [...acked, ...unsure].filter((k) => letterKeys.has(k)),
  );
  noteCancel(
    'CANCELLED jobs nobody cancelled',
    jobs
      .filter((j) => j.status === JobStatus.Cancelled && !acked.has(j.dedupKey) && !unsure.has(j.dedupKey))
      .map((j) => j.dedupKey),
  );
  note('completed jobs missing an effect', missing);
  note(
    'one-write completions of a leased job type',
    jobs.filter((j) => oneWrite(j) && !FAST.has(j.type ?? '')).map((j) => `${j.dedupKey} (${j.type})`),
  );

  const balances = new Map(ledger.map((row) => [String(row.account), Number(row.balance ?? 0)]));
  const wrongAccounts = workload.accounts.filter((a) => balances.get(a) !== workload.expectedBalances[a]);
  const moneyExpected = workload.accounts.reduce((n, a) => n + (workload.expectedBalances[a] ?? 0), 0);
  const moneyActual = workload.accounts.reduce((n, a) => n + (balances.get(a) ?? 0), 0);
  note(
    'accounts with a wrong balance',
    wrongAccounts.map((a) => `${a}: expected ${workload.expectedBalances[a]}, got ${balances.get(a)}`),
  );
  if (moneyExpected !== moneyActual)
    violations.push(`money not conserved: expected ${moneyExpected}, got ${moneyActual}`);
  // Tenant accounts: the credits of the tenant jobs that completed, each once.
  const tenantExpected = new Map<string, number>();
  for (const [key, job] of workload.tenants.jobs) {
    const amount = statusOf(key) === JobStatus.Completed || mustCompleteSet.has(key) ? job.amount : 0;
    tenantExpected.set(job.account, (tenantExpected.get(job.account) ?? 0) + amount);
  }
  note(
    'tenant accounts with a wrong balance',
    [...tenantExpected]
      .filter(([account, amount]) => (balances.get(account) ?? 0) !== amount)
      .map(([account, amount]) => `${account}: expected ${amount}, got ${balances.get(account) ?? 0}`),
  );
  const tenants = tenantFigures(workload, byKey, ledger);
  note(
    OVER_LIMIT,
    Object.entries(tenants.figures.perTenant)
      .filter(([, t]) => t.maxConcurrent > workload.tenants.limit)
      .map(
        ([tenant, t]) => `${tenant}: ${t.maxConcurrent} at once (${tenants.peaks.get(tenant)?.join(' ')})`,
      ),
  );
  // A message still visible or delayed is a job's way back that was never taken: a violation. One held in
  // flight once every job has finished is a racing copy hidden past its batch whose worker was killed
  // before deleting it (protocol.md, known gap 15): harmless, dropped when it shows again.
  const waiting = queueDepth.visible + queueDepth.delayed;
  const everyJobFinished = lost.length === 0 && stuck.length === 0;
  if (waiting > 0 || (queueDepth.inFlight > 0 && !everyJobFinished)) {
    violations.push(`jobs queue not drained at the end: ${depth} messages left`);
  }

  // Aborted healthy owners: lease-lost aborts in live workers; outside every window is suspicious.
  const slack = events.leaseMs * 2;
  const outside = events.logs.leaseLost.filter(
    (e) => !events.windows.some((w) => e.at >= w.start - 1000 && e.at <= (w.end ?? Date.now()) + slack),
  );

  return {
    figures: {
      sent: workload.messages.length,
      unique: workload.counts.unique,
      completed: jobs.filter((j) => j.status === JobStatus.Completed).length,
      dead: deadRows.length,
      deadExpected: workload.expectedDead.length,
      lost: lost.length,
      stuck: stuck.length,
      doubleEffects: doubles.length,
      missingEffects: missing.length,
      moneyExpected,
      moneyActual,
      accountsWrong: wrongAccounts.length,
      queueLeft: depth,
      dlqLetters: letters.length,
      takeovers: Math.max(events.counters.LeaseExpired ?? 0, events.logs.takeovers.length),
      retries: events.counters.JobRetried ?? 0,
      healthyOwnersAborted: events.logs.leaseLost.length,
      abortedOutsideFaults: outside.length,
      renewalRacedOwnCommit: events.logs.renewalRacedOwnCommit.length,
      ...recovery(events, byKey),
      fast: fastFigures(jobs, events),
      tenants: tenants.figures,
      cancels: {
        byAnswer: cancelCounts(events.cancels),
        acknowledged: acked.size,
        violations: cancelBroken.length,
      },
    },
    violations,
    evidence,
  };
}

/** How the fast-path jobs ended (one write, or leased), and how many fast attempts the workers made. */
function fastFigures(jobs: readonly JobRow[], events: RunEvents): FastFigures {
  const fast = jobs.filter((j) => FAST.has(j.type ?? ''));
  const completed = fast.filter((j) => j.status === JobStatus.Completed);
  const oneWrites = completed.filter(oneWrite).length;
  return {
    jobs: fast.length,
    oneWrite: oneWrites,
    leased: completed.length - oneWrites,
    commitCalls: events.fastCommitCalls,
    fallbacks: events.counters.FastPathFallback ?? 0,
  };
}

/** Cancels by answer; `cancelled` split by whether the job was running. */
export function cancelCounts(cancels: readonly CancelRecord[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const c of cancels) {
    const name = c.answer === 'cancelled' ? `cancelled ${c.wasRunning ? 'running' : 'waiting'}` : c.answer;
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

/**
 * Per tenant, the most committed runs at one instant. A committed run is a COMPLETED tenant job: its final
 * tally holds the run's start (taken after its slot), its row the commit's time (`completedAt`); a run
 * that did not commit left neither, so aborted and refused runs are not counted. Intervals are [start,
 * commit); at one instant a commit ends before a start begins. `peaks`: the keys of the runs at each
 * tenant's peak.
 */
export function tenantFigures(
  workload: ChaosWorkload,
  byKey: ReadonlyMap<string, JobRow>,
  ledger: readonly Record<string, unknown>[],
): { figures: TenantFigures; peaks: Map<string, string[]> } {
  const starts = new Map<string, number>();
  for (const row of ledger)
    if (typeof row.startedAt === 'number') starts.set(String(row.account), row.startedAt);
  const runs = new Map<string, { key: string; start: number; end: number }[]>();
  const perTenant: Record<string, TenantFigure> = {};
  for (const [tenant, jobs] of Object.entries(workload.tenants.perTenant)) {
    perTenant[tenant] = { jobs, committed: 0, maxConcurrent: 0 };
    runs.set(tenant, []);
  }
  for (const [key, job] of workload.tenants.jobs) {
    const row = byKey.get(key);
    const start = starts.get(tallyKey(key, 'final'));
    if (row?.status !== JobStatus.Completed || row.completedAt === undefined || start === undefined) continue;
    runs.get(job.tenant)?.push({ key, start, end: row.completedAt });
  }
  const peaks = new Map<string, string[]>();
  for (const [tenant, list] of runs) {
    const { max, at } = maxOverlap(list);
    perTenant[tenant] = { jobs: perTenant[tenant]?.jobs ?? 0, committed: list.length, maxConcurrent: max };
    peaks.set(tenant, at);
  }
  return {
    figures: { limit: workload.tenants.limit, burstTenant: workload.tenants.burstTenant, perTenant },
    peaks,
  };
}

/** The most intervals [start, end) covering one instant, and the keys of one such set. */
export function maxOverlap(runs: readonly { key: string; start: number; end: number }[]): {
  max: number;
  at: string[];
} {
  const points = runs.flatMap((r) => [
    { t: r.start, d: 1, key: r.key },
    { t: Math.max(r.start, r.end), d: -1, key: r.key },
  ]);
  points.sort((a, b) => a.t - b.t || a.d - b.d);
  const open = new Set<string>();
  let max = 0;
  let at: string[] = [];
  for (const p of points) {
    if (p.d < 0) open.delete(p.key);
    else open.add(p.key);
    if (open.size > max) {
      max = open.size;
      at = [...open];
    }
  }
  return { max, at };
}

/**
 * Longest time from a worker's death to the moment the last job it held was finished by another worker
 * (the takeover logs name the dead owner; the jobs table has the completion time).
 */
function recovery(
  events: RunEvents,
  byKey: ReadonlyMap<string, JobRow>,
): Pick<CheckFigures, 'longestRecoveryMs' | 'longestRecoveryJob' | 'recoveredJobs'> {
  let longestRecoveryMs: number | null = null;
  let longestRecoveryJob: string | null = null;
  const recovered = new Set<string>();
  for (const death of events.deaths) {
    for (const t of events.logs.takeovers) {
      if (t.previousOwner !== death.worker || t.at < death.at) continue;
      recovered.add(t.dedupKey);
      const row = byKey.get(t.dedupKey);
      const finished = row?.completedAt ?? row?.updatedAt;
      if (finished === undefined || finished - death.at <= (longestRecoveryMs ?? -1)) continue;
      longestRecoveryMs = finished - death.at;
      longestRecoveryJob = `${t.dedupKey} after ${death.worker} ${death.cause}`;
    }
  }
  return { longestRecoveryMs, longestRecoveryJob, recoveredJobs: recovered.size };
}

/** Every item of `table` whose `attribute` starts with one of `prefixes` (a full scan, filtered). */
async function scanPrefix<T>(
  clients: AwsClients,
  table: string,
  attribute: string,
  prefixes: readonly string[],
): Promise<T[]> {
  const items: T[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await clients.doc.send(
      new ScanCommand({
        TableName: table,
        FilterExpression: prefixes.map((_, i) => `begins_with(#k, :p${i})`).join(' OR '),
        ExpressionAttributeNames: { '#k': attribute },
        ExpressionAttributeValues: Object.fromEntries(prefixes.map((p, i) => [`:p${i}`, p])),
        ConsistentRead: true,
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    items.push(...((out.Items ?? []) as T[]));
    start = out.LastEvaluatedKey;
  } while (start);
  return items;
}
