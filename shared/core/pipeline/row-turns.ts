// Turns on a hot row within one worker: after a commit conflicted on an effect's row, the job's next
// run waits for its turn on that row behind the other jobs of this worker that conflicted on it, so a
// batch of ten orders for one stock row does not re-run ten at once and lose nine again. An optimisation
// only: the commit's own condition still decides, and other workers still race (each with one runner).

/** What a turn's holder calls when its run and commit are over (idempotent). */
export type EndTurn = () => void;

/** FIFO turns per row key, in one process. */
export class RowTurns {
  /** Per key, the end of the last turn queued: the next one starts when it settles. */
  readonly #tails = new Map<string, Promise<void>>();

  /**
   * Waits for the turn on `key`; resolves with the function that ends it. A wait that `signal` aborts
   * rejects with the signal's reason and gives its place up (the turns behind it move on).
   */
  async take(key: string, signal: AbortSignal): Promise<EndTurn> {
    signal.throwIfAborted();
    const before = this.#tails.get(key) ?? Promise.resolve();
    let end!: () => void;
    const mine = new Promise<void>((resolve) => {
      end = resolve;
    });
    const tail = before.then(() => mine);
    this.#tails.set(key, tail);
    let ended = false;
    const endTurn: EndTurn = () => {
      if (ended) return;
      ended = true;
      end();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    };
    try {
      await waitOrAbort(before, signal);
    } catch (error) {
      endTurn();
      throw error;
    }
    return endTurn;
  }

  /** Keys with a turn held or queued (a test hook). */
  get size(): number {
    return this.#tails.size;
  }
}

function waitOrAbort(work: Promise<void>, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
