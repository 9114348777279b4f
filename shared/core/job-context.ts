import { OptimisticConflictError } from './errors.ts';
import type { Checkpoint } from './job-item.ts';
import type { Effect, JobLease, JobStore } from './job-store.ts';
import type { MetricsSink } from './metrics.ts';
import { conflictPause } from './optimistic.ts';
import { MetricName } from './statuses.ts';

/** What a step hands back: effects committed with its checkpoint, and data kept for resume. */
export interface StepOutcome<T> {
  readonly effects?: readonly Effect[];
  readonly data?: T;
}

export interface JobContextOptions {
  readonly store: JobStore;
  readonly lease: JobLease;
  readonly signal: AbortSignal;
  readonly worker: string;
  readonly metrics: MetricsSink;
  /** In-process tries of an optimistic write before the job is given back with a delay. @default 3 */
  readonly optimisticTries?: number;
  readonly random?: () => number;
  readonly now?: () => number;
}

/**
 * A job's handle on its own lease while it runs: the abort signal, checkpoints, fenced steps and the
 * idempotency keys for effects outside DynamoDB.
 */
export class JobContext {
  readonly #o: JobContextOptions;
  readonly #tries: number;

  constructor(options: JobContextOptions) {
    this.#o = options;
    this.#tries = options.optimisticTries ?? 3;
  }

  get dedupKey(): string {
    return this.#o.lease.dedupKey;
  }
  /** This attempt's number (1 for the first claim). */
  get attempt(): number {
    return this.#o.lease.attempts;
  }
  /** Fencing token of this claim; pass it downstream with every write to shared state. */
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
    this.throwIfAborted();
    const previous = this.#o.lease.checkpoint;
    const done = previous?.done.includes(step) ? previous.done : [...(previous?.done ?? []), step];
    const stored = { ...stepDataMap(previous), ...(data === undefined ? {} : { [step]: data }) };
    const result = await this.#o.store.checkpoint(this.#o.lease, {
      step,
      done,
      data: stored,
      at: (this.#o.now ?? Date.now)(),
    });
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
   */
  async step<T>(name: string, build: () => Promise<StepOutcome<T>>): Promise<T | undefined> {
    if (this.isDone(name)) return this.stepData<T>(name);
    for (let tryNumber = 1; ; tryNumber++) {
      this.throwIfAborted();
      const outcome = await build();
      this.throwIfAborted();
      const previous = this.#o.lease.checkpoint;
      const data = {
        ...stepDataMap(previous),
        ...(outcome.data === undefined ? {} : { [name]: outcome.data }),
      };
      const result = await this.#o.store.checkpoint(
        this.#o.lease,
        { step: name, done: [...(previous?.done ?? []), name], data, at: (this.#o.now ?? Date.now)() },
        outcome.effects ?? [],
      );
      if (result.ok) return outcome.data;
      this.#o.metrics.count(MetricName.OptimisticConflict);
      if (tryNumber >= this.#tries) throw new OptimisticConflictError(`step ${name}`, tryNumber);
      await conflictPause(tryNumber, this.#o.random);
    }
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
