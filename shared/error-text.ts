// The one text leaseq stores or emits for an error (docs/security.md, "What leaves the process"): the
// deployment's redaction, the cap with its marker, and text valid for SQS attributes and DynamoDB. Beside
// errors.ts on the ground floor: it depends on nothing.

/**
 * The most characters of error text leaseq stores or emits (the job item's `lastError`, a dead letter's
 * `errorMessage` attribute, the `error` field of a log line, a span's status and exception event). Longer
 * text is cut and ends with {@link truncationMarker}. docs/security.md, "What leaves the process".
 */
export const ERROR_TEXT_MAX = 1000;

/** What a deployment's `redactError` hook returns instead of the text when the hook itself throws. */
export const REDACT_ERROR_THREW = '[error text withheld: redactError threw]';

/**
 * A deployment's hook over every error text before leaseq stores or emits it: `text` is the error's
 * `Name: message` (uncapped), `error` the thrown value; returns the text to use (masked, shortened, ...).
 * It should not throw; if it does, {@link REDACT_ERROR_THREW} is used instead. Runs before the cap.
 */
export type RedactError = (text: string, error: unknown) => string;

/** The marker that ends a cut text: how long the text was. */
export function truncationMarker(originalLength: number): string {
  return `… [truncated: ${originalLength} characters]`;
}

// Characters SQS message attributes refuse (and DynamoDB, as UTF-8, cannot hold): C0 controls but tab,
// LF and CR; lone surrogates; U+FFFE and U+FFFF. Allowed: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD
// #x10000-#x10FFFF.
const REFUSED =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters being replaced
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** `text` with every character SQS attributes refuse replaced by U+FFFD (same length). */
export function validText(text: string): string {
  return text.replace(REFUSED, '\uFFFD');
}

/**
 * `text` cut to at most `max` characters (UTF-16 code units), ending with {@link truncationMarker} when
 * cut; never splits a surrogate pair.
 */
export function capText(text: string, max: number = ERROR_TEXT_MAX): string {
  if (text.length <= max) return text;
  const marker = truncationMarker(text.length);
  let keep = Math.max(0, max - marker.length);
  const last = text.charCodeAt(keep - 1);
  if (keep > 0 && last >= 0xd800 && last <= 0xdbff) keep -= 1;
  return `${text.slice(0, keep)}${marker}`.slice(0, max);
}

/** `Name: message` of an Error, else the value as a string (a value whose toString throws included). */
function rawText(error: unknown): string {
  try {
    if (error instanceof Error) return `${error.name}: ${error.message}`;
    return String(error);
  } catch {
    return `[${typeof error} that cannot be printed]`;
  }
}

/**
 * The one text leaseq stores or emits for a thrown value: the deployment's `redact` hook applied to
 * `Name: message` (a hook that throws or returns a non-string gives {@link REDACT_ERROR_THREW}), then
 * capped at `max` ({@link ERROR_TEXT_MAX}), then made valid for SQS attributes and DynamoDB (no lone
 * surrogates or C0 controls). No stack, no cause, no payload.
 */
export function errorText(error: unknown, redact?: RedactError, max: number = ERROR_TEXT_MAX): string {
  let text = rawText(error);
  if (redact) {
    try {
      const redacted: unknown = redact(text, error);
      text = typeof redacted === 'string' ? redacted : REDACT_ERROR_THREW;
    } catch {
      text = REDACT_ERROR_THREW;
    }
  }
  return validText(capText(text, max));
}

/** Any already-made text made storable: capped and valid ({@link errorText} without the hook). */
export function storableText(text: string, max: number = ERROR_TEXT_MAX): string {
  return validText(capText(text, max));
}

/**
 * A short, log-safe description of any thrown value: `Name: message`, capped at {@link ERROR_TEXT_MAX}
 * and valid text (no stack, no payload). Not redacted: where the worker's settings are known, the
 * pipeline uses `Settings.errorText` ({@link errorText} with the deployment's `redactError`).
 */
export function describe(error: unknown): string {
  return errorText(error);
}

/** The most characters of an error's class name as leaseq stores or emits it. */
export const ERROR_CLASS_MAX = 256;

/**
 * The class name an error reports in dead-letter attributes, `lastErrorClass`, logs, span attributes:
 * `error.name` capped at {@link ERROR_CLASS_MAX} and valid text. Not redacted: names carry no data.
 */
export function errorClass(error: unknown): string {
  if (error instanceof Error) return storableText(String(error.name), ERROR_CLASS_MAX);
  return typeof error;
}
