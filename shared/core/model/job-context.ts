import {
  ConfigError,
  FastPathNeedsLeaseError,
  NamedLeaseLostError,
  OptimisticConflictError,
} from '../../errors.ts';
import { DEFAULTS } from '../contract/defaults.ts';
import type { Checkpoint } from '../contract/job-item.ts';
import type { Effect, JobLease, JobStore } from '../contract/job-store.ts';
import { type LeaseStore, SLOT_ITEM_PREFIX } from '../contract/lease-store.ts';
import { RATE_ITEM_PREFIX } from '../contract/rate-store.ts';
import { conflictPause } from '../decisions/optimistic.ts';
import { type HeldLease, holdLease, jobLeaseOwner, type LeaseHandle } from '../leases/named-lease.ts';
import { MetricName } from '../observe/metric-names.ts';
import type { MetricsSink } from '../observe/metrics.ts';
import { inSpan } from '../observe/spans.ts';
import { describeConflict, rowUnversioned } from './conflict.ts';
import type { EffectTable } from './effect-table.ts';
import type { TableMap } from './table.ts';

/** What a step hands back: effects committed with its checkpoint, and data kept for resume. */
export interface StepOutcome<T> {
  readonly effects?: readonly Effect[];
  readonly data?: T;
}

/** A lease the job holds from before its run (a concurrency slot) and the check that fences writes by it. */
export interface FencedSlot {
  readonly held: HeldLease;
  readonly fence: Effect;
}

export interface JobContextOptions {
  readonly store: JobStore;
  readonly lease: JobLease;
  readonly signal: AbortSignal;
  /** Bounds the job's store writes (aborted when the lease is lost or ran out). @default signal */
  readonly leaseSignal?: AbortSignal;
  readonly worker: string;
  readonly metrics: MetricsSink;
  /** In-process tries of an optimistic write before the job is given back with a delay. @default DEFAULTS.optimisticTries (3) */
  readonly optimisticTries?: number;
  /** Handles of the application tables the job declared, by the key it declared them under. @default {} */
  readonly tables?: Readonly<Record<string, EffectTable>>;
  /** The named-lease store behind `withLease`. @default none (withLease then throws ConfigError) */
  readonly leases?: LeaseStore;
  /**
   * The job runs on the fast path: no lease to checkpoint under or to fence named leases with, so
   * `step`, `saveCheckpoint` and `withLease` throw FastPathNeedsLeaseError, and the processor runs the
   * job again under a claim. @default false
   */
  readonly fastPath?: boolean;
  /**
   * Concurrency slots the processor took for this job (pipeline/limits.ts): fenced into its writes with
   * effects after its named leases, released by the processor, not by {@link JobContext.releaseLeases}.
   * @default none
   */
  readonly slots?: readonly FencedSlot[];
  /** Whether this deployment runs test hooks (failure injection in payloads). @default false */
  readonly testHooks?: boolean;
  readonly random?: () => number;
  readonly now?: () => number;
  /** The text a failed step's span carries for its error (Settings.errorText). @default describe */
  readonly errorText?: (error: unknown) => string;
}

/** Options of {@link JobContext.withLease}. */
export interface JobLeaseOptions {
  /** @default DEFAULTS.namedLeaseMs (15000) */
  readonly leaseMs?: number;
  /** How long to wait for a busy lease before LeaseBusyError (the job is then retried). @default 10000 */
  readonly waitMs?: number;
}

/** `ctx.tables` of a job that declared the tables `T`. */
export type TableHandles<T extends TableMap> = { readonly [K in keyof T]: EffectTable };

/**
 * A job's handle on its own lease while it runs: the abort signal, checkpoints, fenced steps and the
 * idempotency keys for effects outside DynamoDB.
 */
