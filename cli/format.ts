import { InvalidArgumentError } from 'commander';
import { parseRate } from '../shared/producer/pacer.ts';
import { safeJson, safeLines, safeText } from './safe-text.ts';

// ---- Output -------------------------------------------------------------------------------------------

// Every line printed here goes through safe-text.ts: renderers escape each value they lay out (so a
// producer's newline cannot fake a line), and print/note/printJson escape once more whatever they are
// given, keeping only the newlines of the layout (./safe-text.ts says which characters and how).

/** Writes one line (or block) to stdout: tables for people, JSON for scripts. */
export function print(text: string): void {
  process.stdout.write(`${safeLines(text)}\n`);
}

/** Machine-readable output: one JSON document on stdout, nothing else there (C1 and bidi escaped too). */
export function printJson(value: unknown): void {
  process.stdout.write(`${safeJson(value, 2)}\n`);
}

/** Progress and notes go to stderr, so stdout stays clean for `--json`. */
export function note(line: string): void {
  process.stderr.write(`leaseq: ${safeLines(line)}\n`);
}

let stdoutGuarded = false;

/**
 * Makes a closed stdout a clean exit: `leaseq dlq show ... | head -1` closes the pipe after one line and
 * the next write fails with EPIPE, which Node would report as an unhandled error with a stack trace.
 * The reader has what it wanted, so the CLI exits with its exit code so far (0 unless a command set one).
 * main.ts calls it once for every command (some write to stdout directly); calling it again does nothing.
 */
export function exitCleanlyOnClosedStdout(): void {
  if (stdoutGuarded) return;
  stdoutGuarded = true;
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
  });
}

/** On a terminal, cuts each line to its width (a table whose last column is long); elsewhere, as is. */
export function fitToTerminal(text: string): string {
  const width = process.stdout.isTTY ? process.stdout.columns : undefined;
  if (!width) return text;
  return text
    .split('\n')
    .map((line) => truncate(line, width))
    .join('\n');
}

/**
 * The first `maxBytes` bytes of `text` (UTF-8; never half a character), and how many bytes were left out
 * of how many: 0 left out when it fits.
 */
export function cutBytes(
  text: string,
  maxBytes: number,
): { text: string; shownBytes: number; totalBytes: number } {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return { text, shownBytes: bytes.length, totalBytes: bytes.length };
  let end = maxBytes;
  // Back off continuation bytes (10xxxxxx) so the cut lands on a character boundary.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end -= 1;
  return { text: bytes.subarray(0, end).toString('utf8'), shownBytes: end, totalBytes: bytes.length };
}

export interface Column {
  readonly header: string;
  /** @default 'left' */
  readonly align?: 'left' | 'right';
  /** Cells longer than this are cut with an ellipsis. @default 60 */
  readonly max?: number;
}

/**
 * Renders rows as a plain-text table: a header, then one line per row, columns separated by two spaces,
 * no trailing blanks. Cells are cut to their column's `max`; newlines inside a cell become spaces, other
 * control and bidi characters are escaped (safeText).
 */
export function renderTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  const cell = (text: string | undefined, column: Column) =>
    truncate(oneLineCell(text ?? ''), column.max ?? 60);
  const body = rows.map((row) => columns.map((column, i) => cell(row[i], column)));
  const widths = columns.map((column, i) =>
    Math.max(column.header.length, ...body.map((row) => (row[i] as string).length)),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((text, i) => {
        const width = widths[i] ?? 0;
        return columns[i]?.align === 'right' ? text.padStart(width) : text.padEnd(width);
      })
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.header)), ...body.map(line)].join('\n');
}

/**
 * Aligns `label: value` pairs (the detail view of one item). Pairs with an undefined value are left out.
 * Each value is one line: newlines become spaces, other control and bidi characters are escaped.
 */
export function renderFields(fields: readonly (readonly [string, string | undefined])[]): string {
  const shown = fields.filter((f): f is readonly [string, string] => f[1] !== undefined);
  const width = Math.max(0, ...shown.map(([label]) => label.length));
  return shown.map(([label, value]) => `${`${label}:`.padEnd(width + 2)}${oneLineCell(value)}`).join('\n');
}

/** A value on one line, safe to print: newlines folded to a space, then safeText. */
export function oneLineCell(text: string): string {
  return safeText(text.replace(/\s*\n\s*/g, ' '));
}

