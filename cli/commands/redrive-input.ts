/**
 * What a redrive takes from the operator besides its filter: an edit-and-retry payload file (read and
 * checked before anything is touched, then against its job type's schema) and who acts (also for cancel).
 */
import { readFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { DEFAULT_MAX_BODY_BYTES } from '../../shared/core/contract/envelope.ts';
import { payloadProblem } from '../../shared/core/model/standard-schema.ts';
import { hashOfPayload } from '../../shared/core/pipeline/payload-mismatch.ts';
import { OpsError } from '../../shared/ops/ops-errors.ts';
import { note } from '../format.ts';
import { type CliJobs, loadCliJobs } from '../job-module.ts';

/**
 * Reads and checks an edit-and-retry payload file before anything is touched: one job (a dedup key), a
 * readable file, JSON, and not above the body limit on its own. The per-letter check (the whole envelope)
 * is the redrive's.
 */
export function readPayloadFile(file: string, dedupKey: string | undefined): { value: unknown } {
  if (dedupKey === undefined) {
    throw new OpsError('--payload-file corrects one job: pass its --dedup-key too');
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new OpsError(`cannot read --payload-file ${file}: ${(error as Error).message}`);
  }
  const size = Buffer.byteLength(text, 'utf8');
  if (size > DEFAULT_MAX_BODY_BYTES) {
    throw new OpsError(
      `--payload-file ${file} is ${size} bytes, above the ${DEFAULT_MAX_BODY_BYTES} byte body limit; nothing was sent`,
    );
  }
  // An editor's UTF-8 byte order mark is not part of the JSON.
  const json = text.startsWith('\uFEFF') ? text.slice(1) : text;
  try {
    return { value: JSON.parse(json) as unknown };
  } catch (error) {
    // V8's message quotes the text around the fault: a payload's secret would reach the terminal and CI
    // logs. The position alone finds it.
    throw new OpsError(`--payload-file ${file} is not JSON (at ${jsonFaultPosition(error)})`);
  }
}

/** Where JSON.parse stopped, when V8 says (`position N (line L column C)`); never the text around it. */
function jsonFaultPosition(error: unknown): string {
  const at = /position \d+(?: \(line \d+ column \d+\))?/.exec((error as Error).message ?? '');
  return at ? at[0] : 'an unexpected token';
}

/**
 * The check of an edited payload against its job type's schema, from the job module the flags, the
 * environment or package.json name. Without one the payload is checked as JSON only (said on stderr).
 */
export async function schemaCheck(flag: string | undefined): Promise<{
  check?: (type: string, payload: unknown) => string | undefined;
  hash?: (type: string, payload: unknown) => string | undefined;
}> {
  const found = await loadCliJobs(flag);
  if (!found) {
    note(
      "no job module found: the corrected payload is not checked against its type's schema (pass --job-module)",
    );
    return {};
  }
  return {
    check: (type, payload) => payloadCheck(found, type, payload),
    hash: (type, payload) => correctedHash(found, type, payload),
  };
}

/**
 * The payload hash the corrected payload's messages will have (payload-mismatch.ts), stored by the
 * redrive's reset so the edit is not refused as another payload; undefined when its schema is async or
 * the type compares none (the reset then removes the hash, and the next claim stores its message's).
 */
export function correctedHash(found: CliJobs, type: string, payload: unknown): string | undefined {
  const definition = found.jobs.get(type);
  if (!definition) return undefined;
  const parsed = definition.payload['~standard'].validate(payload);
  if (parsed instanceof Promise || parsed.issues !== undefined) return undefined;
  return hashOfPayload(definition, parsed.value);
}

/** What the job module's schema says of `payload` for `type`: `payload.<field>: <why>`, or undefined. */
export function payloadCheck(found: CliJobs, type: string, payload: unknown): string | undefined {
  const schema = found.jobs.get(type)?.payload;
  if (!schema) {
    return `the job module ${found.path} defines no job type ${type} (pass the deployment's --job-module)`;
  }
  return payloadProblem(schema, payload);
}

/** Who acts (a redrive, a cancel), for the job's history: user@host. */
export function operatorIdentity(): string {
  let user = process.env.USER ?? 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid): keep $USER.
  }
  return `${user}@${hostname()}`;
}
