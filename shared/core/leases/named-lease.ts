import { LeaseBusyError, StoreUnavailableError } from '../../errors.ts';
import { DEFAULTS } from '../contract/defaults.ts';
import {
  type AcquireResult,
  isOwnAcquire,
  type LeaseStore,
  type NamedLease,
} from '../contract/lease-store.ts';
import { leaseSafetyMs, leaseTiming } from '../decisions/lease-timing.ts';
import { Heartbeat } from './heartbeat.ts';
import { boundedSignal, rejectOnAbort } from './timeout-signal.ts';

export interface WithLeaseOptions {
  readonly store: LeaseStore;
  /** Who holds the lease; unique per holder (two holders with one owner pass for each other). */
  readonly owner: string;
  /** @default DEFAULTS.namedLeaseMs (15000) */
  readonly leaseMs?: number;
  /** How long to wait for a busy lease before {@link LeaseBusyError}. @default 10000 */
  readonly waitMs?: number;
  /** Pause between acquire tries (grows up to 8x, with jitter). @default 50 */
  readonly pollMs?: number;
  /**
   * Also aborts the work (e.g. the job's own signal), and bounds the acquire: aborted, nothing is held
   * and nothing is renewed.
   */
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
 *
 * `options.signal` bounds the whole of it: an abort during the wait ends it with the abort's reason, an
 * acquire whose answer comes after the abort is released at once, and an abort after the lease was
 * taken stops its renewals (the caller still releases it; unreleased, it simply expires). Each try is
 * also bounded by the lease it asks for: an answer later than that is useless, so the try is abandoned
 * (and released if it lands) and counts as a store outage. A try whose answer was lost (an outage) is
 * tried again within `waitMs`, and the lease it may have written is recognised as this call's own.
 * @throws LeaseBusyError when the wait runs out; StoreUnavailableError when the store did not answer.
 */
export async function holdLease(key: string, options: WithLeaseOptions): Promise<HeldLease> {
  const now = options.now ?? Date.now;
  const timing = leaseTiming(options.leaseMs ?? DEFAULTS.namedLeaseMs);
  const safetyMs = leaseSafetyMs(timing.leaseMs);
  const waitMs = options.waitMs ?? 10_000;
  const pollMs = options.pollMs ?? 50;
  const { store, owner, signal: outer } = options;
  const started = now();
  // When the tries whose answer never came were sent: their write may have landed, as this owner's.
  const unanswered: number[] = [];
  let lease: NamedLease | undefined;
  let requestedAt = started;
  try {
    for (let tryNumber = 0; !lease; tryNumber++) {
      outer?.throwIfAborted();
      requestedAt = now();
      let result: AcquireResult;
      try {
        result = await acquireOnce(store, key, owner, timing.leaseMs, requestedAt, safetyMs, outer, (error) =>
          options.onReleaseError?.(error),
        );
      } catch (error) {
        if (!(error instanceof StoreUnavailableError) || outer?.aborted) throw error;
        unanswered.push(requestedAt);
        if (now() - started >= waitMs) throw error;
        await pause(pollMs * 2 ** Math.min(tryNumber, 3), outer);
        continue;
      }
      if (result.acquired) {
        lease = result.lease;
        break;
      }
      const { holder } = result;
      const mine = unanswered.find((at) => isOwnAcquire(holder, owner, at));
      if (mine !== undefined) {
        lease = { key, owner, token: holder.token, leaseUntil: holder.leaseUntil };
        requestedAt = mine;
        break;
      }
      const waited = now() - started;
      if (waited >= waitMs) throw new LeaseBusyError(key, waited);
      await pause(
        Math.min(pollMs * 2 ** Math.min(tryNumber, 3), Math.max(1, holder.leaseUntil - now())),
        outer,
      );
    }
  } catch (error) {
    // A try whose answer was lost may have taken the lease all the same: give it back rather than
    // leave it held, unrenewed, until it expires.
    if (unanswered.length > 0) void releaseUnanswered(store, key, owner, unanswered);
    throw error;
  }
  const held = lease;
  if (outer?.aborted) {
    // Aborted while the answer was on its way (the job ended meanwhile): nobody would release it.
    await store.release(held).catch((error: unknown) => options.onReleaseError?.(error));
    outer.throwIfAborted();
  }
  const heartbeat = new Heartbeat({
    intervalMs: timing.heartbeatMs,
    leaseUntil: held.leaseUntil,
    // Beats count from the acquire's request, so a slow acquire answer is renewed at once.
    renewedAt: requestedAt,
    safetyMs,
    now,
    target: {
      renew: async () => {
        await store.renew(held, timing.leaseMs, now());
        return held.leaseUntil;
      },
    },
  }).start();
  // Work that was told to stop renews nothing: its lease is released by its caller, or expires.
  const stopRenewing = () => void heartbeat.stop();
  outer?.addEventListener('abort', stopRenewing, { once: true });
  const signal = outer ? AbortSignal.any([heartbeat.signal, outer]) : heartbeat.signal;
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
      outer?.removeEventListener('abort', stopRenewing);
      await heartbeat.stop();
      try {
        await store.release(held);
      } catch (error) {
        options.onReleaseError?.(error);
      }
    },
  };
}

/**
 * One acquire, raced against `signal` and against the lease it asks for (an answer after that lease
 * ended is of no use). When the race is lost, a lease the abandoned call still takes is given back.
 */
async function acquireOnce(
  store: LeaseStore,
  key: string,
  owner: string,
  leaseMs: number,
  now: number,
  safetyMs: number,
  signal: AbortSignal | undefined,
  onReleaseError: (error: unknown) => void,
): Promise<AcquireResult> {
  const call = store.tryAcquire(key, owner, leaseMs, now);
  const bound = boundedSignal(leaseMs - safetyMs, 'the lease would end before the acquire answered');
  const stop = signal ? AbortSignal.any([bound.signal, signal]) : bound.signal;
  try {
    return await Promise.race([call, rejectOnAbort(stop)]);
  } catch (error) {
    if (stop.aborted) {
      // Nobody awaits this release: a failure of it must be caught here (unhandled, it would end a Node
      // worker), and the lease then simply expires.
      void call.then(
        (late) => (late.acquired ? store.release(late.lease).catch(onReleaseError) : undefined),
        () => undefined,
      );
      if (signal?.aborted) throw signal.reason;
      throw new StoreUnavailableError('lease-acquire', bound.signal.reason);
    }
    throw error;
  } finally {
    bound.clear();
  }
}

/** Releases `key` if it is held by `owner` from one of the `unanswered` tries. Best effort. */
async function releaseUnanswered(
  store: LeaseStore,
  key: string,
  owner: string,
  unanswered: readonly number[],
): Promise<void> {
  try {
    const item = await store.get(key);
    if (item?.owner !== owner || !unanswered.some((at) => isOwnAcquire(item, owner, at))) return;
    await store.release({ key, owner, token: item.token, leaseUntil: item.leaseUntil });
  } catch {
    // It expires on its own, unrenewed, after one lease length.
  }
}

/** Waits `ms` (jittered down to half), or until `signal` aborts (rejecting with its reason). */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  const jittered = Math.max(1, Math.round(ms * (0.5 + Math.random() / 2)));
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, jittered);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
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
