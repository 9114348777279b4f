/** A signal that aborts after a time, and the means to stop its timer when the call is done. */
export interface BoundedSignal {
  readonly signal: AbortSignal;
  clear(): void;
}

/**
 * An abort signal that fires after `ms` with a TimeoutError reason. Built on `setTimeout` rather than
 * `AbortSignal.timeout`, so the caller can clear it as soon as the call returns (no timer left behind per
 * store call) and fake timers drive it in tests.
 */
export function boundedSignal(ms: number, why: string): BoundedSignal {
  const controller = new AbortController();
  const timer = setTimeout(
    () => {
      const reason = new Error(`timed out after ${Math.round(ms)} ms: ${why}`);
      reason.name = 'TimeoutError';
      controller.abort(reason);
    },
    Math.max(0, ms),
  );
  timer.unref?.();
  return { signal: controller.signal, clear: () => clearTimeout(timer) };
}
