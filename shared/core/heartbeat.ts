import { DeadlineError, describe, LeaseLostError } from './errors.ts';
import { boundedSignal } from './timeout-signal.ts';

/** What the heartbeat needs from whoever holds a lease: one renewal call. */
export interface Renewable {
  /**
   * Renews the lease; resolves with the new lease end (epoch ms). Throws LeaseLostError when taken.
   * `signal` aborts when the lease would end before the answer: pass it to the store call.
   */
  renew(signal: AbortSignal): Promise<number>;
}

export interface HeartbeatOptions {
  readonly target: Renewable;
  /** Renewal period (a third of the lease, docs/protocol.md). */
  readonly intervalMs: number;
  /** Lease end at start (epoch ms). */
  readonly leaseUntil: number;
  /**
   * When the current lease was requested (epoch ms): the first beat is due `intervalMs` after it, so a
   * claim whose answer was slow is renewed at once. @default now
   */
  readonly renewedAt?: number;
  /**
   * Time kept in hand before the lease end, for clock skew between workers: the job is stopped this long
   * before `leaseUntil` if no renewal has extended it by then. @default intervalMs / 3
   */
  readonly safetyMs?: number;
  /**
   * Epoch ms at which the work must stop (an invocation deadline): the signal aborts with a
   * {@link DeadlineError} then, and a lease that ends at the deadline ends as a deadline, not as a loss.
   */
  readonly deadline?: number;
  /** Called after each successful renewal. */
  readonly onRenewed?: (leaseUntil: number) => void;
  /** Called once, when the lease is lost (the signal is aborted right after). */
  readonly onLost?: (error: LeaseLostError) => void;
  /** Called when a renewal failed but the lease may still be live (store blip): it is retried. */
  readonly onRenewFailed?: (error: unknown) => void;
  /** Clock, injectable for tests. @default Date.now */
  readonly now?: () => number;
}

/**
 * Keeps a lease alive and tells the work when it must stop. Beats are scheduled from the lease itself:
 * each one is due `intervalMs` after the renewal before it was requested, and each renewal may take at
 * most the time the lease has left (less the safety margin), so neither a slow answer nor SDK retries
 * can carry the work past the lease. {@link signal} aborts with a {@link LeaseLostError} when a renewal
 * is refused or the lease runs out unrenewed, and with a {@link DeadlineError} at the deadline: one
 * signal for the whole job. Callers stop it in `finally`.
 */
export class Heartbeat {
  readonly #options: HeartbeatOptions;
  readonly #controller = new AbortController();
  readonly #now: () => number;
  readonly #safetyMs: number;
  #timer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #leaseUntil: number;
  #renewedAt: number;
  #failing = false;
  #stopped = false;
  #inFlight: Promise<void> | undefined;

  constructor(options: HeartbeatOptions) {
    if (!(options.intervalMs > 0)) {
      throw new RangeError(`intervalMs must be > 0, received ${options.intervalMs}`);
    }
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#safetyMs = options.safetyMs ?? Math.floor(options.intervalMs / 3);
    this.#leaseUntil = options.leaseUntil;
    this.#renewedAt = options.renewedAt ?? this.#now();
  }

  /** Aborted when the work must stop: the lease is lost or ran out, or the deadline came. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  get leaseUntil(): number {
    return this.#leaseUntil;
  }

  /** How long a store call made now may take before the lease (less the safety margin) ends. */
  remainingMs(): number {
    return this.#leaseUntil - this.#safetyMs - this.#now();
  }

  start(): this {
    const { deadline } = this.#options;
    if (deadline !== undefined) {
      this.#deadlineTimer = setTimeout(
        () => this.#stop(new DeadlineError('invocation deadline near')),
        Math.max(0, deadline - this.#now()),
      );
      this.#deadlineTimer.unref?.();
    }
    this.#schedule();
    return this;
  }

  /** Stops renewing and waits for a renewal in flight, so nothing renews after the caller moves on. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#clearTimers();
    await this.#inFlight;
  }

  #schedule(): void {
    if (this.#stopped) return;
    const now = this.#now();
    const interval = this.#options.intervalMs;
    // After a failure, one more try while half a period is left before the lease must hold; past that,
    // the next beat finds no time left and stops the work.
    const lastChance = this.#leaseUntil - this.#safetyMs - Math.floor(interval / 2);
    let due = this.#renewedAt + interval;
    if (this.#failing) {
      due = now < lastChance ? Math.min(now + interval, lastChance) : this.#leaseUntil - this.#safetyMs;
    }
    this.#timer = setTimeout(
      () => {
        this.#inFlight = this.#beat().finally(() => {
          this.#inFlight = undefined;
          this.#schedule();
        });
      },
      Math.max(0, due - now),
    );
    this.#timer.unref?.();
  }

  async #beat(): Promise<void> {
    if (this.#stopped) return;
    const sentAt = this.#now();
    const budget = this.#leaseUntil - this.#safetyMs - sentAt;
    if (budget <= 0) return this.#runOut('no renewal went through in time');
    const bound = boundedSignal(budget, 'the lease would end before the renewal answered');
    try {
      this.#leaseUntil = await this.#options.target.renew(bound.signal);
      this.#renewedAt = sentAt;
      this.#failing = false;
      if (!this.#stopped) this.#options.onRenewed?.(this.#leaseUntil);
    } catch (error) {
      if (this.#stopped) return;
      if (error instanceof LeaseLostError) return this.#stop(error);
      if (this.#now() >= this.#leaseUntil - this.#safetyMs) return this.#runOut(describe(error));
      this.#failing = true;
      this.#options.onRenewFailed?.(error);
    } finally {
      bound.clear();
    }
  }

  /** The lease ran out unrenewed: a loss, unless it ended at the deadline. */
  #runOut(why: string): void {
    const { deadline } = this.#options;
    if (deadline !== undefined && this.#leaseUntil >= deadline - this.#safetyMs) {
      this.#stop(new DeadlineError('invocation deadline near'));
      return;
    }
    this.#stop(new LeaseLostError('lease', 0, `the lease ran out before it could be renewed: ${why}`));
  }

  #stop(reason: LeaseLostError | DeadlineError): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#clearTimers();
    if (reason instanceof LeaseLostError) this.#options.onLost?.(reason);
    this.#controller.abort(reason);
  }

  #clearTimers(): void {
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#deadlineTimer) clearTimeout(this.#deadlineTimer);
    this.#timer = undefined;
    this.#deadlineTimer = undefined;
  }
}
