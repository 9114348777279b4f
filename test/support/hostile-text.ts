/**
 * What a hostile producer writes to reach an operator's terminal (security issue, item 2), and the check
 * that printed bytes carry none of it raw. Shared by the unit and integration tests of the CLI renderers.
 */

/** Retitles the terminal window (OSC 0 ... BEL), moves the cursor up a line, erases that line. */
export const RETITLE = '\x1b]0;pwned\x07\x1b[1A\x1b[2K';
/** Clears the screen, homes the cursor, then fakes a reassuring message. */
export const CLEAR_SCREEN = '\x1b[2J\x1b[H ALL JOBS OK';
/** The same through C1 (U+009B is CSI on some terminals), DEL, and bidi override / isolate controls. */
export const C1_AND_BIDI = '\u009b2J\u007f \u202eevil\u202c \u2066iso\u2069 \u2028sep';

/** Every character no printed byte may carry raw; `\n` is allowed only when `newlines` is true. */
export function rawControls(text: string, newlines = true): string[] {
  const found: string[] = [];
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    const unsafe =
      (code < 0x20 && !(newlines && code === 0x0a)) ||
      (code >= 0x7f && code <= 0x9f) ||
      code === 0x2028 ||
      code === 0x2029 ||
      (code >= 0x202a && code <= 0x202e) ||
      (code >= 0x2066 && code <= 0x2069);
    if (unsafe) found.push(`U+${code.toString(16).padStart(4, '0')}`);
  }
  return found;
}

/**
 * `JSON.stringify(value)` with every non-ASCII character written as a `\uXXXX` escape: a pure-ASCII
 * body whose control characters appear only once it is parsed.
 */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
