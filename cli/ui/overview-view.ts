/**
 * The overview's HTML, drawn from one snapshot's figures: the tiles, the job status line, the leases,
 * named leases and workers. The page and each refresh (`/api/overview`) use the same functions, so what
 * the page first shows and what a refresh puts in its place are the same reads drawn the same way.
 */
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { jobLink, leaseLeft } from './components.ts';
import { esc } from './html.ts';
import { type Figure, type OverviewFigures, sampleNote } from './overview-figures.ts';

/** The most lease rows a page lists (the tiles count them all). */
const LEASE_ROWS = 100;

/** A figure as a tile shows it: `12`, `≥ 12` for a lower bound, `–` when its read failed. */
export function figureText(f: Figure | null | undefined): string | null {
  return f == null ? null : `${f.atLeast ? '≥ ' : ''}${f.n}`;
}

/** The tiles by element id: their label and unit, and the text of each (null: its read failed). */
export function tiles(f: OverviewFigures): { id: string; label: string; text: string | null }[] {
  const n = (v: number | undefined) => (v === undefined ? null : String(v));
  return [
    { id: 'c-visible', label: 'jobs visible (messages)', text: n(f.queue?.visible) },
    { id: 'c-inflight', label: 'jobs in flight (messages)', text: n(f.queue?.inFlight) },
    { id: 'c-delayed', label: 'jobs delayed (messages)', text: n(f.queue?.delayed) },
    { id: 'c-dlq', label: 'dead letters (messages)', text: n(f.dlq?.depth) },
    { id: 'c-live', label: 'live leases (jobs)', text: figureText(f.jobs?.live) },
    { id: 'c-stuck', label: 'stuck (jobs)', text: figureText(f.jobs?.stuck) },
    { id: 'c-retry', label: 'waiting for a retry (jobs)', text: figureText(f.jobs?.retryWait) },
    { id: 'c-dead', label: 'dead (jobs)', text: figureText(f.jobs?.dead) },
  ];
}

export function tilesHtml(f: OverviewFigures): string {
  const card = (id: string, label: string, value: string) =>
    `<div class="card"><div class="n" id="${id}">${esc(value)}</div><div class="muted">${esc(label)}</div></div>`;
  return `<div class="cards">${[
    ...tiles(f).map((t) => card(t.id, t.label, t.text ?? '–')),
    card('c-rate', 'completed / s (jobs per second)', '–'),
  ].join('')}</div>`;
}

/** The fragments a refresh replaces, by element id; null where the read failed (the page keeps the last). */
export function fragments(f: OverviewFigures): Record<string, string | null> {
  return {
    'o-statuses': f.jobs ? statusesHtml(f) : null,
    'o-leases': f.leases ? leasesHtml(f) : null,
    'o-named': f.named ? namedHtml(f) : null,
    'o-workers': f.jobs ? workersHtml(f) : null,
  };
}

function statusesHtml(f: OverviewFigures): string {
  const summary = f.jobs?.summary;
  const note = sampleNote(f);
  if (summary) {
    return `<p>${Object.values(JobStatus)
      .map((s) => `${esc(s)}: <strong>${summary.byStatus[s]}</strong>`)
      .join(' · ')} (${summary.total} job items)</p>`;
  }
  return note ? `<p class="muted">${esc(note)}</p>` : '';
}

function leasesHtml(f: OverviewFigures): string {
  if (!f.leases) return '<p class="muted">Leases unavailable (see above).</p>';
  if (f.leases.length === 0) {
    return `<p class="muted">${f.jobs?.complete ? 'No job holds a lease.' : 'No lease among the jobs read.'}</p>`;
  }
  const rows = f.leases
    .slice(0, LEASE_ROWS)
    .map(
      (l) =>
        `<tr><td>${jobLink(l.dedupKey)}</td><td>${esc(l.type ?? '')}</td><td>${esc(l.owner ?? '')}</td><td class="num">${esc(l.attempts)}</td><td>${leaseLeft(l.remainingMs)}</td><td>${l.stuck ? `<span class="badge bad">${esc(l.stuck)}</span>` : '<span class="badge good">live</span>'}</td></tr>`,
    )
    .join('');
  const more =
    f.leases.length > LEASE_ROWS ? `<p class="muted">First ${LEASE_ROWS} of ${f.leases.length}.</p>` : '';
  return `<table><caption class="muted">job leases, soonest end first</caption><thead><tr><th>job</th><th>type</th><th>worker</th><th class="num">attempts</th><th>lease</th><th>state</th></tr></thead><tbody>${rows}</tbody></table>${more}`;
}

function namedHtml(f: OverviewFigures): string {
  const named = f.named;
  if (!named || named.abandoned === 0) return '';
  const n = `${named.complete ? '' : '≥ '}${named.abandoned}`;
  return `<p><span class="badge warn">${n} abandoned named lease${named.abandoned === 1 ? '' : 's'}</span> ${named.abandonedKeys.map((k) => esc(k)).join(', ')}</p>`;
}

function workersHtml(f: OverviewFigures): string {
  const summary = f.jobs?.summary;
  if (!summary) {
    return f.jobs
      ? '<p class="muted">Jobs completed per worker need the whole jobs table, more than one refresh reads (leaseq status counts them).</p>'
      : '<p class="muted">Workers unavailable (see above).</p>';
  }
  const completed = summary.completedByWorker;
  if (completed.length === 0) return '<p class="muted">No completed jobs yet.</p>';
  const total = completed.reduce((s, w) => s + w.completed, 0);
  return `<table><thead><tr><th>worker</th><th class="num">jobs completed</th><th class="num">share</th></tr></thead><tbody>${completed
    .map(
      (w) =>
        `<tr><td>${esc(w.worker)}</td><td class="num">${w.completed}</td><td class="num">${((100 * w.completed) / total).toFixed(0)} %</td></tr>`,
    )
    .join('')}</tbody></table>`;
}

/** The chart's frame; chart-script.ts draws into it. */
export const CHART_HTML = `<h2>Since this page opened</h2>
<div class="legend" aria-hidden="true"><span><i class="sw" style="background:#0b57d0"></i>visible</span><span><i class="sw" style="background:#7a3fb0"></i>in flight</span><span><i class="sw" style="background:#8a6100"></i>delayed</span><span><i class="sw" style="background:#b3261e"></i>dead letters</span><span class="muted">(messages, left axis)</span><span><i class="sw" style="background:#1e7d3a"></i>completed / s</span><span class="muted">(jobs per second, right axis)</span></div>
<svg id="chart" role="img" aria-label="queue depth and DLQ depth in messages, and completed jobs per second, over the time this page has been open (UTC)" width="760" height="220" viewBox="0 0 760 220"></svg>
<p class="muted" id="chart-note" role="status">Refreshing every 2 s.</p>`;
