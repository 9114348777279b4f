import { SQS_MAX_VISIBILITY_SECONDS } from './backoff.ts';

/**
 * Time counted as already used when the processor first sees a record: an event source mapping holds the
 * records it received for up to its batching window (at most 300 s) before it invokes, and a minute more
 * covers the calls and clocks in between. A local worker's receive is a moment before; the allowance is
 * the same, so no call depends on where the worker runs.
 */
export const RECEIVE_ALLOWANCE_SECONDS = 360;

/**
 * The longest visibility SQS still grants a message `nowMs`, received at `receivedAtMs`: SQS refuses a
 * ChangeMessageVisibility that would hide the message past 12 hours after the receive that returned its
 * receipt handle (each receive starts a new 12 hours). `seconds` is returned when it fits, else what is
 * left of the budget (less {@link RECEIVE_ALLOWANCE_SECONDS}), 0 when nothing is.
 */
export function visibilityWithinBudget(seconds: number, receivedAtMs: number, nowMs: number): number {
  const usedSeconds = Math.max(0, nowMs - receivedAtMs) / 1000;
  const left = Math.floor(SQS_MAX_VISIBILITY_SECONDS - RECEIVE_ALLOWANCE_SECONDS - usedSeconds);
  return Math.max(0, Math.min(seconds, left));
}
