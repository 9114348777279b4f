/**
 * The inspector's HTML text: escaping and the formats values are shown in. No front-end build: pages are
 * strings rendered on the server; every value from the store goes through `esc`. The page frame and its
 * stylesheet are in layout.ts.
 */
import { safeLines } from '../safe-text.ts';

/**
 * Escapes text for HTML content and double-quoted attribute values. Controls, separators and bidi
 * overrides and isolates become visible `\uXXXX` first, as the CLI prints them (safe-text.ts): a
 * browser obeys U+202E as a terminal does, and `invoice\u202egnp.exe` would read `invoiceexe.png`.
 * Newlines stay (a `<pre>` body keeps its lines).
 */
export function esc(value: unknown): string {
  return safeLines(String(value ?? ''))
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** A duration as a person reads it: 850 ms, 12.3 s, 4 min, 2.5 h. */
export function human(ms: number): string {
  const a = Math.abs(ms);
  if (a < 1000) return `${Math.round(ms)} ms`;
  if (a < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (a < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  if (a < 172_800_000) return `${(ms / 3_600_000).toFixed(1)} h`;
  return `${(ms / 86_400_000).toFixed(1)} d`;
}

/** The furthest a Date reaches from the epoch (ms); past it `toISOString` throws a RangeError. */
const DATE_LIMIT_MS = 8.64e15;

/**
 * An epoch ms as ISO 8601 (UTC), or a dash: also for a time no Date holds (a span's start is whatever
 * the job's code gave, an item's times are read as stored), which would throw and fail the whole page.
 */
export function iso(ms: number | undefined): string {
  return ms === undefined || !Number.isFinite(ms) || Math.abs(ms) > DATE_LIMIT_MS
    ? '-'
    : new Date(ms).toISOString();
}
