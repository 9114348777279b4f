import type { z } from 'zod';
import type { JobContext } from './job-context.ts';
import type { Effect } from './job-store.ts';

/** What a job hands back: DynamoDB effects committed atomically with its completion, and a result. */
export interface JobOutcome {
  /** Writes committed in the same transaction that marks the job COMPLETED (fenced by the token). */
  readonly effects?: readonly Effect[];
  /** Stored on the job item (keep it small). */
  readonly result?: unknown;
}

/** One job type: its payload schema and the function that runs it. */
export interface JobDefinition<P = unknown> {
  readonly type: string;
  /** Validates the payload; a mismatch is a permanent error (dead-lettered at once). */
  readonly payload: z.ZodType<P>;
  /**
   * Runs the job. It may be called again in the same attempt when its final effects hit an optimistic
   * conflict, and again on a later attempt: steps already checkpointed are skipped by `ctx.step`.
   */
  run(ctx: JobContext, payload: P): Promise<JobOutcome | undefined>;
}

/** The job types a worker knows. An unregistered `type` is a permanent error. */
export class JobRegistry {
  readonly #definitions = new Map<string, JobDefinition>();

  register<P>(definition: JobDefinition<P>): this {
    if (this.#definitions.has(definition.type)) {
      throw new Error(`job type ${definition.type} is already registered`);
    }
    this.#definitions.set(definition.type, definition as unknown as JobDefinition);
    return this;
  }

  get(type: string): JobDefinition | undefined {
    return this.#definitions.get(type);
  }

  has(type: string): boolean {
    return this.#definitions.has(type);
  }

  types(): string[] {
    return [...this.#definitions.keys()];
  }
}