export class JobContext<T extends TableMap = TableMap> {
  readonly #o: JobContextOptions;
  readonly #tries: number;
  readonly #held = new Map<string, HeldLease>();
  /** Acquires in flight, by key: a second `withLease` of the same key waits for the first. */
  readonly #taking = new Map<string, Promise<HeldLease>>();
  /** Set once the job's named leases were released: none may be taken after. */
  #closed = false;
  /** The last checkpoint write queued: the job's checkpoint writes run one at a time, in order. */
  #writing: Promise<unknown> = Promise.resolve();

  constructor(options: JobContextOptions) {
    this.#o = options;
    this.#tries = options.optimisticTries ?? DEFAULTS.optimisticTries;
  }

  /** The application tables this job declared: reads, and builders of effects. */
  get tables(): TableHandles<T> {
    return (this.#o.tables ?? {}) as TableHandles<T>;
  }

  /**
   * True when this deployment opted in to test hooks (local demo and tests: `LEASEQ_TEST_HOOKS=1`).
   * A job that reads failure injection from its payload must refuse it when this is false.
   */
  get testHooksEnabled(): boolean {
    return this.#o.testHooks ?? false;
  }

  /**
   * Runs `fn` holding the named lease `key` on the `leases` table (a pessimistic lock on a shared
   * resource such as `account#42`). The lease is kept, and renewed, until the job commits or fails: every
   * later write that carries effects (a step's checkpoint, the completion) includes a check that this job
   * still holds it, so a holder that lost the lock commits nothing; it is released after the commit.
   * Taking a key this job already holds just runs `fn`. Pass `handle.token` with writes outside DynamoDB
   * so a stale holder is refused downstream.
   * @throws LeaseBusyError when someone else holds `key` past `waitMs` (the job is retried).
   */
  async withLease<R>(
    key: string,
    fn: (handle: LeaseHandle) => Promise<R>,
    options: JobLeaseOptions = {},
  ): Promise<R> {
    this.#needsLease('withLease');
    if (!this.#o.leases) {
      throw new ConfigError('withLease needs the leases table: set LEASEQ_LEASES_TABLE on the worker');
    }
    // The limits' items share the table: a lease there would take a concurrency slot, or be refused for
    // as long as a rate permit item exists.
    if (key.startsWith(SLOT_ITEM_PREFIX) || key.startsWith(RATE_ITEM_PREFIX)) {
      throw new ConfigError(
        `withLease: keys starting with ${SLOT_ITEM_PREFIX} or ${RATE_ITEM_PREFIX} are reserved for concurrency and rate limits`,
      );
    }
    let held = this.#held.get(key);
    if (!held) {
      let taking = this.#taking.get(key);
      if (!taking) {
        taking = this.#take(this.#o.leases, key, options).finally(() => this.#taking.delete(key));
        this.#taking.set(key, taking);
      }
      held = await taking;
    }
    return fn({ key, token: held.token, signal: held.signal });
  }

  async #take(leases: LeaseStore, key: string, options: JobLeaseOptions): Promise<HeldLease> {
    if (this.#closed) throw jobEnded(key);
    // Bounded by the job's signal: aborted (deadline, lease lost), the acquire ends and holds nothing.
    const held = await holdLease(key, {
      store: leases,
      owner: jobLeaseOwner(this.#o.worker, this.#o.lease.dedupKey),
      signal: this.#o.signal,
      ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
      ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
      ...(this.#o.now ? { now: this.#o.now } : {}),
    });
    if (this.#closed) {
      // The job ended (it failed, its leases were released) while this acquire was in flight: nobody
      // else would release this one.
      await held.release();
      throw jobEnded(key);
    }
    this.#held.set(key, held);
    return held;
  }

  /**
   * Checks that every named lease this job holds, then every concurrency slot, is still its own (joined
   * to writes with effects).
   */
  leaseFences(): Effect[] {
    const store = this.#o.leases;
    const slots = this.#o.slots ?? [];
    const named =
      store && this.#held.size > 0 ? [...this.#held.values()].map((h) => store.fence(h.lease)) : [];
    return slots.length === 0 ? named : [...named, ...slots.map((slot) => slot.fence)];
  }

  /**
   * The named lease or slot whose fence refused a write that carried `effectCount` effects of its own (the
   * fences follow the effects); undefined for a refusal of one of those effects, or a busy item.
   */
  lostLeaseAt(refusal: { index: number; busy?: boolean }, effectCount: number): HeldLease | undefined {
    if (refusal.busy || refusal.index < effectCount) return undefined;
    const at = refusal.index - effectCount;
    const named = this.#o.leases ? [...this.#held.values()] : [];
    return at < named.length ? named[at] : this.#o.slots?.[at - named.length]?.held;
  }

  /** Releases the named leases this job holds (after its commit or failure). Never throws. */
  async releaseLeases(): Promise<void> {
    // An acquire still in flight releases its lease itself when it lands (see #take).
    this.#closed = true;
    // Most jobs take none: no array, no Promise.all, on every job's way out.
    if (this.#held.size === 0) return;
    const held = [...this.#held.values()];
    this.#held.clear();
    await Promise.all(held.map((h) => h.release().catch(() => undefined)));
  }

  get dedupKey(): string {
    return this.#o.lease.dedupKey;
  }
  /** This attempt's number (1 for the first claim). */
  get attempt(): number {
    return this.#o.lease.attempts;
  }
  /** Fencing token of this claim; pass it downstream with every write to shared state (0 on the fast path). */
  get token(): number {
    return this.#o.lease.token;
  }
  get worker(): string {
    return this.#o.worker;
  }
  /** Aborted when the lease is lost or the deadline nears: stop, your writes would be refused. */
  get signal(): AbortSignal {
    return this.#o.signal;
  }
  /** The last checkpoint (from this or an earlier attempt), if any. */
  get checkpoint(): Checkpoint | undefined {
    return this.#o.lease.checkpoint;
  }

  /** Idempotency key for an effect outside DynamoDB: the same for every attempt of the same step. */
  idempotencyKey(step: string): string {
    return `${this.#o.lease.dedupKey}#${step}`;
  }

  /** Throws the abort reason when the lease is gone. Call it between units of work. */
  throwIfAborted(): void {
    this.#o.signal.throwIfAborted();
  }

  /** Stores progress (fenced by owner, token and version). */
  async saveCheckpoint(step: string, data?: unknown): Promise<void> {
    this.#needsLease('saveCheckpoint');
    return this.#oneAtATime(() => this.#saveCheckpoint(step, data));
  }

  async #saveCheckpoint(step: string, data: unknown): Promise<void> {
    this.throwIfAborted();
    const previous = this.#o.lease.checkpoint;
    const done = previous?.done.includes(step) ? previous.done : [...(previous?.done ?? []), step];
    const stored = { ...stepDataMap(previous), ...(data === undefined ? {} : { [step]: data }) };
    const result = await this.#o.store.checkpoint(
      this.#o.lease,
      { step, done, data: stored, at: (this.#o.now ?? Date.now)() },
      [],
      { signal: this.#o.leaseSignal ?? this.#o.signal },
    );
    if (!result.ok) throw new OptimisticConflictError(`checkpoint ${step}`, 1);
  }

  /** True when `step` was already checkpointed by this or an earlier attempt. */
  isDone(step: string): boolean {
    return this.#o.lease.checkpoint?.done.includes(step) ?? false;
  }

  /**
   * Runs a named step at most once in effect: skipped (returning its stored data) when already
   * checkpointed; otherwise `build` computes the step's effects, which commit atomically with the
   * checkpoint. An optimistic conflict re-runs `build` (re-reading state) a few times, then gives up with
   * {@link OptimisticConflictError} so the job goes back to the queue with a delay.
   *
   * A step whose outcome always has `data` gives `T`: the checkpoint stores a step's data with its done
   * mark in one write, so a skipped step hands back what it returned. Only a step that may omit `data`
   * gives `T | undefined` (its checkpoint then holds none). Renaming a step, not changing what it returns,
   * is how a new version of the job keeps a checkpoint of the old one from answering for it.
   */
  step<T>(
    name: string,
    build: () => Promise<{ readonly effects?: readonly Effect[]; readonly data: T }>,
  ): Promise<T>;
  step<T = undefined>(name: string, build: () => Promise<StepOutcome<T>>): Promise<T | undefined>;
  async step<T>(name: string, build: () => Promise<StepOutcome<T>>): Promise<T | undefined> {
    if (this.isDone(name)) return this.stepData<T>(name);
    this.#needsLease('step');
    return inSpan(`leaseq.step ${name}`, { 'leaseq.step': name }, () => this.#runStep(name, build), {
      ...(this.#o.errorText ? { errorText: this.#o.errorText } : {}),
    });
  }

  async #runStep<T>(name: string, build: () => Promise<StepOutcome<T>>): Promise<T | undefined> {
    for (let tryNumber = 1; ; tryNumber++) {
      this.throwIfAborted();
      const outcome = await build();
      const effects = outcome.effects ?? [];
      // Steps may build in parallel; their checkpoints are written one at a time, each on the version
      // and the done-list the one before it wrote (two writes on one version would refuse one).
      const result = await this.#oneAtATime(async () => {
        this.throwIfAborted();
        // A step of the same name finished while this one built: its effects stand, these are dropped.
        if (this.isDone(name)) return 'done' as const;
        const previous = this.#o.lease.checkpoint;
        const data = {
          ...stepDataMap(previous),
          ...(outcome.data === undefined ? {} : { [name]: outcome.data }),
        };
        return this.#o.store.checkpoint(
          this.#o.lease,
          { step: name, done: [...(previous?.done ?? []), name], data, at: (this.#o.now ?? Date.now)() },
          effects.length > 0 ? [...effects, ...this.leaseFences()] : effects,
          // Bounded by the lease: the write is abandoned if the lease would end first.
          { signal: this.#o.leaseSignal ?? this.#o.signal },
        );
      });
      if (result === 'done') return this.stepData<T>(name);
      if (result.ok) return outcome.data;
      const lost = this.lostLeaseAt(result, effects.length);
      if (lost) throw namedLeaseLost(lost, `step ${name}`);
      this.#o.metrics.count(MetricName.OptimisticConflict);
      if (tryNumber >= this.#tries) {
        const detail = await describeConflict(effects, result, this.tables, this.#o.signal);
        throw new OptimisticConflictError(`step ${name}`, tryNumber, undefined, detail, {
          rowUnversioned: rowUnversioned(detail),
        });
      }
      await conflictPause(tryNumber, this.#o.random);
    }
  }

  /** Runs `write` after every checkpoint write queued before it has settled. */
  #oneAtATime<R>(write: () => Promise<R>): Promise<R> {
    const run = this.#writing.then(write);
    this.#writing = run.catch(() => undefined);
    return run;
  }

  #needsLease(what: string): void {
    if (this.#o.fastPath) throw new FastPathNeedsLeaseError(`ctx.${what}`);
  }

  /** Data a finished step stored. */
  stepData<T>(name: string): T | undefined {
    return stepDataMap(this.#o.lease.checkpoint)[name] as T | undefined;
  }
}

function stepDataMap(checkpoint: Checkpoint | undefined): Record<string, unknown> {
  const data = checkpoint?.data;
  return typeof data === 'object' && data !== null && !Array.isArray(data)
    ? (data as Record<string, unknown>)
    : {};
}

/** A named lease whose acquire answered after the job had ended (and was released at once). */
function jobEnded(key: string): Error {
  return new Error(`the job ended before its named lease ${key} was acquired; the lease was released`);
}

/** A named lease was taken from this job before a write it guarded: nothing of that write applied. */
export function namedLeaseLost(held: HeldLease, what: string): NamedLeaseLostError {
  return new NamedLeaseLostError(held.key, held.token, what);
}
