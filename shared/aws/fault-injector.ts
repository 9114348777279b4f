import type { FinalizeRequestMiddleware, MiddlewareStack } from '@smithy/types';
import type { AwsClients } from './clients.ts';

/** A fault to inject into matching requests. */
export interface FaultRule {
  /** `DynamoDB` or `SQS`. */
  readonly service: 'DynamoDB' | 'SQS';
  /** Command name without the `Command` suffix (`TransactWriteItems`); omit for every command. */
  readonly command?: string;
  /** How many matching requests fail; afterwards the rule is spent. @default Infinity */
  readonly times?: number;
  /** Matching requests let through before the rule starts failing them. @default 0 */
  readonly skip?: number;
  /** The error to throw. @default a 503 `ServiceUnavailable` */
  readonly error?: () => Error;
  /**
   * `before`: the request never reaches the store. `after`: the store applies it and the answer is lost
   * (the write happened, the caller sees a failure). @default 'before'
   */
  readonly when?: 'before' | 'after';
}

/**
 * SDK middleware that fails chosen requests before they are sent, the way an overloaded or unreachable
 * store does (the chaos harness and the store-outage tests use it). Faults are thrown at the
 * `finalizeRequest` step, so the SDK's own retry sees them like real 5xx answers.
 */
export class FaultInjector {
  readonly #rules: { rule: FaultRule; left: number; skip: number }[] = [];
  /** Requests failed so far, per `Service.Command`. */
  readonly injected = new Map<string, number>();

  attach(clients: AwsClients): this {
    this.#add(clients.sqs.middlewareStack, 'SQS');
    this.#add(clients.ddb.middlewareStack, 'DynamoDB');
    return this;
  }

  /** Adds a rule; it applies to requests sent from now on. */
  fail(rule: FaultRule): this {
    this.#rules.push({ rule, left: rule.times ?? Number.POSITIVE_INFINITY, skip: rule.skip ?? 0 });
    return this;
  }

  clear(): void {
    this.#rules.length = 0;
  }

  #add<I extends object, O extends object>(stack: MiddlewareStack<I, O>, service: 'SQS' | 'DynamoDB'): void {
    const middleware: FinalizeRequestMiddleware<I, O> = (next, context) => async (args) => {
      const command = String(context.commandName ?? '').replace(/Command$/, '');
      const match = this.#rules.find(
        (r) =>
          r.left > 0 &&
          r.rule.service === service &&
          (r.rule.command === undefined || r.rule.command === command),
      );
      if (!match) return next(args);
      if (match.skip > 0) {
        match.skip -= 1;
        return next(args);
      }
      match.left -= 1;
      const key = `${service}.${command}`;
      this.injected.set(key, (this.injected.get(key) ?? 0) + 1);
      if (match.rule.when === 'after') await next(args);
      throw (match.rule.error ?? serviceUnavailable)();
    };
    stack.add(middleware, { step: 'finalizeRequest', name: `leaseqFaultInjector${service}`, override: true });
  }
}

function serviceUnavailable(): Error {
  const error = new Error('injected fault: service unavailable');
  error.name = 'ServiceUnavailable';
  Object.assign(error, { $metadata: { httpStatusCode: 503 }, $fault: 'server' });
  return error;
}
