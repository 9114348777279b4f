const UNIT_SECONDS: Readonly<Record<string, number>> = {
  s: 1,
  sec: 1,
  m: 60,
  min: 60,
  h: 3600,
};

/**
 * Parses a rate such as `50`, `50/s`, `600/min` or `1000/h` into messages per second.
 * @throws RangeError naming the value received and the forms expected.
 */
export function parseRate(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(?:\/\s*([a-z]+))?\s*$/i.exec(text);
  const unit = match?.[2]?.toLowerCase() ?? 's';
  const seconds = UNIT_SECONDS[unit];
  const count = Number(match?.[1]);
  if (!match || seconds === undefined || !(count > 0) || !Number.isFinite(count)) {
    throw new RangeError(
      `expected a positive rate such as 50, 50/s, 600/min or 1000/h, received ${JSON.stringify(text)}`,
    );
  }
  return count / seconds;
}

export interface PacerOptions {
  /** Permits per second; `undefined` means no limit. */
  readonly perSecond: number | undefined;
  /** @default Date.now */
  readonly now?: () => number;
  /** @default setTimeout-based sleep */
  readonly sleep?: (ms: number) => Promise<void>;
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Spaces work out to at most `perSecond` permits per second on average, without bursts above one
 * batch: `take(n)` waits until the previous permits' time has passed, then books `n / perSecond` seconds.
 * Safe to share between concurrent callers (each booking is synchronous).
 */
export class Pacer {
  readonly #perSecond: number | undefined;
  readonly #now: () => number;
  readonly #sleep: (ms: number) => Promise<void>;
  #nextAt = 0;

  constructor(options: PacerOptions) {
    if (options.perSecond !== undefined && !(options.perSecond > 0)) {
      throw new RangeError(`perSecond must be > 0, received ${options.perSecond}`);
    }
    this.#perSecond = options.perSecond;
    this.#now = options.now ?? Date.now;
    this.#sleep = options.sleep ?? realSleep;
  }

  /** Largest batch worth sending at once at this rate (at least 1, at most `max`). */
  batchSize(max: number): number {
    if (this.#perSecond === undefined) return max;
    return Math.max(1, Math.min(max, Math.floor(this.#perSecond)));
  }

  /** Waits for `count` permits. */
  async take(count = 1): Promise<void> {
    if (this.#perSecond === undefined) return;
    const now = this.#now();
    const start = Math.max(now, this.#nextAt);
    this.#nextAt = start + (count / this.#perSecond) * 1000;
    if (start > now) await this.#sleep(start - now);
  }
}
