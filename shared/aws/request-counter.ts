import type { InitializeMiddleware, MiddlewareStack } from '@smithy/types';
import type { AwsClients } from './clients.ts';

/**
 * Counts the AWS requests clients send, per service and command, with SDK middleware: the benchmark's
 * "requests per job" and the chaos harness's fault budget read it. Counting is per logical command
 * (`finalizeRequest` step after retries are scheduled would count retries separately; we count at
 * `initialize`, once per `send`).
 */
export class RequestCounter {
  readonly #counts = new Map<string, number>();

  /** Adds the counting middleware to every client of `clients`. */
  attach(clients: AwsClients): this {
    this.#add(clients.sqs.middlewareStack, 'SQS');
    this.#add(clients.ddb.middlewareStack, 'DynamoDB');
    return this;
  }

  #add<I extends object, O extends object>(stack: MiddlewareStack<I, O>, service: string): void {
    const middleware: InitializeMiddleware<I, O> = (next, context) => async (args) => {
      const key = `${service}.${String(context.commandName ?? 'unknown').replace(/Command$/, '')}`;
      this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
      return next(args);
    };
    stack.add(middleware, { step: 'initialize', name: `leaseqRequestCounter${service}`, override: true });
  }

  /** Requests of one service (`DynamoDB`, `SQS`), optionally of one command (`UpdateItem`). */
  count(service: 'SQS' | 'DynamoDB', command?: string): number {
    let n = 0;
    for (const [key, value] of this.#counts) {
      if (command ? key === `${service}.${command}` : key.startsWith(`${service}.`)) n += value;
    }
    return n;
  }

  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.#counts].sort(([a], [b]) => a.localeCompare(b)));
  }

  reset(): void {
    this.#counts.clear();
  }
}
