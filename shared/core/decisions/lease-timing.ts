import { DEFAULTS } from '../contract/defaults.ts';

/** How long a lease lasts and how often it is renewed. */
export interface LeaseTiming {
  /** Lease length. */
  readonly leaseMs: number;
  /** Renewal period: a third of the lease (docs/protocol.md), so two beats may fail before it lapses. */
  readonly heartbeatMs: number;
}

/** Validates a lease length (at least DEFAULTS.minLeaseMs) and derives the heartbeat period (lease / 3). */
export function leaseTiming(leaseMs: number, heartbeatMs?: number): LeaseTiming {
  if (!Number.isFinite(leaseMs) || leaseMs < DEFAULTS.minLeaseMs) {
    throw new RangeError(`leaseMs must be at least ${DEFAULTS.minLeaseMs} (ms), received ${leaseMs}`);
  }
  const beat = heartbeatMs ?? Math.floor(leaseMs / 3);
  if (!(beat > 0 && beat < leaseMs)) {
    throw new RangeError(`heartbeatMs must be > 0 and < leaseMs (${leaseMs}), received ${beat}`);
  }
  return { leaseMs, heartbeatMs: beat };
}

/**
 * Message visibility that covers a lease: whole seconds, rounded up, plus one second so the message
 * never becomes visible while the DynamoDB lease is still live.
 */
export function visibilityForLease(leaseMs: number): number {
  return Math.ceil(leaseMs / 1000) + 1;
}

/**
 * Caps a lease so it never outlives an invocation's deadline (Lambda's remaining time): a lease that
 * outlived its worker would keep the job from being retried until it expired.
 */
export function capLeaseToDeadline(leaseMs: number, now: number, deadline: number | undefined): number {
  if (deadline === undefined) return leaseMs;
  return Math.max(0, Math.min(leaseMs, deadline - now));
}

/**
 * The shortest invocation timeout (whole seconds) under which jobs start. The deadline is the timeout
 * less `deadlineMarginMs`, every lease is capped to it, and the processor starts no job under a lease
 * below DEFAULTS.minLeaseMs. The batch arrives some time into the invocation and the payload check and
 * claim come before the lease is set, so margin + minimum is not enough: a timeout 1 ms over it would
 * start a job only if its claim took under 1 ms. One second more (START_SLACK_MS) is required; below
 * this every record is handed back unrun.
 */
export function minInvocationTimeoutSeconds(deadlineMarginMs: number): number {
  return Math.ceil((deadlineMarginMs + DEFAULTS.minLeaseMs + START_SLACK_MS) / 1000);
}

/** Time a record may take from the invocation's start to its claim, in {@link minInvocationTimeoutSeconds}. */
const START_SLACK_MS = 1000;

/**
 * Time kept in hand before a lease ends, for clock skew between workers and the last write: a worker
 * stops its job this long before `leaseUntil` unless a renewal extended it. A tenth of the lease, at
 * most 1 s (docs/protocol.md, "Timing rules").
 */
export function leaseSafetyMs(leaseMs: number): number {
  return Math.min(1000, Math.floor(leaseMs / 10));
}
