import { LeaseLostError, StoreUnavailableError } from '../errors.ts';

/** How an injected fault behaves. */
export interface FaultOptions {
  /** How many matching calls in a row fail. @default 1 */
  readonly times?: number;
  /**
   * `before`: the call fails and nothing is written (the store was not reached). `after`: the store applies
   * the call, then the answer is lost (the caller sees the error, the write happened), like a commit whose
   * response timed out. @default 'before'
   */
  readonly when?: 'before' | 'after';
}

/** How an injected delay behaves. */
export interface DelayOptions {
  /** How many matching calls in a row are slow. @default 1 */
  readonly times?: number;
  /**
   * `before`: the request is slow to arrive (the write lands late, also when the caller gave up on it
   * meanwhile, as a real abandoned request can). `after`: the store applies the call at once and its
   * answer is slow. A caller whose signal aborts meanwhile gets a StoreUnavailableError at once; the
   * write is applied either way. @default 'after'
   */
  readonly when?: 'before' | 'after';
}

interface FaultRule<Op extends string> {
  readonly operation: Op | '*';
  /** Fails the call with this error; a rule without it only delays. */
  readonly error?: (operation: Op) => Error;
  readonly delayMs: number;
  readonly when: 'before' | 'after';
  left: number;
}

/**
 * Deterministic store outages for the in-memory stores: each rule fails the next matching calls, in the
 * order the rules were added. The default error is the {@link StoreUnavailableError} the DynamoDB adapters
 * throw for throttling, 5xx and timeouts.
 */
export class StoreFaults<Op extends string> {
  readonly #rules: FaultRule<Op>[] = [];
  /** Calls failed so far, per operation. */
  readonly injected = new Map<Op, number>();

  /**
   * Fails the next call(s) of `operation` (`'*'`: any operation).
   * @param error the error to throw, or a factory given the operation @default a StoreUnavailableError
   */
  failNext(
    operation: Op | '*',
    error?: Error | ((operation: Op) => Error),
    options: FaultOptions = {},
  ): this {
    this.#rules.push({
      operation,
      error: typeof error === 'function' ? error : (op) => error ?? injectedOutage(op),
      delayMs: 0,
      when: options.when ?? 'before',
      left: positiveTimes('failNext', options.times),
    });
    return this;
  }

  /**
   * Makes the next call(s) of `operation` slow by `ms` (a timer, so fake timers drive it). The call then
   * succeeds or is refused as usual, unless the caller's signal aborts first.
   */
  delayNext(operation: Op | '*', ms: number, options: DelayOptions = {}): this {
    if (!(Number.isFinite(ms) && ms >= 0)) throw new RangeError(`delayNext ms must be >= 0, got ${ms}`);
    this.#rules.push({
      operation,
      delayMs: ms,
      when: options.when ?? 'after',
      left: positiveTimes('delayNext', options.times),
    });
    return this;
  }

  /** Drops every rule not yet spent. */
  clear(): void {
    this.#rules.length = 0;
  }

  /** Rules not yet spent (how many calls they will still fail). */
  get pending(): number {
    return this.#rules.reduce((sum, rule) => sum + rule.left, 0);
  }

  /**
   * Runs one store call under the rules: a `before` fault throws without calling `body`; an `after` fault
   * calls `body` (a refusal it answers is lost with the answer) and then throws. A delay waits before or
   * after `body`; `signal` abandons the wait with a StoreUnavailableError, as a timed-out SDK call does.
   */
  async run<T>(operation: Op, body: () => T, signal?: AbortSignal): Promise<T> {
    // Every call gives up its turn once, as real I/O would, so concurrent callers interleave; a microtask
    // rather than a timer keeps the stores usable under fake timers.
    await Promise.resolve();
    if (signal?.aborted) throw abandoned(operation, signal);
    if (this.#rules.length === 0) return body();
    const rule = this.#rules.find((r) => r.left > 0 && (r.operation === '*' || r.operation === operation));
    if (!rule) return body();
    rule.left -= 1;
    if (rule.left === 0) this.#rules.splice(this.#rules.indexOf(rule), 1);
    this.injected.set(operation, (this.injected.get(operation) ?? 0) + 1);
    if (!rule.error) {
      if (rule.when === 'before') {
        // The request is on its way and lands late, whether or not the caller still waits for it.
        const landed = new Promise<T>((resolve, reject) => {
          setTimeout(() => {
            try {
              resolve(body());
            } catch (error) {
              reject(error);
            }
          }, rule.delayMs);
        });
        landed.catch(() => undefined);
        if (!signal) return landed;
        return Promise.race([landed, rejectWhenAborted(operation, signal)]);
      }
      // The answer (a value or the store's refusal) is computed now and delivered late.
      let answer: { ok: true; value: T } | { ok: false; error: unknown };
      try {
        answer = { ok: true, value: body() };
      } catch (error) {
        answer = { ok: false, error };
      }
      await wait(rule.delayMs, operation, signal);
      if (!answer.ok) throw answer.error;
      return answer.value;
    }
    if (rule.when === 'after') {
      try {
        body();
      } catch (error) {
        // The store's "no" is lost with its answer; anything else is a bug in the caller and stays loud.
        if (!(error instanceof LeaseLostError)) throw error;
      }
    }
    throw rule.error(operation);
  }
}

function positiveTimes(method: string, times = 1): number {
  if (!Number.isInteger(times) || times < 1) {
    throw new RangeError(`${method} times must be a positive integer, got ${times}`);
  }
  return times;
}

/** Waits `ms`, or rejects as an outage as soon as `signal` aborts. */
function wait(ms: number, operation: string, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abandoned(operation, signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Rejects as an outage when `signal` aborts; never settles otherwise. */
function rejectWhenAborted(operation: string, signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(abandoned(operation, signal));
    else signal.addEventListener('abort', () => reject(abandoned(operation, signal)), { once: true });
  });
}

function abandoned(operation: string, signal: AbortSignal | undefined): StoreUnavailableError {
  const cause = new Error(`injected delay: call abandoned (${String(signal?.reason ?? 'aborted')})`);
  cause.name = 'TimeoutError';
  return new StoreUnavailableError(operation, cause);
}

function injectedOutage(operation: string): StoreUnavailableError {
  const cause = new Error('injected fault: service unavailable');
  cause.name = 'ServiceUnavailable';
  return new StoreUnavailableError(operation, cause);
}
