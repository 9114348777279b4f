import { LeaseBusyError } from '../../errors.ts';
import { DEFAULTS } from '../contract/defaults.ts';
import type { LeaseStore, NamedLease } from '../contract/lease-store.ts';
import { leaseSafetyMs, leaseTiming } from '../decisions/lease-timing.ts';
import { Heartbeat } from './heartbeat.ts';

export interface WithLeaseOptions {
  readonly store: LeaseStore;
  readonly owner: string;
  /** @default DEFAULTS.namedLeaseMs (15000) */
  readonly leaseMs?: number;
  /** How long to wait for a busy lease before {@link LeaseBusyError}. @default 10000 */
  readonly waitMs?: number;
  /** Pause between acquire tries (grows up to 8x, with jitter). @default 50 */
  readonly pollMs?: number;
  /** Also aborts the work (e.g. the job's own signal). */
  readonly signal?: AbortSignal;
  /** Told when the release failed (the lease then simply expires); the result of `fn` stands. */
  readonly onReleaseError?: (error: unknown) => void;
  readonly now?: () => number;
}

/**
 * Owner recorded on a named lease a job takes (`ctx.withLease`): the worker and the job, so an operator
 * sees which job holds `account#42`, and two jobs of one worker never pass for each other.
 */
export function jobLeaseOwner(worker: string, dedupKey: string): string {
  return `${worker}/${dedupKey}`;
}

/** What the protected function gets: the fencing token to pass with its writes and a lost-lease signal. */
export interface LeaseHandle {
  readonly key: string;
  readonly token: number;
  readonly signal: AbortSignal;
}

/** A named lease taken by {@link holdLease}: renewed until `release()`. */
export interface HeldLease extends LeaseHandle {
  readonly lease: NamedLease;
  /** Whether the lease was lost while held (a renewal was refused). */
  readonly lost: boolean;
  /** Stops renewing and gives the lease up (compare-and-set); errors go to `onReleaseError`. */
  release(): Promise<void>;
}

/**
 * Takes the named lease `key` (waiting up to `waitMs` while someone else holds it) and renews it every
 * lease/3 until `release()`. `signal` aborts when the lease is lost (or `options.signal` does).
 * @throws LeaseBusyError when the wait runs out.
 */
export async function holdLease(key: string, options: WithLeaseOptions): Promise<HeldLease> {
  const now = options.now ?? Date.now;
  const timing = leaseTiming(options.leaseMs ?? DEFAULTS.namedLeaseMs);
  const waitMs = options.waitMs ?? 10_000;
  const pollMs = options.pollMs ?? 50;
  const started = now();
  let lease: NamedLease | undefined;
  let requestedAt = started;
  for (let tryNumber = 0; !lease; tryNumber++) {
    options.signal?.throwIfAborted();
    requestedAt = now();
    const result = await options.store.tryAcquire(key, options.owner, timing.leaseMs, requestedAt);
    if (result.acquired) {
      lease = result.lease;
      break;
    }
    const waited = now() - started;
    if (waited >= waitMs) throw new LeaseBusyError(key, waited);
    const pause = Math.min(
      pollMs * 2 ** Math.min(tryNumber, 3),
      Math.max(1, result.holder.leaseUntil - now()),
    );
    await new Promise((resolve) =>
      setTimeout(resolve, Math.max(1, Math.round(pause * (0.5 + Math.random() / 2)))),
    );
  }
  const held = lease;
  const heartbeat = new Heartbeat({
    intervalMs: timing.heartbeatMs,
    leaseUntil: held.leaseUntil,
    // Beats count from the acquire's request, so a slow acquire answer is renewed at once.
    renewedAt: requestedAt,
    safetyMs: leaseSafetyMs(timing.leaseMs),
    now,
    target: {
      renew: async () => {
        await options.store.renew(held, timing.leaseMs, now());
        return held.leaseUntil;
      },
    },
  }).start();
  const signal = options.signal ? AbortSignal.any([heartbeat.signal, options.signal]) : heartbeat.signal;
  let released = false;
  return {
    key,
    token: held.token,
    signal,
    lease: held,
    get lost() {
      return heartbeat.signal.aborted;
    },
    async release() {
      if (released) return;
      released = true;
      await heartbeat.stop();
      try {
        await options.store.release(held);
      } catch (error) {
        options.onReleaseError?.(error);
      }
    },
  };
}

/**
 * Pessimistic lock on a shared resource: runs `fn` while holding the named lease `key`, renewing it every
 * lease/3 and releasing it afterwards (owner + token compare-and-set). Nobody else holds `key` while
 * `fn` runs unless the lease is lost, in which case `handle.signal` aborts; writes fenced with
 * `handle.token` are then refused downstream. A dead holder's lease expires after `leaseMs`. Inside a
 * job, use `ctx.withLease`: it keeps the lease until the job's commit and fences the commit with it.
 */
export async function withLease<T>(
  key: string,
  fn: (handle: LeaseHandle) => Promise<T>,
  options: WithLeaseOptions,
): Promise<T> {
  const held = await holdLease(key, options);
  let result: T;
  try {
    result = await fn({ key, token: held.token, signal: held.signal });
  } finally {
    await held.release();
  }
  // Work that finished after its lease was lost ran without mutual exclusion: say so rather than
  // hand back a result as if it had been protected.
  if (held.lost) throw (held.signal.reason as unknown) ?? new Error(`lease ${key} lost`);
  return result;
}
