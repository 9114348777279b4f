/**
 * Safe text for a terminal. Whatever the CLI prints may carry text a producer wrote (dedup keys, types,
 * payloads, error messages, raw bodies), and a terminal obeys control characters in it: ESC sequences
 * retitle the window, move the cursor, erase lines or clear the screen; bidi overrides reorder what the
 * operator reads. Every human-readable line the CLI prints goes through {@link safeText} or
 * {@link safeLines}, every `--json` document through {@link safeJson}.
 *
 * The rule, one for all output: each of these characters is replaced by its JSON-style escape `\uXXXX`
 * (four lower-case hex digits, so ESC prints as `\u001b`, BEL as `\u0007`, U+202E as `\u202e`):
 * - C0 controls U+0000-U+001F (tab, CR and newline too; {@link safeLines} keeps `\n`),
 * - DEL U+007F and the C1 controls U+0080-U+009F (U+009B is a one-byte CSI on some terminals),
 * - the line and paragraph separators U+2028, U+2029,
 * - the bidi embeddings, overrides and isolates U+202A-U+202E, U+2066-U+2069, and the bidi marks
 *   U+200E, U+200F, U+061C (no override, but an RLM before `10 - 5` in a left-to-right line shows `5 - 10`).
 * Everything else (accents, CJK, emoji, other symbols) is printed as it is. A backslash is not escaped:
 * a producer can write the six characters `\u001b` literally, and they read the same; they do nothing.
 * Pure, no imports.
 */

/** Whether the UTF-16 code unit `code` must never reach a terminal raw. */
function isUnsafe(code: number): boolean {
  return (
    code < 0x20 ||
    (code >= 0x7f && code <= 0x9f) ||
    code === 0x2028 ||
    code === 0x2029 ||
    (code >= 0x202a && code <= 0x202e) ||
    (code >= 0x2066 && code <= 0x2069) ||
    code === 0x200e ||
    code === 0x200f ||
    code === 0x061c
  );
}

function escapeUnit(code: number): string {
  return `\\u${code.toString(16).padStart(4, '0')}`;
}

function escapeWhere(text: string, unsafe: (code: number) => boolean): string {
  let out = '';
  let from = 0;
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (!unsafe(code)) continue;
    out += text.slice(from, i) + escapeUnit(code);
    from = i + 1;
  }
  return from === 0 ? text : out + text.slice(from);
}

/** One value for a human line: every control, separator and bidi character escaped, `\n` too. */
export function safeText(text: string): string {
  return escapeWhere(text, isUnsafe);
}

/**
 * A block the CLI lays out over several lines itself: like {@link safeText}, but `\n` stays a newline.
 * For values, prefer {@link safeText}: a producer's newline could fake a line of the CLI's own.
 */
export function safeLines(text: string): string {
  return escapeWhere(text, (code) => code !== 0x0a && isUnsafe(code));
}

/**
 * `JSON.stringify(value, null, space)` that a terminal can print: JSON.stringify escapes C0 inside
 * strings already; this also escapes DEL, C1, U+2028/U+2029 and the bidi controls as `\uXXXX`. Those
 * characters occur only inside JSON strings, so the output parses back to the same value.
 */
export function safeJson(value: unknown, space?: number): string {
  const json = JSON.stringify(value, null, space);
  // JSON.stringify gives undefined for undefined, functions and symbols.
  return json === undefined ? 'null' : escapeWhere(json, (code) => code >= 0x20 && isUnsafe(code));
}
