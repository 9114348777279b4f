import type { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { vi } from 'vitest';
import { makeEnvelope } from '../../shared/core/contract/envelope.ts';
import type { Checkpoint, JobItem } from '../../shared/core/contract/job-item.ts';
import type { DeadLetterReason, JobQueue } from '../../shared/core/contract/job-queue.ts';
import type {
  ClaimRequest,
  ClaimResult,
  Effect,
  FastCommitRequest,
  FastCommitResult,
  FencedWriteResult,
  JobLease,
  JobStore,
  StoreCallOptions,
} from '../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { visibilityForLease } from '../../shared/core/decisions/lease-timing.ts';
import { versionedPut } from '../../shared/core/decisions/optimistic.ts';
import { JobRegistry } from '../../shared/core/model/registry.ts';
import type { PayloadSchema } from '../../shared/core/model/standard-schema.ts';
import { MetricName } from '../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics } from '../../shared/core/observe/metrics.ts';
import { processBatch } from '../../shared/core/pipeline/batch.ts';
import { CompletedCache } from '../../shared/core/pipeline/completed-cache.ts';
import { JobProcessor, type RecordOutcome } from '../../shared/core/pipeline/processor.ts';
import {
  describe as describeError,
  LeaseLostError,
  PermanentJobError,
  StoreUnavailableError,
  TransientJobError,
} from '../../shared/errors.ts';
import { defineJob } from '../../shared/jobs/define-job.ts';
import {
  type EffectApplier,
  type EffectOutcome,
  InMemoryEffectApplier,
} from '../../shared/testing/in-memory-effects.ts';
import { InMemoryJobStore } from '../../shared/testing/in-memory-job-store.ts';
import { InMemoryQueue } from '../../shared/testing/in-memory-queue.ts';
import {
  ACCOUNTS,
  type CrashSpec,
  type FaultSpec,
  type JobSpec,
  type OpSpec,
  QUEUE_OPS,
  type Scenario,
  STORE_OPS,
} from './scenario.ts';

/*
 * The interleaving model's harness: 2-3 JobProcessors poll one simulated SQS queue (InMemoryQueue) and
 * share one InMemoryJobStore whose effects land in an in-memory ledger, under a schedule of duplicate
 * sends, store/queue faults (outages, lost answers, slow calls) and process kills.
 *
 * Time. The protocol is driven by timers (leases, heartbeats, visibility timeouts, backoff, slow calls),
 * so the model runs on a virtual clock: vi.useFakeTimers fakes setTimeout and Date, and `drive` jumps
 * from one timer to the next (vi.advanceTimersToNextTimer, synchronous) and then lets every promise
 * continuation run to quiescence (one real setImmediate: the microtask queue drains before it fires).
 * A run of many virtual minutes costs milliseconds. (vi.advanceTimersByTimeAsync yields a real
 * setTimeout per timer, ~1 ms each, far too slow for thousands of schedules.)
 *
 * Interleavings. Port calls cost no virtual time, so several workers act at the same virtual instant;
 * their order at every await is shuffled by the seeded jitter in `Ports.call` (0-3 extra microtask yields
 * before the call and after its answer) and in the jobs' read-modify-write of the ledger, on top of the
 * random receive order and poll jitter. That is why the model does not use fc.scheduler: the awaits to
 * be reordered are the library's own, and the seeded jitter reorders them without wrapping them all,
 * while the virtual clock keeps lease expiry, visibility and backoff real.
 *
 * Crashes. A worker dies at its n-th port call (store or queue), before the call is sent or after the
 * store applied it. From then on none of its calls is made or answered: every promise it awaits hangs, so
 * its heartbeat stops at the next renewal, its job never commits and its message is never deleted, as
 * when a process is killed. Its lease must expire and its message come back to another worker.
 *
 * Fast path. Every job kind but `steps` has a twin defined with `fastPath: true` (`model.fast.<kind>`):
 * on its first receive it runs unclaimed and commits its credit with the completion in one write
 * (`claimAndComplete`), which the faults reach like any other call; its credit is read when the job
 * runs, so racing copies and neighbours conflict optimistically. AuditStore checks the store's answers
 * against the effects it applied (which lists, by identity), so a refused commit that wrote shows.
 */

/** Virtual start of every run (fixed, so runs replay). */
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
/**
 * Virtual time a run may take before what is left counts as stuck: generous, since each failed delete
 * of a Lambda batch hides its message for 6 x the timeout (up to 6 min) before it is dropped again.
 */
export const BUDGET_MS = 6 * 3_600_000;
/** Timer firings after which a run counts as livelocked. */
const MAX_TIMERS = 200_000;
const TRACE_LIMIT = 20_000;
const LEDGER = 'ledger';
/** LEASEQ_DEADLINE_MARGIN_MS's default (shared/worker/config.ts). */
const DEADLINE_MARGIN_MS = 3000;
const realSetImmediate = globalThis.setImmediate;

/** What one run found, and what it did. */
export interface RunReport {
  readonly violations: readonly string[];
  readonly stats: RunStats;
  /** The run's trace, formatted (only when asked, or when there are violations). */
  readonly trace?: string;
}

export interface RunStats {
  virtualMs: number;
  timers: number;
  outages: number;
  lostAnswers: number;
  slowCalls: number;
  stalledCalls: number;
  crashes: number;
  timeouts: number;
  restarts: number;
  duplicateSends: number;
  takeovers: number;
  ownMessageEarly: number;
  optimisticConflicts: number;
  leaseLostExcused: number;
  completed: number;
  dead: number;
  letters: number;
  extraLetters: number;
  /** Fast-path commits (`claimAndComplete`) the store answered: ok, refused, effect conflict. */
  fastCommits: number;
  fastRefused: number;
  fastConflicts: number;
  /** Fast commits whose answer was lost or abandoned (the processor then reads the item). */
  fastUnknown: number;
  /** Fast attempts that failed and were recorded under a lease (metric FastPathFallback). */
  fastFallbacks: number;
  /** Injected faults (outages, lost answers, slow calls) that hit a fast commit. */
  fastFaults: number;
}

/** Every figure of {@link RunStats} at 0. */
export function emptyStats(): RunStats {
  return {
    virtualMs: 0,
    timers: 0,
    outages: 0,
    lostAnswers: 0,
    slowCalls: 0,
    stalledCalls: 0,
    crashes: 0,
    timeouts: 0,
    restarts: 0,
    duplicateSends: 0,
    takeovers: 0,
    ownMessageEarly: 0,
    optimisticConflicts: 0,
    leaseLostExcused: 0,
    completed: 0,
    dead: 0,
    letters: 0,
    extraLetters: 0,
    fastCommits: 0,
    fastRefused: 0,
    fastConflicts: 0,
    fastUnknown: 0,
    fastFallbacks: 0,
    fastFaults: 0,
  };
}

/** Runs one scenario on a fresh world under fake timers; never leaves fake timers installed. */
export interface RunOptions {
  /** Return the trace even when no invariant is violated. */
  readonly trace?: boolean;
  /** What the workers see instead of the shared store (the model's own self-test breaks it on purpose). */
  readonly wrapStore?: (store: InMemoryJobStore) => JobStore;
}

export async function runScenario(scenario: Scenario, options: RunOptions = {}): Promise<RunReport> {
  vi.useFakeTimers({
    now: T0,
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
  });
  try {
    const world = new World(scenario, options.wrapStore);
    world.start();
    await world.drive();
    const violations = await world.check();
    return {
      violations,
      stats: world.stats,
      ...(options.trace || violations.length > 0 ? { trace: world.formatTrace() } : {}),
    };
  } finally {
    vi.clearAllTimers();
    vi.useRealTimers();
  }
}

/** A small seeded PRNG (mulberry32): the run's every random choice comes from it. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const hang = (): Promise<never> => new Promise<never>(() => {});
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const flush = (): Promise<void> => new Promise((resolve) => realSetImmediate(resolve));

type TraceEntry = readonly [at: number, level: string, message: string, extra: Record<string, unknown>];

class World {
  readonly scenario: Scenario;
  readonly rng: () => number;
  readonly ledger = new InMemoryEffectApplier({ tables: { [LEDGER]: ['account'] } });
  readonly applier: CountingApplier;
  readonly store: InMemoryJobStore;
  readonly queue = new InMemoryQueue();
  readonly metrics = new InMemoryMetrics();
  readonly registry: JobRegistry;
  readonly logger: Logger;
  readonly stats: RunStats = emptyStats();

  readonly violations: string[] = [];
  /** `worker dedupKey` pairs for which one of that worker's calls about that job failed or was slow. */
  readonly touched = new Set<string>();
  /** The job (dedupKey) of each message id sent. */
  readonly keyOfMessage = new Map<string, string>();
  /** Handler runs per job that reached its failure point (flaky jobs fail the first `failRuns`). */
  readonly handlerRuns = new Map<string, number>();
  /** Ops (`dedupKey#step`) and their credit. */
  readonly ops = new Map<string, OpSpec>();
  readonly workers: ModelWorker[] = [];
  readonly #trace: TraceEntry[] = [];
  #pending = 0;
  #stuck: string | undefined;
  stopped = false;

  /**
   * The store as the workers see it: the shared one (unless a self-test wraps it), behind the audit of
   * its answers.
   */
  readonly workerStore: JobStore;
  /** Per job, the writes that answered "completed" (a fenced complete or a fast commit). */
  readonly completions = new Map<string, string[]>();

  constructor(scenario: Scenario, wrapStore?: (store: InMemoryJobStore) => JobStore) {
    this.scenario = scenario;
    this.rng = prng(scenario.seed);
    this.applier = new CountingApplier(this.ledger, this);
    this.store = new InMemoryJobStore({ effects: this.applier });
    this.workerStore = new AuditStore(wrapStore ? wrapStore(this.store) : this.store, this);
    this.registry = modelRegistry(this);
    this.logger = traceLogger(this);
    scenario.jobs.forEach((job, index) => {
      job.steps.forEach((op, step) => {
        this.ops.set(`${jobKey(index)}#s${step + 1}`, op);
      });
      if (!job.poison && job.final) this.ops.set(`${jobKey(index)}#final`, job.final);
    });
  }

  start(): void {
    const s = this.scenario;
    s.jobs.forEach((_, index) => {
      this.send(index, 0);
    });
    s.duplicates.forEach((dup) => {
      const index = dup.job % s.jobs.length;
      this.later(dup.atMs, () => {
        this.stats.duplicateSends += 1;
        this.send(index, dup.sameBody ? 0 : this.stats.duplicateSends);
      });
    });
    for (const fault of s.faults) setTimeout(() => this.arm(fault), fault.atMs);
    for (let slot = 0; slot < s.workers; slot++) this.spawn(slot, 0);
  }

  /** Runs the virtual clock until the queue is empty and every live worker idle, or the budget is spent. */
  async drive(): Promise<void> {
    const end = T0 + BUDGET_MS;
    await flush();
    while (!this.#done()) {
      if (Date.now() >= end) {
        this.#stuck = `virtual time budget (${BUDGET_MS} ms) spent`;
        break;
      }
      if (vi.getTimerCount() === 0) {
        this.#stuck = 'nothing left to happen (no timer pending) but the run is not done';
        break;
      }
      if (++this.stats.timers > MAX_TIMERS) {
        this.#stuck = `livelock: ${MAX_TIMERS} timers fired`;
        break;
      }
      vi.advanceTimersToNextTimer();
      await flush();
    }
    this.stats.virtualMs = Date.now() - T0;
    this.stopped = true;
    this.log('info', 'run ends', { stuck: this.#stuck, queue: this.queue.size });
  }

  #done(): boolean {
    return this.#pending === 0 && this.queue.size === 0 && this.workers.every((w) => w.ports.dead || !w.busy);
  }

  /** Sends job `index`: `copy` 0 is the original body (a same-body duplicate too), n a new envelope. */
  send(index: number, copy: number): void {
    const spec = this.scenario.jobs[index] as JobSpec;
    const body = JSON.stringify(
      makeEnvelope({
        id: `job-${index}-e${copy}`,
        dedupKey: jobKey(index),
        type: jobType(spec),
        payload: { job: index },
        createdAt: new Date(T0),
      }),
    );
    const messageId = this.queue.send(body);
    this.keyOfMessage.set(messageId, jobKey(index));
    this.log('info', 'sent', { dedupKey: jobKey(index), messageId, copy });
  }

  /** Schedules a harness event the run waits for (a duplicate send, a restart). */
  later(ms: number, event: () => void): void {
    this.#pending += 1;
    setTimeout(() => {
      this.#pending -= 1;
      if (!this.stopped) event();
    }, ms);
  }

  spawn(slot: number, generation: number): void {
    const mine = this.scenario.crashes.filter((c) => c.slot % this.scenario.workers === slot);
    const worker = new ModelWorker(this, slot, generation, mine[generation]);
    this.workers[slot] = worker;
    if (generation > 0) this.stats.restarts += 1;
    this.log('info', 'worker starts', { worker: worker.id });
    void worker.loop();
  }

  /** A worker died (a planned crash, or a Lambda invocation killed at its timeout): replace it later. */
  onDeath(worker: ModelWorker, why: string, restartAfterMs: number): void {
    if (why === 'timeout') this.stats.timeouts += 1;
    else this.stats.crashes += 1;
    this.log('warn', `worker killed (${why})`, { worker: worker.id, calls: worker.ports.calls });
    this.later(restartAfterMs, () => this.spawn(worker.slot, worker.generation + 1));
  }

  arm(fault: FaultSpec): void {
    const when = fault.mode.endsWith('before') ? 'before' : 'after';
    const options = { times: fault.times, when } as const;
    const fail = fault.mode.startsWith('fail');
    const error = (operation: string) => {
      if (when === 'after') this.stats.lostAnswers += 1;
      else this.stats.outages += 1;
      const cause = new Error(`injected fault (${fault.mode})`);
      cause.name = 'ServiceUnavailable';
      return new StoreUnavailableError(operation, cause);
    };
    if (fault.target === 'store') {
      const op = STORE_OPS[fault.op % STORE_OPS.length] ?? 'claim';
      if (fail) this.store.faults.failNext(op, error, options);
      else this.store.faults.delayNext(op, fault.delayMs, options);
    } else {
      const op = QUEUE_OPS[fault.op % QUEUE_OPS.length] ?? 'delete';
      if (fail) this.queue.faults.failNext(op, error, options);
      else this.queue.faults.delayNext(op, fault.delayMs, options);
    }
    this.log('info', 'fault armed', { ...fault });
  }

  touch(worker: string, dedupKey: string): void {
    this.touched.add(`${worker} ${dedupKey}`);
  }

  /** Calls in flight per `worker dedupKey`, with their start times (a call still waiting is a slow one). */
  readonly inFlight = new Map<string, number[]>();

  callStarted(worker: string, dedupKey: string, at: number): void {
    const key = `${worker} ${dedupKey}`;
    this.inFlight.set(key, [...(this.inFlight.get(key) ?? []), at]);
  }

  callEnded(worker: string, dedupKey: string, at: number): void {
    const key = `${worker} ${dedupKey}`;
    const left = [...(this.inFlight.get(key) ?? [])];
    left.splice(left.indexOf(at), 1);
    this.inFlight.set(key, left);
  }

  /** True when one of the worker's calls about the job has been waiting since before now. */
  #waiting(worker: string, dedupKey: string): boolean {
    return (this.inFlight.get(`${worker} ${dedupKey}`) ?? []).some((at) => at < Date.now());
  }

  onOutcome(worker: ModelWorker, record: SQSRecord, outcome: RecordOutcome): void {
    // A killed process reports nothing: its timers (the heartbeat's watchdog) may still fire in this
    // simulation, but a real kill takes them along.
    if (worker.ports.dead) return;
    const key = outcome.dedupKey ?? this.keyOfMessage.get(record.messageId) ?? '?';
    this.log('info', `outcome ${outcome.action}/${outcome.disposition}`, {
      worker: worker.id,
      dedupKey: key,
      messageId: record.messageId,
    });
    if (outcome.action === 'lease-lost' || outcome.action === 'lease-ran-out') {
      // Excused: a call about this job failed, was slow, or is still waiting (a slow call the heartbeat
      // gave up on before it returned).
      if (this.touched.has(`${worker.id} ${key}`) || this.#waiting(worker.id, key))
        this.stats.leaseLostExcused += 1;
      else {
        this.violations.push(
          `healthy owner aborted: ${worker.id} got lease-lost on ${key} (message ${record.messageId}) at ` +
            `t=${Date.now() - T0} ms, though none of its calls about ${key} failed or was slow`,
        );
      }
    }
  }

  /**
   * A write carrying `effects` answered (`ok`), or was refused by its fence or the claim's condition, or
   * hit an effect conflict: the effects must have been applied exactly when it says ok (all or none).
   */
  audited(what: string, dedupKey: string, effects: readonly Effect[], ok: boolean): void {
    if (effects.length === 0) return;
    const applied = this.applier.batches.has(effects);
    if (ok && !applied) this.violations.push(`${what} on ${dedupKey} answered ok but applied no effect`);
    if (!ok && applied) {
      this.violations.push(`${what} on ${dedupKey} was refused or conflicted, yet its effects were applied`);
    }
  }

  /** A write answered that it completed the job: that may happen once per job. */
  completedBy(dedupKey: string, what: string): void {
    const all = [...(this.completions.get(dedupKey) ?? []), `${what} at t=${Date.now() - T0}`];
    this.completions.set(dedupKey, all);
    if (all.length === 2) this.violations.push(`${dedupKey} completed twice: ${all.join(', ')}`);
  }

  /** A fast commit is sent: only for a fast type, and only on its message's first receive. */
  fastCommitSent(request: FastCommitRequest): void {
    if (!request.type.startsWith(FAST_PREFIX)) {
      this.violations.push(`fast commit of ${request.dedupKey}, whose type ${request.type} is not fast`);
    }
    const receives = this.workers.find((w) => w.id === request.owner)?.batch.get(request.messageId);
    if (receives !== undefined && receives > 1) {
      this.violations.push(
        `fast path on a redelivery: ${request.owner} ran ${request.dedupKey} unclaimed on receive ` +
          `${receives} of message ${request.messageId}`,
      );
    }
  }

  /** 0-3 extra microtask turns: reorders concurrent work at the same virtual instant. */
  async jitter(): Promise<void> {
    const turns = Math.floor(this.rng() * 4);
    for (let i = 0; i < turns; i++) await Promise.resolve();
  }

  /** An effect crediting `op`, read now and committed later (optimistic: conflicts are possible). */
  async credit(opId: string, op: OpSpec): Promise<Effect> {
    const seen = this.ledger.get(LEDGER, { account: op.account }) as
      | { balance: number; version: number }
      | undefined;
    await this.jitter();
    return versionedPut({
      tableName: LEDGER,
      key: { account: op.account },
      seenVersion: seen?.version,
      item: { balance: (seen?.balance ?? 0) + op.delta, lastOp: opId },
    });
  }

  log(level: string, message: string, extra: Record<string, unknown> = {}): void {
    if (this.#trace.length < TRACE_LIMIT) this.#trace.push([Date.now() - T0, level, message, extra]);
  }

  formatTrace(): string {
    return this.#trace
      .map(([at, level, message, extra]) => {
        const { worker, dedupKey, ...rest } = extra;
        const who = [worker, dedupKey].filter((x) => x !== undefined).join(' ');
        const more = Object.keys(rest).length > 0 ? ` ${JSON.stringify(rest)}` : '';
        return `${String(at).padStart(7)} ${level.padEnd(5)} ${who.padEnd(14)} ${message}${more}`;
      })
      .join('\n');
  }

  /** The invariants, checked once the run has ended. */
  async check(): Promise<string[]> {
    this.store.faults.clear();
    this.queue.faults.clear();
    const v = [...this.violations];
    const s = this.scenario;
    if (this.#stuck) v.push(`run did not finish: ${this.#stuck}`);
    if (this.queue.size > 0) {
      const left = this.queue.messages().map((m) => `${m.messageId} (${this.keyOfMessage.get(m.messageId)})`);
      v.push(`nothing left behind: ${this.queue.size} message(s) still in the queue: ${left.join(', ')}`);
    }
    // Every effect at most once; only known ops.
    for (const [op, count] of this.applier.applied) {
      if (!this.ops.has(op)) v.push(`unknown effect ${op} applied`);
      if (count > 1) v.push(`effect applied more than once: ${op} x${count}`);
    }
    // Balances match the applications counted (no lost update through the optimistic check).
    for (const account of ACCOUNTS) {
      let expected = 0;
      for (const [op, spec] of this.ops) {
        if (spec.account === account) expected += spec.delta * (this.applier.applied.get(op) ?? 0);
      }
      const row = this.ledger.get(LEDGER, { account }) as { balance?: number } | undefined;
      const actual = row?.balance ?? 0;
      if (actual !== expected)
        v.push(`ledger ${account}: balance ${actual}, applied credits sum to ${expected}`);
    }
    for (const [index, spec] of s.jobs.entries()) {
      const key = jobKey(index);
      const item: JobItem | undefined = await this.store.get(key);
      const letters = this.queue.deadLetters.filter((l) => l.reason.dedupKey === key);
      const ops = [...spec.steps.map((_, i) => `${key}#s${i + 1}`), ...(spec.poison ? [] : [`${key}#final`])];
      const applied = (op: string) => this.applier.applied.get(op) ?? 0;
      const status = item?.status;
      const where = `${key} (${jobType(spec)})`;
      if (status !== JobStatus.Completed && status !== JobStatus.Dead) {
        v.push(
          `job ended neither COMPLETED nor DEAD: ${where} is ${status ?? 'absent'} ` +
            `(owner ${item?.owner ?? '-'}, token ${item?.token}, attempts ${item?.attempts}, ` +
            `leaseUntil t=${item ? item.leaseUntil - T0 : '-'}, messageId ${item?.messageId}, ` +
            `checkpoint ${JSON.stringify(item?.checkpoint?.done ?? [])}, lastError ${item?.lastErrorClass ?? '-'})`,
        );
      }
      if (status === JobStatus.Completed) {
        this.stats.completed += 1;
        for (const op of ops) {
          if (applied(op) !== 1)
            v.push(`${where} COMPLETED but its effect ${op} applied ${applied(op)} times`);
        }
        if (spec.poison) v.push(`${where}: the poison ended COMPLETED`);
      }
      if (status === JobStatus.Dead) {
        this.stats.dead += 1;
        if (!spec.poison && applied(`${key}#final`) !== 0) {
          v.push(`${where} DEAD but its final effect applied ${applied(`${key}#final`)} times`);
        }
      }
      // No run past the attempt budget: a leased claim past it dead-letters instead, and a fast commit is
      // refused by it (defect D2, fixed).
      const overBudget = status === JobStatus.Completed && (item?.attempts ?? 0) > s.maxAttempts;
      if (overBudget) {
        const d2 = oneWrite(item as JobItem);
        v.push(
          `${where} COMPLETED at attempt ${item?.attempts} of ${s.maxAttempts}` +
            (d2 ? ' by a fast commit (defect D2)' : ''),
        );
      }
      // DEAD iff a letter with its reasons.
      if (status === JobStatus.Dead && letters.length === 0) v.push(`${where} is DEAD with no dead letter`);
      if (status !== JobStatus.Dead && letters.length > 0) {
        v.push(
          `${where} is ${status ?? 'absent'} but has ${letters.length} dead letter(s): ` +
            letters.map((l) => `${l.reason.reason}/${l.reason.errorClass}`).join(', '),
        );
      }
      this.stats.letters += letters.length;
      this.stats.extraLetters += Math.max(0, letters.length - 1);
      for (const letter of letters) v.push(...letterProblems(letter.reason, letter.body, spec, s, where));
      if (spec.poison && status === JobStatus.Dead) {
        const first = letters[0]?.reason;
        if (first && first.reason !== 'permanent-error' && first.reason !== 'max-attempts') {
          v.push(`${where}: the poison's letter says ${first.reason}`);
        }
      }
    }
    const stray = this.queue.deadLetters.filter((l) => l.reason.dedupKey === undefined);
    if (stray.length > 0) v.push(`${stray.length} dead letter(s) without a dedupKey`);
    this.stats.takeovers = this.metrics.get(MetricName.LeaseExpired);
    this.stats.ownMessageEarly = this.metrics.get(MetricName.OwnMessageEarly);
    this.stats.optimisticConflicts = this.metrics.get(MetricName.OptimisticConflict);
    this.stats.fastFallbacks = this.metrics.get(MetricName.FastPathFallback);
    const injected = (faults: { injected: Map<string, number> }) =>
      [...faults.injected.values()].reduce((a, b) => a + b, 0);
    this.stats.slowCalls =
      injected(this.store.faults) + injected(this.queue.faults) - this.stats.outages - this.stats.lostAnswers;
    this.stats.fastFaults = this.store.faults.injected.get('claim-and-complete') ?? 0;
    return v;
  }
}

/** What is wrong with one dead letter of job `spec` (nothing, when it carries its reasons). */
function letterProblems(
  reason: DeadLetterReason,
  body: string,
  spec: JobSpec,
  scenario: Scenario,
  where: string,
): string[] {
  const problems: string[] = [];
  if (!reason.reason || !reason.errorClass || !reason.errorMessage) {
    problems.push(`${where}: letter without its reasons ${JSON.stringify(reason)}`);
  }
  if (!(reason.attempts >= 1)) problems.push(`${where}: letter with attempts ${reason.attempts}`);
  if (reason.reason === 'max-attempts' && reason.attempts < scenario.maxAttempts) {
    problems.push(
      `${where}: max-attempts letter after ${reason.attempts} of ${scenario.maxAttempts} attempts`,
    );
  }
  if (reason.reason === 'permanent-error' && !(spec.poison && reason.errorClass === 'PermanentJobError')) {
    problems.push(`${where}: permanent-error letter (${reason.errorClass}) for a job that never throws one`);
  }
  if (reason.reason !== 'permanent-error' && reason.reason !== 'max-attempts') {
    problems.push(`${where}: unexpected letter reason ${reason.reason} (${reason.errorMessage})`);
  }
  try {
    const parsed = JSON.parse(body) as { dedupKey?: unknown };
    if (parsed.dedupKey !== reason.dedupKey) problems.push(`${where}: letter body is another job's`);
  } catch {
    problems.push(`${where}: letter body is not the original JSON`);
  }
  return problems;
}

export function jobKey(index: number): string {
  return `job-${index}`;
}

/** How the audit names a fast-path commit. */
const FAST_COMMIT = 'fast commit';

/**
 * An item completed by a fast commit: claimed, completed and its lease ended at the commit's one instant
 * (a leased completion comes after its claim, whose lease ends later).
 */
function oneWrite(item: JobItem): boolean {
  return (
    item.completedAt !== undefined &&
    item.completedAt === item.claimedAt &&
    item.leaseUntil === item.completedAt
  );
}

/** Job types defined with `fastPath: true` start with this. */
const FAST_PREFIX = 'model.fast.';

/** What the model's job types do; each but `steps` has a fast twin (`model.fast.<kind>`). */
const JOB_KINDS = ['credit', 'steps', 'slow', 'flaky', 'poison'] as const;

export function jobType(spec: JobSpec): string {
  const kind: (typeof JOB_KINDS)[number] = spec.poison
    ? 'poison'
    : spec.failRuns > 0
      ? 'flaky'
      : spec.steps.length > 0
        ? 'steps'
        : spec.sleepMs > 0
          ? 'slow'
          : 'credit';
  return spec.fast ? `${FAST_PREFIX}${kind}` : `model.${kind}`;
}

/** Counts, per op (`dedupKey#step`, the `lastOp` the credit writes), the effects the store applied. */
class CountingApplier implements EffectApplier {
  readonly applied = new Map<string, number>();
  /** The effect lists applied (the very arrays the workers handed the store). */
  readonly batches = new WeakSet<readonly Effect[]>();
  readonly #inner: InMemoryEffectApplier;
  readonly #world: World;

  constructor(inner: InMemoryEffectApplier, world: World) {
    this.#inner = inner;
    this.#world = world;
  }

  apply(effects: readonly Effect[]): EffectOutcome {
    let out: EffectOutcome;
    try {
      out = this.#inner.apply(effects);
    } catch (error) {
      this.#world.violations.push(`harness: the effect applier refused effects: ${describeError(error)}`);
      throw error;
    }
    if (out.ok) {
      this.batches.add(effects);
      for (const effect of effects) {
        const op = (effect.Put?.Item as { lastOp?: unknown } | undefined)?.lastOp;
        if (typeof op === 'string') this.applied.set(op, (this.applied.get(op) ?? 0) + 1);
      }
    }
    return out;
  }
}

/** The payload every model job carries: the index of its JobSpec in the scenario. */
interface ModelPayload {
  readonly job: number;
}

const modelPayload: PayloadSchema<ModelPayload> = {
  '~standard': {
    version: 1,
    vendor: 'leaseq-model',
    validate: (value) => ({ value: value as ModelPayload }),
  },
};

/** One handler for every model job type, leased and fast; what it does comes from its JobSpec. */
function modelRegistry(world: World): JobRegistry {
  const types = [
    ...JOB_KINDS.map((kind) => ({ type: `model.${kind}`, fastPath: false })),
    ...JOB_KINDS.filter((kind) => kind !== 'steps').map((kind) => ({
      type: `${FAST_PREFIX}${kind}`,
      fastPath: true,
    })),
  ];
  return JobRegistry.of(
    types.map(({ type, fastPath }) =>
      defineJob({
        type,
        payload: modelPayload,
        fastPath,
        async run(ctx, p: ModelPayload) {
          const spec = world.scenario.jobs[p.job] as JobSpec;
          const key = ctx.dedupKey;
          const nap = spec.sleepMs / (spec.steps.length + 1);
          for (const [i, op] of spec.steps.entries()) {
            const name = `s${i + 1}`;
            await ctx.step(name, async () => ({ effects: [await world.credit(`${key}#${name}`, op)] }));
            if (nap > 0) await sleep(nap);
          }
          if (nap > 0) await sleep(nap);
          const runs = (world.handlerRuns.get(key) ?? 0) + 1;
          world.handlerRuns.set(key, runs);
          if (spec.poison) throw new PermanentJobError('poison pill');
          if (runs <= spec.failRuns) throw new TransientJobError(`flaky dependency (run ${runs})`);
          const final = spec.final as OpSpec;
          return { effects: [await world.credit(`${key}#final`, final)], result: { runs } };
        },
      }),
    ),
  );
}

function traceLogger(world: World): Logger {
  const at = (level: string) => (message: string, extra?: Record<string, unknown>) =>
    world.log(level, message, extra);
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } as unknown as Logger;
}

/** One worker process: a JobProcessor and an event-source loop (receive, processBatch, delete). */
class ModelWorker {
  readonly id: string;
  readonly slot: number;
  readonly generation: number;
  readonly ports: Ports;
  readonly processor: JobProcessor;
  busy = false;
  /** The batch in hand: receive count per message id. */
  batch: ReadonlyMap<string, number> = new Map();
  readonly #world: World;

  constructor(world: World, slot: number, generation: number, crash: CrashSpec | undefined) {
    this.#world = world;
    this.slot = slot;
    this.generation = generation;
    this.id = generation === 0 ? `w${slot}` : `w${slot}.${generation}`;
    this.ports = new Ports(world, this, crash);
    const s = world.scenario;
    this.processor = new JobProcessor({
      store: this.ports.store,
      queue: this.ports.queue,
      registry: world.registry,
      worker: this.id,
      logger: world.logger,
      metrics: world.metrics,
      leaseMs: s.leaseMs,
      maxAttempts: s.maxAttempts,
      backoff: { baseSeconds: 1, capSeconds: 8 },
      random: world.rng,
      ...(s.cache ? { cache: new CompletedCache() } : {}),
    });
  }

  async loop(): Promise<void> {
    const world = this.#world;
    const s = world.scenario;
    const source = s.source;
    const visibilitySeconds =
      source.kind === 'lambda'
        ? (6 * source.timeoutMs) / 1000
        : source.visibilitySeconds || visibilityForLease(s.leaseMs);
    while (!world.stopped && !this.ports.dead) {
      const records = world.queue.receive(s.batchSize, {
        visibilitySeconds,
        pick: (visible) => shuffle(visible, world.rng),
      });
      if (records.length === 0) {
        // A long poll: back when a hidden message shows again (at most 20 s), with some jitter.
        const next = world.queue.nextVisibleAt();
        const wait = next === undefined ? 1000 : Math.min(20_000, Math.max(0, next - Date.now()));
        await sleep(wait + 1 + Math.floor(world.rng() * 500));
        continue;
      }
      this.busy = true;
      this.batch = new Map(records.map((r) => [r.messageId, Number(r.attributes.ApproximateReceiveCount)]));
      world.log('debug', 'received', { worker: this.id, messages: records.map((r) => r.messageId) });
      // The handler's deadline: the invocation's timeout less its 3 s margin (shared/worker/handler.ts).
      const deadline = Date.now() + source.timeoutMs - DEADLINE_MARGIN_MS;
      // Lambda kills an invocation at its timeout; the local runner lets the batch finish.
      const kill =
        source.kind === 'lambda'
          ? setTimeout(() => this.ports.kill('timeout', Math.floor(world.rng() * 500)), source.timeoutMs)
          : undefined;
      const { outcomes } = await processBatch(records, this.processor, { deadline });
      clearTimeout(kill);
      for (const [i, outcome] of outcomes.entries()) {
        const record = records[i] as SQSRecord;
        world.onOutcome(this, record, outcome);
        // What the event source does with a batch success.
        if (outcome.disposition === 'delete') {
          await this.ports.queue.delete(record.receiptHandle).catch(() => undefined);
        }
      }
      this.busy = false;
      await sleep(Math.floor(world.rng() * 50));
    }
  }
}

function shuffle<T>(items: T[], rng: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * The store and queue as one worker sees them: every call passes through `call`, which jitters the
 * interleaving, notes calls that failed with an injected fault or took virtual time (the worker was
 * "touched" for that job), and kills the worker at its planned call.
 */
class Ports {
  dead = false;
  calls = 0;
  readonly store: JobStore;
  readonly queue: JobQueue;
  readonly #world: World;
  readonly #worker: ModelWorker;
  readonly #crash: CrashSpec | undefined;

  constructor(world: World, worker: ModelWorker, crash: CrashSpec | undefined) {
    this.#world = world;
    this.#worker = worker;
    this.#crash = crash;
    this.store = new PortStore(world.workerStore, this);
    this.queue = new PortQueue(world.queue, this, world);
  }

  async call<T>(dedupKey: string | undefined, run: () => Promise<T>): Promise<T> {
    if (this.dead) return hang();
    this.calls += 1;
    const crashing = this.#crash !== undefined && this.calls === this.#crash.atCall;
    const started = Date.now();
    if (dedupKey !== undefined) this.#world.callStarted(this.#worker.id, dedupKey, started);
    await this.#stalled();
    await this.#world.jitter();
    if (this.dead) return hang();
    if (crashing && this.#crash?.when === 'before') return this.#die();
    let answer: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      answer = { ok: true, value: await run() };
    } catch (error) {
      answer = { ok: false, error };
    }
    if (dedupKey !== undefined) this.#world.callEnded(this.#worker.id, dedupKey, started);
    const injected = !answer.ok && isInjected(answer.error);
    if ((injected || Date.now() > started) && dedupKey !== undefined) {
      this.#world.touch(this.#worker.id, dedupKey);
    }
    if (crashing || this.dead) return this.#die();
    await this.#stalled();
    await this.#world.jitter();
    if (this.dead) return hang();
    if (!answer.ok) throw answer.error;
    return answer.value;
  }

  /** Waits out a stall of this worker's slot (PauseSpec) that covers the present. */
  async #stalled(): Promise<void> {
    const now = Date.now();
    for (const pause of this.#world.scenario.pauses) {
      const end = pause.atMs + pause.durationMs;
      if (
        pause.slot % this.#world.scenario.workers === this.#worker.slot &&
        pause.atMs <= now - T0 &&
        now - T0 < end
      ) {
        this.#world.stats.stalledCalls += 1;
        await sleep(T0 + end - now);
        return this.#stalled();
      }
    }
  }

  /** Kills the worker now: nothing it has in flight returns. */
  kill(why: string, restartAfterMs: number): void {
    if (this.dead) return;
    this.dead = true;
    this.#world.onDeath(this.#worker, why, restartAfterMs);
  }

  #die(): Promise<never> {
    const crash = this.#crash;
    if (crash) this.kill(`crash at call ${crash.atCall}, ${crash.when} it`, crash.restartAfterMs);
    return hang();
  }
}

function isInjected(error: unknown): boolean {
  return (
    error instanceof StoreUnavailableError &&
    error.cause instanceof Error &&
    error.cause.message.startsWith('injected')
  );
}

class PortStore implements JobStore {
  readonly #inner: JobStore;
  readonly #ports: Ports;

  constructor(inner: JobStore, ports: Ports) {
    this.#inner = inner;
    this.#ports = ports;
  }

  claim(request: ClaimRequest, options?: StoreCallOptions): Promise<ClaimResult> {
    return this.#ports.call(request.dedupKey, () => this.#inner.claim(request, options));
  }
  claimAndComplete(
    request: FastCommitRequest,
    result: unknown,
    effects?: readonly Effect[],
    options?: StoreCallOptions,
  ): Promise<FastCommitResult> {
    return this.#ports.call(request.dedupKey, () =>
      this.#inner.claimAndComplete(request, result, effects, options),
    );
  }
  renew(lease: JobLease, leaseMs: number, now: number, options?: StoreCallOptions): Promise<void> {
    return this.#ports.call(lease.dedupKey, () => this.#inner.renew(lease, leaseMs, now, options));
  }
  checkpoint(
    lease: JobLease,
    checkpoint: Checkpoint,
    effects?: readonly Effect[],
    options?: StoreCallOptions,
  ): Promise<FencedWriteResult> {
    return this.#ports.call(lease.dedupKey, () =>
      this.#inner.checkpoint(lease, checkpoint, effects, options),
    );
  }
  complete(
    lease: JobLease,
    result: unknown,
    effects?: readonly Effect[],
    options?: StoreCallOptions,
  ): Promise<FencedWriteResult> {
    return this.#ports.call(lease.dedupKey, () => this.#inner.complete(lease, result, effects, options));
  }
  release(
    lease: JobLease,
    retryAt: number,
    error: { message: string; errorClass: string },
    options?: StoreCallOptions & { refundAttempt?: boolean },
  ): Promise<void> {
    return this.#ports.call(lease.dedupKey, () => this.#inner.release(lease, retryAt, error, options));
  }
  markDead(
    lease: JobLease,
    error: { message: string; errorClass: string },
    options?: StoreCallOptions,
  ): Promise<void> {
    return this.#ports.call(lease.dedupKey, () => this.#inner.markDead(lease, error, options));
  }
  get(dedupKey: string, options?: StoreCallOptions): Promise<JobItem | undefined> {
    return this.#ports.call(dedupKey, () => this.#inner.get(dedupKey, options));
  }
  resetForRedrive(dedupKey: string, now: number): Promise<boolean> {
    return this.#ports.call(dedupKey, () => this.#inner.resetForRedrive(dedupKey, now));
  }
}

