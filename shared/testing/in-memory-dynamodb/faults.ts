// Faults at the request boundary of the in-memory DynamoDB, modelled on StoreFaults (store-faults.ts):
// each rule fails or delays the next matching requests, in the order the rules were added. A request
// matches by the store operation the adapter names in its send options (`leaseqOperation`: `claim`,
// `lease-acquire`, `rate-take`, ...), by `{ command, table }`, or '*'.

import { internalError, throttled, timedOut, transactionCanceled, transactionConflict } from './errors.ts';

/** What a rule matches: an operation name, a command and/or table, or any request. */
export type FaultTarget = string | { readonly command?: string; readonly table?: string };

/** The kinds of injected failure, each the error the SDK throws for it. */
export type FaultKind = 'unavailable' | 'throttle' | 'timeout' | 'conflict';

/** One request, as the rules see it. */
export interface FaultRequest {
  /** The store operation the adapter named (`options.leaseqOperation`), if any. */
  readonly operation: string | undefined;
  /** The command's class name (`UpdateCommand`, `TransactWriteCommand`, ...). */
  readonly command: string;
  /** The tables it touches. */
  readonly tables: readonly string[];
  /** Actions of a transaction (a conflict cancels the first), 0 otherwise. */
  readonly actions: number;
  /** A BatchGet's keys by table (what {@link DynamoDbFaults.leaveUnprocessed} may leave unread). */
  readonly batchKeys?: Readonly<Record<string, readonly Readonly<Record<string, unknown>>[]>>;
}

export interface FaultOptions {
  /** How many matching requests in a row fail. @default 1 */
  readonly times?: number;
  /**
   * `before`: nothing is written. `after`: the request is applied and its answer is lost (the caller sees
   * the error, the write landed). @default 'before'
   */
  readonly when?: 'before' | 'after';
}

export interface DelayOptions {
  /** @default 1 */
  readonly times?: number;
  /**
   * `before`: the request is slow to arrive (it lands late, also when the caller gave up on it meanwhile).
   * `after`: it is applied at once and its answer is slow. An aborted signal fails the call at once.
   * @default 'after'
   */
  readonly when?: 'before' | 'after';
}

type ErrorSpec = FaultKind | Error | ((operation: string) => Error);

interface Rule {
  readonly target: FaultTarget;
  readonly error?: ErrorSpec;
  /** A BatchGet answered with only this many keys of each table read, the rest in UnprocessedKeys. */
  readonly served?: number;
  readonly delayMs: number;
  readonly when: 'before' | 'after';
  left: number;
}

/** Injected failures and delays of one in-memory DynamoDB client. */
export class DynamoDbFaults {
  readonly #rules: Rule[] = [];
  /** Requests failed or delayed so far, by operation name (or command name when none was given). */
  readonly injected = new Map<string, number>();

  /**
   * Fails the next request(s) matching `target`.
   * @param error a kind, an error, or a factory given the operation @default 'unavailable' (a 500)
   */
  failNext(target: FaultTarget, error: ErrorSpec = 'unavailable', options: FaultOptions = {}): this {
    this.#rules.push({
      target,
      error,
      delayMs: 0,
      when: options.when ?? 'before',
      left: times('failNext', options.times),
    });
    return this;
  }

  /** The next request(s) matching `target` are applied and their answer is lost (a timeout). */
  loseAnswer(target: FaultTarget, options: { readonly times?: number } = {}): this {
    return this.failNext(target, 'timeout', { ...options, when: 'after' });
  }

  /** Delays the next request(s) matching `target` by `ms` (a timer: fake timers drive it). */
  delayNext(target: FaultTarget, ms: number, options: DelayOptions = {}): this {
    if (!(Number.isFinite(ms) && ms >= 0)) throw new RangeError(`delayNext ms must be >= 0, got ${ms}`);
    this.#rules.push({
      target,
      delayMs: ms,
      when: options.when ?? 'after',
      left: times('delayNext', options.times),
    });
    return this;
  }

  /**
   * The next BatchGet(s) matching `target` read only the first `served` keys of each table and answer the
   * rest in `UnprocessedKeys`, as DynamoDB does when it throttles a batch read (or its answer would pass
   * 16 MB): no error, the caller must ask for them again.
   */
  leaveUnprocessed(
    target: FaultTarget,
    options: { readonly served?: number; readonly times?: number } = {},
  ): this {
    const served = options.served ?? 0;
    if (!(Number.isInteger(served) && served >= 0))
      throw new RangeError(`leaveUnprocessed served must be an integer >= 0, got ${served}`);
    this.#rules.push({
      target,
      served,
      delayMs: 0,
      when: 'after',
      left: times('leaveUnprocessed', options.times),
    });
    return this;
  }

  /** Drops every rule not yet spent. */
  clear(): void {
    this.#rules.length = 0;
  }

  /** Requests the rules will still fail or delay. */
  get pending(): number {
    return this.#rules.reduce((sum, rule) => sum + rule.left, 0);
  }

  /**
   * Runs one request under the rules (`body` applies it and builds its answer); `describe` tells the
   * request, asked only while some rule is left.
   */
  async run<T>(describe: () => FaultRequest, body: () => T, signal: AbortSignal | undefined): Promise<T> {
    if (signal?.aborted) throw aborted(signal);
    if (this.#rules.length === 0) return body();
    const request = describe();
    const rule = this.#rules.find((r) => r.left > 0 && matches(r.target, request));
    if (!rule) return body();
    rule.left -= 1;
    if (rule.left === 0) this.#rules.splice(this.#rules.indexOf(rule), 1);
    const name = request.operation ?? request.command;
    this.injected.set(name, (this.injected.get(name) ?? 0) + 1);
    if (rule.served !== undefined) return unprocessed(body(), request.batchKeys ?? {}, rule.served);
    if (rule.error === undefined) return delayed(rule, body, signal);
    if (rule.when === 'after') {
      try {
        body();
      } catch {
        // The answer, a refusal too, is lost.
      }
    }
    throw errorOf(rule.error, request);
  }
}

