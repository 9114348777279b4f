import type { AnyJobDefinition, JobDefinition } from '../core/model/job-definition.ts';
import { JobRegistry, type JobSetOptions } from '../core/model/registry.ts';
import type { PayloadSchema } from '../core/model/standard-schema.ts';
import type { TableMap } from '../core/model/table.ts';

/**
 * Declares one job type. The payload schema (any Standard Schema: zod, valibot, ...) types `run`'s
 * payload; `tables` names the application tables its effects write, typed as `ctx.tables.<key>`.
 *
 * ```ts
 * export const sendEmail = defineJob({
 *   type: 'email.send',
 *   payload: z.object({ to: z.string().email(), template: z.string() }),
 *   tables: { emailLog },
 *   async run(ctx, p) {
 *     const messageId = await ctx.step('deliver', async () => ({ data: await mailer.send(p, ctx.idempotencyKey('deliver')) }));
 *     return { effects: [ctx.tables.emailLog.put({ id: ctx.dedupKey, to: p.to, messageId })] };
 *   },
 * });
 * ```
 *
 * The definition is validated when a job set is built from it ({@link defineJobs}). Its type keeps the
 * literal `type` (`K`) and the schema's own type (`S`), so a producer given the job set checks each job's
 * `type` and `payload` at compile time (docs/jobs.md, "Sending jobs").
 */
export function defineJob<
  P,
  T extends TableMap = Record<never, never>,
  const K extends string = string,
  S extends PayloadSchema<P> = PayloadSchema<P>,
>(definition: JobDefinition<P, T> & { readonly type: K; readonly payload: S }): DefinedJob<P, T, K, S> {
  return Object.freeze({ ...definition });
}

/** A job definition as {@link defineJob} returns it: its `type` literal and payload schema kept in the type. */
export type DefinedJob<
  P = unknown,
  T extends TableMap = TableMap,
  K extends string = string,
  S extends PayloadSchema<P> = PayloadSchema<P>,
> = JobDefinition<P, T> & { readonly type: K; readonly payload: S };

/**
 * The job module's one list of job types: what the worker runs, what `leaseq send` checks, and what the
 * CDK construct creates tables for and grants access to. `options.plainBodies` lets the worker read
 * messages that are not envelopes (docs/envelope.md, "Plain bodies").
 * @throws ConfigError for a duplicate type, a malformed definition, one table declared two ways, or bad plainBodies.
 */
export function defineJobs<J extends readonly AnyJobDefinition[]>(
  jobs: J,
  options: JobSetOptions = {},
): JobRegistry<J[number]> {
  return JobRegistry.of(jobs, options);
}
