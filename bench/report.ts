/**
 * Reporting helpers shared by the benchmarks (bench/cpu.ts, bench/compare): medians with their
 * min-max spread, percentiles, in-run ratios and plain-text tables. Figures, never assertions.
 */

/** Median of `values` (mean of the two middle values for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/** Smallest and largest of `values`; NaN for none. */
export function minMax(values: readonly number[]): readonly [number, number] {
  if (values.length === 0) return [Number.NaN, Number.NaN];
  return [Math.min(...values), Math.max(...values)];
}

/** Nearest-rank percentile (`p` in 0-100) of `values`; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1] ?? Number.NaN;
}

/** A median with its spread, as summaries store it. */
export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** How many values it summarises. */
  readonly n: number;
}

/** The {@link Spread} of `values`. */
export function spread(values: readonly number[]): Spread {
  const [min, max] = minMax(values);
  return { median: median(values), min, max, n: values.length };
}

/** `12.3 (11.0-13.9)`: a median and its min-max, with `digits` decimals; `-` for no values. */
export function formatSpread(s: Spread, digits = 1): string {
  if (s.n === 0 || !Number.isFinite(s.median)) return '-';
  const f = (n: number) => n.toFixed(digits);
  return s.n === 1 || s.min === s.max ? f(s.median) : `${f(s.median)} (${f(s.min)}-${f(s.max)})`;
}

/** `1.23x`; `-` when either side is missing or zero. */
export function formatRatio(value: number, digits = 2): string {
  return Number.isFinite(value) && value > 0 ? `${value.toFixed(digits)}x` : '-';
}

/**
 * A plain-text table: a header, a rule, the rows. Columns are left-aligned unless `right[i]` is true.
 */
export function renderTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  right: readonly boolean[] = [],
): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]?.length ?? 0)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (right[i] ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}
