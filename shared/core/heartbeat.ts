import { describe, LeaseLostError } from './errors.ts';

/** What the heartbeat needs from whoever holds a lease: one renewal call and the lease's end. */
export interface Renewable {
  /** Renews the lease; resolves with the new lease end (epoch ms). Throws LeaseLostError when taken. */
  renew(): Promise<number>;
}

export interface HeartbeatOptions {
  readonly target: Renewable;
  /** Renewal period (a third of the lease, docs/protocol.md). */
  readonly intervalMs: number;
  /** Lease end at start (epoch ms): if renewals keep failing past it, the lease is lost too. */
  readonly leaseUntil: number;
  /** Called after each successful renewal. */
  readonly onRenewed?: (leaseUntil: number) => void;
  /** Called once, when the lease is lost (the signal is aborted right after). */
  readonly onLost?: (error: LeaseLostError) => void;
  /** Called when a renewal failed but the lease may still be live (store blip): it is retried next beat. */
  readonly onRenewFailed?: (error: unknown) => void;
  /** Clock, injectable for tests. @default Date.now */
  readonly now?: () => number;
}

/**
 * Renews a lease every `intervalMs` until stopped. A refused renewal, or failures until the lease end has
 * passed, abort {@link signal} with a {@link LeaseLostError} as the reason: the job must stop, and its fenced
 * writes would be refused anyway. Callers stop it in `finally`.
 */
export class Heartbeat {
  readonly #options: HeartbeatOptions;
  readonly #controller = new AbortController();
  readonly #now: () => number;
  #timer: NodeJS.Timeout | undefined;
  #leaseUntil: number;
  #stopped = false;
  #inFlight: Promise<void> | undefined;

  constructor(options: HeartbeatOptions) {
    if (!(options.intervalMs > 0)) {
      throw new RangeError(`intervalMs must be > 0, received ${options.intervalMs}`);
    }
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#leaseUntil = options.leaseUntil;
  }

  /** Aborted when the lease is lost. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  get leaseUntil(): number {
    return this.#leaseUntil;
  }

  start(): this {
    this.#schedule();
    return this;
  }

  /** Stops renewing and waits for a renewal in flight, so nothing renews after the caller moves on. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#inFlight;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#inFlight = this.#beat().finally(() => {
        this.#inFlight = undefined;
        this.#schedule();
      });
    }, this.#options.intervalMs);
    this.#timer.unref?.();
  }

  async #beat(): Promise<void> {
    if (this.#stopped || this.#controller.signal.aborted) return;
    try {
      this.#leaseUntil = await this.#options.target.renew();
      if (!this.#stopped) this.#options.onRenewed?.(this.#leaseUntil);
    } catch (error) {
      if (this.#stopped) return;
      if (error instanceof LeaseLostError) return this.#lose(error);
      if (this.#now() >= this.#leaseUntil) {
        return this.#lose(
          new LeaseLostError('lease', 0, `renewals failed until the lease ended: ${describe(error)}`, error),
        );
      }
      this.#options.onRenewFailed?.(error);
    }
  }

  #lose(error: LeaseLostError): void {
    this.#stopped = true;
    this.#options.onLost?.(error);
    this.#controller.abort(error);
  }
}