/**
 * The store the workers' ports call, watching its answers to the writes that carry effects (World.audited,
 * World.completedBy, World.fastCommitSent): a write refused by its fence or by the claim's condition, or
 * answered with an effect conflict, applied none of its effects, one answered ok all of them; a job is
 * answered "completed" at most once; a fast commit comes only from a fast type's first receive.
 */
class AuditStore implements JobStore {
  readonly #inner: JobStore;
  readonly #world: World;

  constructor(inner: JobStore, world: World) {
    this.#inner = inner;
    this.#world = world;
  }

  async claimAndComplete(
    request: FastCommitRequest,
    result: unknown,
    effects: readonly Effect[] = [],
    options?: StoreCallOptions,
  ): Promise<FastCommitResult> {
    const world = this.#world;
    world.fastCommitSent(request);
    const what = `${FAST_COMMIT} by ${request.owner}`;
    let answer: FastCommitResult;
    try {
      answer = await this.#inner.claimAndComplete(request, result, effects, options);
    } catch (error) {
      if (error instanceof StoreUnavailableError) world.stats.fastUnknown += 1;
      throw error;
    }
    world.audited(what, request.dedupKey, effects, answer.ok);
    if (answer.ok) {
      world.stats.fastCommits += 1;
      world.completedBy(request.dedupKey, what);
    } else if (answer.reason === 'refused') world.stats.fastRefused += 1;
    else world.stats.fastConflicts += 1;
    return answer;
  }
  complete(
    lease: JobLease,
    result: unknown,
    effects: readonly Effect[] = [],
    options?: StoreCallOptions,
  ): Promise<FencedWriteResult> {
    const what = `complete by ${lease.owner} (token ${lease.token})`;
    return this.#fenced(lease, what, effects, this.#inner.complete(lease, result, effects, options), true);
  }
  checkpoint(
    lease: JobLease,
    checkpoint: Checkpoint,
    effects: readonly Effect[] = [],
    options?: StoreCallOptions,
  ): Promise<FencedWriteResult> {
    const what = `checkpoint ${checkpoint.step} by ${lease.owner} (token ${lease.token})`;
    return this.#fenced(lease, what, effects, this.#inner.checkpoint(lease, checkpoint, effects, options));
  }
  claim(request: ClaimRequest, options?: StoreCallOptions): Promise<ClaimResult> {
    return this.#inner.claim(request, options);
  }
  renew(lease: JobLease, leaseMs: number, now: number, options?: StoreCallOptions): Promise<void> {
    return this.#inner.renew(lease, leaseMs, now, options);
  }
  release(
    lease: JobLease,
    retryAt: number,
    error: { message: string; errorClass: string },
    options?: StoreCallOptions & { refundAttempt?: boolean },
  ): Promise<void> {
    return this.#inner.release(lease, retryAt, error, options);
  }
  markDead(
    lease: JobLease,
    error: { message: string; errorClass: string },
    options?: StoreCallOptions,
  ): Promise<void> {
    return this.#inner.markDead(lease, error, options);
  }
  get(dedupKey: string, options?: StoreCallOptions): Promise<JobItem | undefined> {
    return this.#inner.get(dedupKey, options);
  }
  resetForRedrive(dedupKey: string, now: number): Promise<boolean> {
    return this.#inner.resetForRedrive(dedupKey, now);
  }

