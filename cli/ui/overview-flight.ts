/**
 * One overview read at a time for the whole inspector: a refresh asked for while a read runs waits for
 * that read (however many tabs poll), a read finished less than `reuseMs` ago is answered again, and a
 * read whose every waiter went away (tabs closed, requests aborted) is aborted, its requests with it.
 * Before, each poll started its own full scans and a slow store piled them up (46 connections from one tab).
 */
import type { OverviewSnapshot } from './overview-data.ts';

interface Flight {
  readonly promise: Promise<OverviewSnapshot>;
  readonly stop: AbortController;
  waiters: number;
}

export class OverviewFlight {
  #current: Flight | undefined;
  #last: OverviewSnapshot | undefined;
  /** Reads begun so far (for tests: a refresh that joined or reused one begins none). */
  begun = 0;

  constructor(
    private readonly read: (signal: AbortSignal) => Promise<OverviewSnapshot>,
    private readonly reuseMs = 1000,
  ) {}

  /** The current snapshot; `signal` (the request's) withdraws this waiter when it aborts. */
  get(signal?: AbortSignal): Promise<OverviewSnapshot> {
    const last = this.#last;
    if (last && Date.now() - last.at < this.reuseMs) return Promise.resolve(last);
    const flight = this.#current ?? this.#begin();
    flight.waiters += 1;
    return new Promise<OverviewSnapshot>((resolve, reject) => {
      let left = false;
      const leave = () => {
        if (left) return;
        left = true;
        flight.waiters -= 1;
        if (flight.waiters === 0 && this.#current === flight) {
          this.#current = undefined;
          flight.stop.abort(new Error('every page waiting for this overview went away'));
        }
        reject(signal?.reason ?? new Error('aborted'));
      };
      if (signal?.aborted) return leave();
      signal?.addEventListener('abort', leave, { once: true });
      flight.promise.then(
        (snapshot) => {
          signal?.removeEventListener('abort', leave);
          if (left) return;
          left = true;
          flight.waiters -= 1;
          resolve(snapshot);
        },
        (error) => {
          signal?.removeEventListener('abort', leave);
          if (!left) reject(error);
        },
      );
    });
  }

  #begin(): Flight {
    const stop = new AbortController();
    this.begun += 1;
    const promise = this.read(stop.signal).finally(() => {
      if (this.#current === flight) this.#current = undefined;
    });
    const flight: Flight = { promise, stop, waiters: 0 };
    promise.then(
      (snapshot) => {
        if (!stop.signal.aborted) this.#last = snapshot;
      },
      () => {},
    );
    this.#current = flight;
    return flight;
  }
}
