/** A signal that aborts after a time, and the means to stop its timer when the call is done. */
export interface BoundedSignal {
  readonly signal: AbortSignal;
  clear(): void;
}

/**
 * An abort signal that fires after `ms` with a TimeoutError reason. Built on `setTimeout` rather than
 * `AbortSignal.timeout`, so the caller can clear it as soon as the call returns (no timer left behind per
 * store call) and fake timers drive it in tests. One object and one timer per call, no closures: the
 * claim of every job makes one.
 */
export function boundedSignal(ms: number, why: string): BoundedSignal {
  return new Bound(ms, why);
}

class Bound implements BoundedSignal {
  readonly #controller = new AbortController();
  readonly #timer: NodeJS.Timeout;
  readonly signal: AbortSignal;

  constructor(ms: number, why: string) {
    this.signal = this.#controller.signal;
    this.#timer = setTimeout(timeOut, Math.max(0, ms), this.#controller, ms, why);
    this.#timer.unref?.();
  }

  clear(): void {
    clearTimeout(this.#timer);
  }
}

function timeOut(controller: AbortController, ms: number, why: string): void {
  const reason = new Error(`timed out after ${Math.round(ms)} ms: ${why}`);
  reason.name = 'TimeoutError';
  controller.abort(reason);
}

/** A promise that rejects with the signal's reason when it aborts (and never settles otherwise). */
export function rejectOnAbort(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}
