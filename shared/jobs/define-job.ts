import type { AnyJobDefinition, JobDefinition } from '../core/model/job-definition.ts';
import { JobRegistry } from '../core/model/registry.ts';
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
 * The definition is validated when a job set is built from it ({@link defineJobs}).
 */
export function defineJob<P, T extends TableMap = Record<never, never>>(
  definition: JobDefinition<P, T>,
): JobDefinition<P, T> {
  return Object.freeze({ ...definition });
}

/**
 * The job module's one list of job types: what the worker runs, what `leaseq send` checks, and what the
 * CDK construct creates tables for and grants access to.
 * @throws ConfigError for a duplicate type, a malformed definition, or one table declared two ways.
 */
export function defineJobs(jobs: readonly AnyJobDefinition[]): JobRegistry {
  return JobRegistry.of(jobs);
}
