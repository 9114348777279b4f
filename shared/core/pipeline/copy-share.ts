/**
 * How many of this worker's recent fast-path messages were copies of a job already finished. A copy that
 * the local cache misses costs the fast path a run and a refused two-item transaction (2 x 2 WRU) where
 * a leased copy pays one refused claim (1 WRU), so past a share of about 1/4 copies the fast path would be
 * dearer than the leased one. Above {@link READ_FIRST_SHARE} the worker reads the job item (1 RRU, a fifth
 * of a WRU's price) before running a fast-path job, and drops a copy of a finished job without running it.
 * Only the cost depends on this guess: the commit's condition still decides every copy.
 */
export class CopyShare {
  /** The last {@link WINDOW} fast-path decisions, true for a copy; starts as if none was. */
  readonly #recent: boolean[] = new Array<boolean>(WINDOW).fill(false);
  #next = 0;
  #copies = 0;
  readonly #always: boolean;

  /** @param always read first whatever the share (JobProcessorOptions.fastPathReadFirst) */
  constructor(always = false) {
    this.#always = always;
  }

  /** Records whether a message that reached the fast path was a copy of a finished job. */
  note(copy: boolean): void {
    const old = this.#recent[this.#next];
    if (old) this.#copies -= 1;
    if (copy) this.#copies += 1;
    this.#recent[this.#next] = copy;
    this.#next = (this.#next + 1) % WINDOW;
  }

  /** True when enough recent messages were copies that a read before each fast run pays for itself. */
  get readFirst(): boolean {
    return this.#always || this.#copies >= READ_FIRST_COPIES;
  }
}

/** Decisions remembered. */
const WINDOW = 20;
/**
 * Share of copies above which reading first pays: 1/5, below the 1/4 where a blind fast path costs as
 * much as the leased path (4 WRU a message against 5 - 4 x share), so it switches before it gets dearer.
 */
export const READ_FIRST_SHARE = 0.2;
const READ_FIRST_COPIES = Math.round(WINDOW * READ_FIRST_SHARE);