  /** A fenced write's answer: ok, an effect conflict, or refused by the fence (LeaseLostError). */
  async #fenced(
    lease: JobLease,
    what: string,
    effects: readonly Effect[],
    call: Promise<FencedWriteResult>,
    completes = false,
  ): Promise<FencedWriteResult> {
    let answer: FencedWriteResult;
    try {
      answer = await call;
    } catch (error) {
      if (error instanceof LeaseLostError) this.#world.audited(what, lease.dedupKey, effects, false);
      throw error;
    }
    this.#world.audited(what, lease.dedupKey, effects, answer.ok);
    if (answer.ok && completes) this.#world.completedBy(lease.dedupKey, what);
    return answer;
  }
}

class PortQueue implements JobQueue {
  readonly #inner: InMemoryQueue;
  readonly #ports: Ports;
  readonly #world: World;

  constructor(inner: InMemoryQueue, ports: Ports, world: World) {
    this.#inner = inner;
    this.#ports = ports;
    this.#world = world;
  }

  #key(receiptHandle: string): string | undefined {
    return this.#world.keyOfMessage.get(receiptHandle.split('#')[0] ?? '');
  }
  changeVisibility(receiptHandle: string, seconds: number): Promise<void> {
    return this.#ports.call(this.#key(receiptHandle), () =>
      this.#inner.changeVisibility(receiptHandle, seconds),
    );
  }
  delete(receiptHandle: string): Promise<void> {
    return this.#ports.call(this.#key(receiptHandle), () => this.#inner.delete(receiptHandle));
  }
  sendToDeadLetter(body: string, reason: DeadLetterReason, groupId?: string): Promise<void> {
    return this.#ports.call(reason.dedupKey, () => this.#inner.sendToDeadLetter(body, reason, groupId));
  }
}