/** Cuts text to `max` characters, ending in `…` when cut. */
export function truncate(text: string, max: number): string {
  if (max < 1) return '';
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** `Class: message`, without repeating the class when the message already starts with it. */
export function formatErrorText(
  errorClass: string | undefined,
  message: string | undefined,
): string | undefined {
  if (message === undefined) return errorClass;
  if (!errorClass || message.startsWith(`${errorClass}:`)) return message;
  return `${errorClass}: ${message}`;
}

// ---- Time ---------------------------------------------------------------------------------------------

/**
 * A duration for people: `850ms`, `12.3s`, `4m 05s`, `3h 04m`, `2d 03h`. Negative durations are shown
 * by their size (the caller says "ago" or "in").
 */
export function formatDuration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)}ms`;
  if (abs < 60_000) return `${(Math.floor(abs / 100) / 10).toFixed(1)}s`;
  const seconds = Math.floor(abs / 1000);
  const pad = (n: number) => String(n).padStart(2, '0');
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${pad(seconds % 60)}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 24 * 60) return `${Math.floor(minutes / 60)}h ${pad(minutes % 60)}m`;
  const hours = Math.floor(minutes / 60);
  return `${Math.floor(hours / 24)}d ${pad(hours % 24)}h`;
}

/** `in 12.3s` for a future instant, `12.3s ago` for a past one. */
export function formatRelative(epochMs: number, now: number): string {
  const delta = epochMs - now;
  return delta >= 0 ? `in ${formatDuration(delta)}` : `${formatDuration(delta)} ago`;
}

/** A lease end for people: `12.3s left` or `expired 4m 05s ago`. */
export function formatLease(remainingMs: number): string {
  return remainingMs > 0
    ? `${formatDuration(remainingMs)} left`
    : `expired ${formatDuration(remainingMs)} ago`;
}

/**
 * An instant for people: ISO 8601 and how long ago (or until). Accepts epoch ms or an ISO string;
 * undefined or unparseable input gives undefined; a number past what a Date holds is shown as it is.
 */
export function formatInstant(value: number | string | undefined, now: number): string | undefined {
  if (value === undefined) return undefined;
  const ms = typeof value === 'number' ? value : Date.parse(value);
  if (!Number.isFinite(ms)) return typeof value === 'string' ? value : undefined;
  // A Date holds 8.64e15 ms either side of the epoch; past that toISOString throws (a hand-edited item).
  if (Math.abs(ms) > 8.64e15) return `${ms} (not a date)`;
  return `${new Date(ms).toISOString()} (${formatRelative(ms, now)})`;
}

// ---- Flag parsing (commander argument parsers: they throw InvalidArgumentError) ------------------------

/** Parser for an integer flag within [min, max]. */
export function integerArg(min: number, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^[+-]?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(
        max === Number.MAX_SAFE_INTEGER
          ? `expected an integer >= ${min}`
          : `expected an integer from ${min} to ${max}`,
      );
    }
    return n;
  };
}

/** Parser for a share from 0 to 1 (`0.2`, or `20%`). */
export function fractionArg(value: string): number {
  const text = value.trim();
  const n = text.endsWith('%') ? Number(text.slice(0, -1)) / 100 : Number(text);
  if (text === '' || !Number.isFinite(n) || n < 0 || n > 1) {
    throw new InvalidArgumentError('expected a number from 0 to 1 (or a percentage such as 20%)');
  }
  return n;
}

/** Parser for a rate: `50`, `50/s`, `600/min`, `1000/h`; returns messages per second. */
export function rateArg(value: string): number {
  try {
    return parseRate(value);
  } catch {
    throw new InvalidArgumentError('expected a positive rate such as 50, 50/s, 600/min or 1000/h');
  }
}

/** Parser for a duration: `90s`, `10m`, `1h`, `500ms` (a bare number is seconds); returns ms. */
export function durationArg(value: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(value);
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const n = Number(match?.[1]);
  if (!match || !(n > 0)) {
    throw new InvalidArgumentError('expected a positive duration such as 90s, 10m or 1h');
  }
  return Math.round(n * (units[match[2] ?? 's'] ?? 1000));
}

/** Parser for a comma-separated list restricted to `allowed` (duplicates dropped, order kept). */
export function listArg<T extends string>(allowed: readonly T[]): (value: string) => T[] {
  return (value) => {
    const items = value
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    const bad = items.filter((s) => !(allowed as readonly string[]).includes(s));
    if (items.length === 0 || bad.length > 0) {
      throw new InvalidArgumentError(
        `${bad.length > 0 ? `unknown ${bad.join(', ')}; ` : ''}expected a comma-separated list of ${allowed.join(', ')}`,
      );
    }
    return [...new Set(items)] as T[];
  };
}
