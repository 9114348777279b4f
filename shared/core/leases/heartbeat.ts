import { describe } from '../../error-text.ts';
import { DeadlineError, LeaseLostError, LeaseRanOutError } from '../../errors.ts';
import { boundedSignal, rejectOnAbort } from './timeout-signal.ts';

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

/** A watchdog this late (or the safety margin, if longer) means the event loop was blocked, not slow. */
const STARVED_MS = 100;

/**
 * Keeps a lease alive and tells the work when it must stop. Beats are scheduled from the lease itself:
 * each one is due `intervalMs` after the renewal before it was requested, and each renewal may take at
 * most the time the lease has left (less the safety margin): past that it is abandoned, whatever the
 * target does with the signal. A watchdog fires at `leaseUntil − safety` unless a renewal moved it, so
 * neither a slow answer nor SDK retries can carry the work past the lease.
 *
 * Two signals: {@link signal} (the job's) aborts with a {@link LeaseLostError} when a renewal is refused
 * or the lease runs out, and with a {@link DeadlineError} at the deadline; {@link leaseSignal} aborts on
 * the lease only, so a fenced commit already in flight at the deadline may still finish. Callers stop
 * it in `finally`.
 */
export class Heartbeat {
  readonly #options: HeartbeatOptions;
  readonly #job = new AbortController();
  readonly #lease = new AbortController();
  readonly #now: () => number;
  readonly #safetyMs: number;
  #timer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #watchdog: NodeJS.Timeout | undefined;
  #leaseUntil: number;
  #renewedAt: number;
  #failing = false;
  /** A renewal went out since the last one that got through: it failed, or has not answered yet. */
  #unanswered = false;
  #watchdogDue = 0;
  #lastError: unknown;
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

  /** The job's signal: aborted when the work must stop (lease lost or ran out, or the deadline came). */
  get signal(): AbortSignal {
    return this.#job.signal;
  }

  /** Aborted only when the lease is lost or ran out: bounds the job's store calls. */
  get leaseSignal(): AbortSignal {
    return this.#lease.signal;
  }

  get leaseUntil(): number {
    return this.#leaseUntil;
  }

  start(): this {
    const { deadline } = this.#options;
    if (deadline !== undefined) {
      this.#deadlineTimer = setTimeout(
        () => this.#abortJob(new DeadlineError('invocation deadline near')),
        Math.max(0, deadline - this.#now()),
      );
      this.#deadlineTimer.unref?.();
    }
    this.#arm();
    this.#schedule();
    return this;
  }

  /** Stops renewing and waits for a renewal in flight (never past its budget), so nothing renews after. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#clearTimers();
    await this.#inFlight;
  }

  /** (Re)sets the watchdog at `leaseUntil − safety`. */
  #arm(): void {
    if (this.#watchdog) clearTimeout(this.#watchdog);
    this.#watchdogDue = this.#leaseUntil - this.#safetyMs;
    this.#watchdog = setTimeout(
      () =>
        this.#runOut(
          this.#lastError === undefined ? 'no renewal went through in time' : describe(this.#lastError),
        ),
      Math.max(0, this.#leaseUntil - this.#safetyMs - this.#now()),
    );
    this.#watchdog.unref?.();
  }

  #schedule(): void {
    if (this.#stopped) return;
    const now = this.#now();
    const interval = this.#options.intervalMs;
    // After a failure, one more try while half a period is left before the lease must hold; past that,
    // the watchdog ends it.
    const lastChance = this.#leaseUntil - this.#safetyMs - Math.floor(interval / 2);
    let due = this.#renewedAt + interval;
    if (this.#failing) {
      if (now >= lastChance) return;
      due = Math.min(now + interval, lastChance);
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
    if (budget <= 0) return;
    const bound = boundedSignal(budget, 'the lease would end before the renewal answered');
    this.#unanswered = true;
    try {
      // Raced against its budget: a renewal that hangs anywhere (the store, the visibility call) is
      // abandoned on time even if the target ignores the signal.
      const until = await Promise.race([
        this.#options.target.renew(bound.signal),
        rejectOnAbort(bound.signal),
      ]);
      if (this.#stopped) return;
      this.#leaseUntil = until;
      this.#renewedAt = sentAt;
      this.#failing = false;
      this.#unanswered = false;
      this.#lastError = undefined;
      this.#arm();
      this.#options.onRenewed?.(this.#leaseUntil);
    } catch (error) {
      if (this.#stopped) return;
      if (error instanceof LeaseLostError && error.completedByThisLease) {
        // The job's own commit landed while this renewal was in flight: nothing left to renew, and
        // nothing lost. The caller stops the heartbeat as the commit returns.
        this.#stopped = true;
        this.#clearTimers();
        return;
      }
      if (error instanceof LeaseLostError) return this.#lose(error);
      this.#failing = true;
      this.#lastError = error;
      this.#options.onRenewFailed?.(error);
    } finally {
      bound.clear();
    }
  }

  /** The lease ran out unrenewed: a loss, unless it ended at the deadline. */
  #runOut(why: string): void {
    if (this.#stopped) return;
    const { deadline } = this.#options;
    if (deadline !== undefined && this.#leaseUntil >= deadline - this.#safetyMs) {
      // The lease was only ever short because of the deadline: the job stops as a deadline, and a commit
      // already in flight may finish (it is fenced, and the invocation has its margin left).
      this.#stopped = true;
      this.#clearTimers();
      this.#abortJob(new DeadlineError('invocation deadline near'));
      return;
    }
    // The store is to blame only if a renewal went out and failed or hung while this worker kept time.
    // A watchdog that fires late means the event loop was blocked (the job's own synchronous work): then
    // even a renewal in flight may have been answered and simply not read, and the attempt counts.
    const starved = this.#now() - this.#watchdogDue > Math.max(this.#safetyMs, STARVED_MS);
    const renewalFailed = this.#unanswered && !starved;
    this.#lose(
      new LeaseRanOutError(
        'lease',
        0,
        `the lease ran out before it could be renewed: ${starved ? `the event loop was blocked past the lease (${why})` : why}`,
        this.#lastError,
        { renewalFailed },
      ),
    );
  }

  #lose(error: LeaseLostError): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#clearTimers();
    this.#options.onLost?.(error);
    this.#lease.abort(error);
    this.#abortJob(error);
  }

  #abortJob(reason: LeaseLostError | DeadlineError): void {
    if (!this.#job.signal.aborted) this.#job.abort(reason);
  }

  #clearTimers(): void {
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#deadlineTimer) clearTimeout(this.#deadlineTimer);
    if (this.#watchdog) clearTimeout(this.#watchdog);
    this.#timer = undefined;
    this.#deadlineTimer = undefined;
    this.#watchdog = undefined;
  }
}
