/**
 * The deployment's redaction hook, as the inspector takes it: the job module's export `redactError`, the
 * function a deployment passes to `createWorkerHandler` (docs/security.md). The inspector applies it to
 * every payload, result and checkpoint it shows (the hook gets the indented JSON text, and no error).
 */
import { pathToFileURL } from 'node:url';
import { ConfigError } from '../../shared/errors.ts';
import type { RedactText } from '../../shared/ops/payload-view.ts';

/** The job module's `redactError` as a text redaction; undefined when it exports none. */
export async function loadRedactHook(path: string): Promise<RedactText | undefined> {
  // Loaded already by loadJobModule: this import is the cached module.
  const exports = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  const nested = exports.default as Record<string, unknown> | undefined;
  const hook = exports.redactError ?? (typeof nested === 'object' ? nested?.redactError : undefined);
  if (hook === undefined) return undefined;
  if (typeof hook !== 'function') {
    throw new ConfigError(`job module ${path}: redactError must be a function, received ${typeof hook}`);
  }
  return (text) => (hook as (text: string, error: unknown) => unknown)(text, undefined) as string;
}
