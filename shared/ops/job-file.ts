import { type JobEnvelope, makeEnvelope, parseEnvelope } from '../core/contract/envelope.ts';
import { JobFileError } from './ops-errors.ts';

export interface ParseJobFileOptions {
  /** Fills `id` and `dedupKey` of entries that give only `type` and `payload`: `<runId>-<n>`. */
  readonly runId: string;
  /** A `type` this returns false for is refused (a typo would otherwise be dead-lettered). */
  readonly isKnownType?: (type: string) => boolean;
  /** Checks a payload for its type; returns a problem to report, or undefined when it is fine. */
  readonly checkPayload?: (type: string, payload: unknown) => string | undefined;
  /** The largest body an entry may make (`leaseq send --max-body-bytes`). @default DEFAULT_MAX_BODY_BYTES */
  readonly maxBodyBytes?: number;
  /** Creation time of entries that are not full envelopes. @default new Date() */
  readonly now?: Date;
}

/**
 * Reads jobs from a JSON array or NDJSON text (one JSON value per line; blank lines skipped). Each entry
 * is either a full envelope (it has `v`) or a job spec `{type, payload, dedupKey?, id?}` that gets
 * wrapped into one. Every entry is validated with `parseEnvelope`; the first bad one throws a
 * {@link JobFileError} naming its line (NDJSON) or entry (array) number, so nothing is sent.
 */
export function parseJobFile(text: string, options: ParseJobFileOptions): JobEnvelope[] {
  // `line` is raw NDJSON text still to parse; `value` is an element of a parsed array.
  const entries: ({ position: number; line: string } | { position: number; value: unknown })[] = [];
  let where: 'line' | 'entry';
  if (text.trimStart().startsWith('[')) {
    where = 'entry';
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw new JobFileError(`not a valid JSON array (${messageOf(error)})`, undefined, error);
    }
    if (!Array.isArray(parsed)) throw new JobFileError('expected a JSON array of jobs');
    parsed.forEach((raw: unknown, i) => {
      entries.push({ position: i + 1, value: raw });
    });
  } else {
    where = 'line';
    text.split(/\r?\n/).forEach((line, i) => {
      if (line.trim() !== '') entries.push({ position: i + 1, line });
    });
  }
  if (entries.length === 0) throw new JobFileError('no jobs found');

  const now = options.now ?? new Date();
  return entries.map((entry) => {
    const position = entry.position;
    const fail = (detail: string, cause?: unknown): never => {
      throw new JobFileError(detail, { where, position }, cause);
    };
    let value: unknown;
    if ('line' in entry) {
      try {
        value = JSON.parse(entry.line);
      } catch (error) {
        return fail(`not JSON (${messageOf(error)})`, error);
      }
    } else {
      value = entry.value;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return fail('expected a JSON object (an envelope, or {type, payload})');
    }
    const body = 'v' in value ? JSON.stringify(value) : wrapSpec(value, position, options.runId, now, fail);
    let envelope: JobEnvelope;
    try {
      envelope = parseEnvelope(body, {
        ...(options.isKnownType ? { isKnownType: options.isKnownType } : {}),
        ...(options.maxBodyBytes === undefined ? {} : { maxBytes: options.maxBodyBytes }),
      });
    } catch (error) {
      return fail(messageOf(error), error);
    }
    const problem = options.checkPayload?.(envelope.type, envelope.payload);
    if (problem) fail(`payload of ${envelope.type}: ${problem}`);
    // A repeated dedup key is allowed: that is how a file asks for a duplicate send.
    return envelope;
  });
}

/** How many entries repeat a dedup key seen earlier in the list. */
export function countRepeatedKeys(jobs: readonly JobEnvelope[]): number {
  return jobs.length - new Set(jobs.map((j) => j.dedupKey)).size;
}

function wrapSpec(
  value: object,
  position: number,
  runId: string,
  now: Date,
  fail: (detail: string) => never,
): string {
  const spec = value as Record<string, unknown>;
  if (typeof spec.type !== 'string') return fail('missing "type" (or "v" for a full envelope)');
  if (!('payload' in spec)) return fail('missing "payload"');
  for (const field of ['dedupKey', 'id'] as const) {
    if (spec[field] !== undefined && typeof spec[field] !== 'string') fail(`"${field}" must be a string`);
  }
  const fallback = `${runId}-${String(position).padStart(6, '0')}`;
  return JSON.stringify(
    makeEnvelope({
      id: (spec.id as string | undefined) ?? (spec.dedupKey as string | undefined) ?? fallback,
      dedupKey: (spec.dedupKey as string | undefined) ?? fallback,
      type: spec.type,
      payload: spec.payload,
      createdAt: now,
    }),
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
