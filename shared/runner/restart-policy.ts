/** What a pool's owner does when one of its workers exits on its own. */
export type RestartDecision =
  | { readonly action: 'restart'; readonly delayMs: number }
  | { readonly action: 'give-up'; readonly reason: string };

/** The exit as the policy sees it (a {@link WorkerInfo} fits). */
export interface WorkerExit {
  readonly id: string;
  /** The worker had polled (sent `ready`) before it died. */
  readonly ready: boolean;
  readonly exitCode: number | null;
  readonly exitSignal: NodeJS.Signals | null;
  readonly startError?: string | undefined;
  readonly logFile: string;
}

export interface RestartPolicyOptions {
  /** Deaths in a row before any of them polled that end the run. @default 3 */
  readonly maxEarlyDeaths?: number;
  /** First pause before a replacement; doubles with every death in the last minute. @default 500 */
  readonly baseDelayMs?: number;
  /** @default 30000 */
  readonly maxDelayMs?: number;
  readonly now?: () => number;
}

/**
 * When to replace a worker that died and when to stop: a worker that dies after it polled (a job that
 * kills its process, an out-of-memory) is replaced after a pause that doubles with every death in the last
 * minute, so a crash loop does not spin; a worker that keeps dying before its first poll (a broken job
 * module, a setting it refuses, a queue URL it cannot read) will not do better the next time, so a few
 * such deaths in a row end the run with the last one's reason.
 */
export class RestartPolicy {
  readonly #maxEarlyDeaths: number;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #now: () => number;
  readonly #recent: number[] = [];
  #earlyDeaths = 0;
  #restarts = 0;

  constructor(options: RestartPolicyOptions = {}) {
    this.#maxEarlyDeaths = options.maxEarlyDeaths ?? 3;
    this.#baseDelayMs = options.baseDelayMs ?? 500;
    this.#maxDelayMs = options.maxDelayMs ?? 30_000;
    this.#now = options.now ?? Date.now;
  }

  /** Replacements decided so far. */
  get restarts(): number {
    return this.#restarts;
  }

  /** How an exit reads in one line: `could not start: ...`, a signal or `code N`. */
  static describe(exit: WorkerExit): string {
    return exit.startError
      ? `could not start: ${exit.startError}`
      : (exit.exitSignal ?? `code ${exit.exitCode}`);
  }

  decide(exit: WorkerExit): RestartDecision {
    this.#earlyDeaths = exit.ready ? 0 : this.#earlyDeaths + 1;
    if (this.#earlyDeaths >= this.#maxEarlyDeaths) {
      return {
        action: 'give-up',
        reason: `workers keep dying before they poll (last: ${exit.id}, ${RestartPolicy.describe(exit)}); see ${exit.logFile}`,
      };
    }
    const now = this.#now();
    while (this.#recent.length > 0 && (this.#recent[0] ?? 0) < now - 60_000) this.#recent.shift();
    this.#recent.push(now);
    this.#restarts += 1;
    return {
      action: 'restart',
      delayMs: Math.min(this.#maxDelayMs, this.#baseDelayMs * 2 ** (this.#recent.length - 1)),
    };
  }
}
