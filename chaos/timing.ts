/** A time window of one injected fault or pause (epoch ms). */
export interface Window {
  readonly kind: string;
  readonly start: number;
  end?: number;
}

/** A uniformly random number of ms in [min, max). */
export function between(random: () => number, min: number, max: number): number {
  return Math.round(min + random() * (max - min));
}

/** Waits `ms`, or less when `signal` aborts; never rejects. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Runs `turn` after every random idle gap until `signal` aborts; a failing turn is reported, not fatal. */
export async function repeatRandomly(
  signal: AbortSignal,
  random: () => number,
  idleMs: readonly [number, number],
  turn: () => Promise<void>,
  onError: (error: unknown) => void,
): Promise<void> {
  while (!signal.aborted) {
    await sleep(between(random, idleMs[0], idleMs[1]), signal);
    if (signal.aborted) break;
    try {
      await turn();
    } catch (error) {
      onError(error);
    }
  }
}