/** A BatchGet's `answer` with each table's keys past `served` moved to `UnprocessedKeys`, their items out. */
function unprocessed<T>(answer: T, keys: NonNullable<FaultRequest['batchKeys']>, served: number): T {
  const out = answer as { Responses?: Record<string, Record<string, unknown>[]>; UnprocessedKeys?: unknown };
  if (out?.Responses === undefined) return answer;
  const responses: Record<string, Record<string, unknown>[]> = {};
  const left: Record<string, { Keys: Readonly<Record<string, unknown>>[] }> = {};
  for (const [table, items] of Object.entries(out.Responses)) {
    const unread = (keys[table] ?? []).slice(served);
    const isUnread = (item: Record<string, unknown>) =>
      unread.some((key) => Object.entries(key).every(([name, value]) => item[name] === value));
    responses[table] = items.filter((item) => !isUnread(item));
    if (unread.length > 0) left[table] = { Keys: [...unread] };
  }
  return { ...out, Responses: responses, UnprocessedKeys: left } as T;
}

function matches(target: FaultTarget, request: FaultRequest): boolean {
  if (target === '*') return true;
  if (typeof target === 'string') return target === request.operation;
  if (target.command !== undefined && target.command !== request.command) return false;
  if (target.table !== undefined && !request.tables.includes(target.table)) return false;
  return true;
}

function errorOf(spec: ErrorSpec, request: FaultRequest): Error {
  if (spec instanceof Error) return spec;
  if (typeof spec === 'function') return spec(request.operation ?? request.command);
  switch (spec) {
    case 'throttle':
      return throttled();
    case 'timeout':
      return timedOut();
    case 'conflict':
      if (request.actions === 0) return transactionConflict();
      return transactionCanceled(
        Array.from({ length: request.actions }, (_, i) =>
          i === 0
            ? { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' }
            : { Code: 'None' },
        ),
      );
    default:
      return internalError();
  }
}

async function delayed<T>(rule: Rule, body: () => T, signal: AbortSignal | undefined): Promise<T> {
  if (rule.when === 'before') {
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
    return signal ? Promise.race([landed, whenAborted(signal)]) : landed;
  }
  let answer: { ok: true; value: T } | { ok: false; error: unknown };
  try {
    answer = { ok: true, value: body() };
  } catch (error) {
    answer = { ok: false, error };
  }
  await new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted(signal as AbortSignal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, rule.delayMs);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  if (!answer.ok) throw answer.error;
  return answer.value;
}

function whenAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(aborted(signal));
    else signal.addEventListener('abort', () => reject(aborted(signal)), { once: true });
  });
}

/**
 * Settles with `settle()` after `ms` (an answer's way back), or rejects as the SDK does when `signal`
 * aborts first: the request has been applied, its answer is lost.
 */
export function afterLatency<T>(ms: number, signal: AbortSignal | undefined, settle: () => T): Promise<T> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(aborted(signal));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted(signal as AbortSignal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      try {
        resolve(settle());
      } catch (error) {
        reject(error);
      }
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** What the SDK throws for a request whose signal aborted. */
function aborted(signal: AbortSignal): Error {
  const error = new Error(`Request aborted (${String(signal.reason ?? 'aborted')})`);
  error.name = 'AbortError';
  Object.assign(error, { $metadata: {} });
  return error;
}

function times(method: string, n = 1): number {
  if (!Number.isInteger(n) || n < 1)
    throw new RangeError(`${method} times must be a positive integer, got ${n}`);
  return n;
}
