/**
 * The part of the Standard Schema v1 interface (https://standardschema.dev) leaseq relies on. zod >= 3.24,
 * valibot and arktype schemas all carry it, so a job's payload schema can come from any of them and from
 * a different copy of the library than leaseq's own.
 */
export interface PayloadSchema<Output = unknown> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => SchemaResult<Output> | Promise<SchemaResult<Output>>;
    readonly types?: { readonly input: unknown; readonly output: Output } | undefined;
  };
}

type SchemaResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: readonly SchemaIssue[] };

interface SchemaIssue {
  readonly message: string;
  readonly path?: readonly (PropertyKey | { readonly key: PropertyKey })[] | undefined;
}

/** The payload type a schema produces. */
export type PayloadOf<S> = S extends PayloadSchema<infer O> ? O : never;

/**
 * The payload type a schema accepts (Standard Schema's `types.input`: what a producer sends, before
 * defaults and transforms); unknown for a schema that does not declare it.
 */
export type PayloadInputOf<S> = S extends { readonly '~standard': { readonly types?: infer T } }
  ? NonNullable<T> extends { readonly input: infer I }
    ? I
    : unknown
  : unknown;

/** Outcome of {@link validatePayload}: the parsed value, or the first problem as one line. */
export type PayloadCheck<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly problem: string };

/** Validates `value` with any Standard Schema; the problem names the path (`payload.amount: ...`). */
export async function validatePayload<T>(schema: PayloadSchema<T>, value: unknown): Promise<PayloadCheck<T>> {
  return toCheck(await schema['~standard'].validate(value));
}

/**
 * The same check where an answer is needed at once (a producer validating before it sends): undefined
 * when the payload is fine or the schema only validates asynchronously (the worker checks it anyway).
 */
export function payloadProblem(schema: PayloadSchema, value: unknown): string | undefined {
  const result = schema['~standard'].validate(value);
  if (result instanceof Promise) return undefined;
  const check = toCheck(result);
  return check.ok ? undefined : check.problem;
}

function toCheck<T>(result: SchemaResult<T>): PayloadCheck<T> {
  if (result.issues === undefined) return { ok: true, value: result.value };
  const issue = result.issues[0];
  const path = (issue?.path ?? []).map((p) => String(typeof p === 'object' ? p.key : p));
  return { ok: false, problem: `${['payload', ...path].join('.')}: ${issue?.message ?? 'invalid payload'}` };
}

/** True when `value` looks like a Standard Schema (checked where users hand one in). */
export function isPayloadSchema(value: unknown): value is PayloadSchema {
  if (typeof value !== 'object' && typeof value !== 'function') return false;
  const std = (value as { '~standard'?: { version?: unknown; validate?: unknown } } | null)?.['~standard'];
  return std?.version === 1 && typeof std.validate === 'function';
}
