/**
 * How many of this worker's recent fast-path messages were copies of a job already finished. A copy that
 * the local cache misses costs the fast path a run and a refused two-item transaction (2 x 2 WRU); read
 * first, it costs one eventually consistent read of the job item (0.5 RRU, at a fifth of a WRU's price
 * 0.1 WRU's worth) and is dropped unrun, while every other message pays that read for nothing. Reading
 * first pays once more than {@link READ_FIRST_SHARE} (0.1 / 4, a fortieth) of the messages are copies.
 * The share is a decaying count over about the last {@link MEMORY} messages, not a short window: copies
 * come in bursts (a producer's re-sends, a batch of ten decided at once), and a window of 20 forgot them
 * between two bursts, so each burst ran blind (docs/protocol.md, "Fast path"). It starts at no copies
 * and no messages, so a worker that never meets a copy never reads, and the first copy after a few unique
 * jobs turns reading on. Only the cost depends on this guess: the commit's condition still decides every copy.
 */
export class CopyShare {
  /** Copies and messages noted, each weighed down by {@link KEEP} per later message. */
  #copies = 0;
  #seen = 0;
  readonly #always: boolean;

  /** @param always read first whatever the share (JobProcessorOptions.fastPathReadFirst) */
  constructor(always = false) {
    this.#always = always;
  }

  /** Records whether a message that reached the fast path was a copy of a finished job. */
  note(copy: boolean): void {
    this.#copies = this.#copies * KEEP + (copy ? 1 : 0);
    this.#seen = this.#seen * KEEP + 1;
  }

  /** True when enough recent messages were copies that a read before each fast run pays for itself. */
  get readFirst(): boolean {
    return this.#always || (this.#copies > 0 && this.#copies >= this.#seen * READ_FIRST_SHARE);
  }
}

/** Messages the share mostly reflects: a message's weight halves after about 0.7 x MEMORY later ones. */
export const MEMORY = 200;
const KEEP = 1 - 1 / MEMORY;
/**
 * Share of copies above which reading first pays: the read's price (0.5 RRU = 0.1 WRU at $0.125 against
 * $0.625 per million) over what it saves on a copy (a refused two-item transaction, 4 WRU). For a job with
 * no effects (a refused one-item write, 1 WRU) the break-even is 1/10: reading there from 1/40 costs up to
 * 0.075 WRU's worth per message more, and saves a repeat of the job's outside effect per copy.
 */
export const READ_FIRST_SHARE = 0.1 / 4;
