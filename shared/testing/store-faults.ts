import { LeaseLostError, StoreUnavailableError } from '../core/errors.ts';

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

interface FaultRule<Op extends string> {
  readonly operation: Op | '*';
  readonly error: (operation: Op) => Error;
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
    const times = options.times ?? 1;
    if (!Number.isInteger(times) || times < 1) {
      throw new RangeError(`failNext times must be a positive integer, got ${times}`);
    }
    this.#rules.push({
      operation,
      error: typeof error === 'function' ? error : (op) => error ?? injectedOutage(op),
      when: options.when ?? 'before',
      left: times,
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
   * calls `body` (a refusal it answers is lost with the answer) and then throws.
   */
  async run<T>(operation: Op, body: () => T): Promise<T> {
    // Every call gives up its turn once, as real I/O would, so concurrent callers interleave; a microtask
    // rather than a timer keeps the stores usable under fake timers.
    await Promise.resolve();
    const rule = this.#rules.find((r) => r.left > 0 && (r.operation === '*' || r.operation === operation));
    if (!rule) return body();
    rule.left -= 1;
    if (rule.left === 0) this.#rules.splice(this.#rules.indexOf(rule), 1);
    this.injected.set(operation, (this.injected.get(operation) ?? 0) + 1);
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

function injectedOutage(operation: string): StoreUnavailableError {
  const cause = new Error('injected fault: service unavailable');
  cause.name = 'ServiceUnavailable';
  return new StoreUnavailableError(operation, cause);
}
