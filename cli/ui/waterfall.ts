import { esc, human, iso } from './html.ts';
import type { UiSpan } from './spans.ts';

/** A job's spans as an inline SVG waterfall: one bar per span, indented by depth, on one time axis. */
export function waterfall(unordered: readonly UiSpan[], received: number): string {
  if (unordered.length === 0) {
    return `<p class="muted">No spans of this job in memory (${received} received since the start). Start the workers with the OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_HEADERS that leaseq ui printed to see them.</p>`;
  }
  const spans = treeOrder(unordered);
  const start = Math.min(...spans.map((s) => s.start));
  const end = Math.max(...spans.map((s) => s.end));
  const total = Math.max(end - start, 1);
  const depthOf = new Map<string, number>();
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const depth = (s: UiSpan, guard = 0): number => {
    const known = depthOf.get(s.spanId);
    if (known !== undefined) return known;
    const parent = s.parentSpanId ? byId.get(s.parentSpanId) : undefined;
    const d = parent && guard < 20 ? depth(parent, guard + 1) + 1 : 0;
    depthOf.set(s.spanId, d);
    return d;
  };
  const label = 300;
  const width = 420;
  const row = 22;
  const bars = spans
    .map((s, i) => {
      const x = label + (width * (s.start - start)) / total;
      const w = Math.max(2, (width * (s.end - s.start)) / total);
      const y = i * row + 4;
      const colour = s.status === 'error' ? '#b3261e' : s.outcome === 'retry' ? '#8a6100' : '#0b57d0';
      const name = `${'  '.repeat(Math.min(depth(s), 6))}${s.name}`;
      return `<g class="span"><title>${esc(`${s.name} (${s.service}): ${(s.end - s.start).toFixed(1)} ms${s.outcome ? `, ${s.outcome}` : ''}`)}</title><text x="${4 + Math.min(depth(s), 6) * 12}" y="${y + 13}">${esc(name.trim().slice(0, 40))}</text><rect x="${x.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${row - 8}" fill="${colour}"></rect><text x="${Math.min(x + w + 4, label + width + 4).toFixed(1)}" y="${y + 13}">${esc(`${(s.end - s.start).toFixed(1)} ms${s.outcome ? ` · ${s.outcome}` : ''}`)}</text></g>`;
    })
    .join('');
  const height = spans.length * row + 8;
  return `<svg id="waterfall" role="img" aria-label="${spans.length} spans of this job over ${esc(human(total))}" width="${label + width + 180}" height="${height}" viewBox="0 0 ${label + width + 180} ${height}">${bars}</svg>
<p class="muted">${spans.length} spans from ${esc(iso(start))}, over ${esc(human(total))}; red: failed, amber: released for a retry.</p>`;
}

/**
 * Spans depth first, each under its parent, siblings by start. Start order alone is not enough: a child
 * can start a fraction of a millisecond before its parent (clocks read apart), and was then drawn above
 * it, indented under the span before.
 */
function treeOrder(spans: readonly UiSpan[]): UiSpan[] {
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map<string | undefined, UiSpan[]>();
  for (const s of [...spans].sort((a, b) => a.start - b.start)) {
    const parent =
      s.parentSpanId && ids.has(s.parentSpanId) && s.parentSpanId !== s.spanId ? s.parentSpanId : undefined;
    children.set(parent, [...(children.get(parent) ?? []), s]);
  }
  const out: UiSpan[] = [];
  const seen = new Set<string>();
  const visit = (s: UiSpan) => {
    if (seen.has(s.spanId)) return;
    seen.add(s.spanId);
    out.push(s);
    for (const child of children.get(s.spanId) ?? []) visit(child);
  };
  for (const root of children.get(undefined) ?? []) visit(root);
  // Spans in a parent cycle (posted by anyone on the machine) have no root: kept, by start.
  for (const s of spans) visit(s);
  return out;
}
