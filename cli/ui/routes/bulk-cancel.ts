/**
 * Cancel by filter, `/jobs/bulk-cancel`: a filter form (type, error text, time window, status), a preview
 * page (the count and the first rows, from the problems index), a confirmation POST that acts on exactly
 * the previewed jobs at the chosen rate in the background, and a run page with its progress, a stop
 * button and the result (what changed, what was refused and why). bulk-cancel.ts in shared/ops does it.
 */
import {
  BULK_DEFAULT_RATE,
  type BulkCancelFilter,
  type BulkCancelPreview,
  type BulkCancelReport,
  bulkCancel,
  checkBulkFilter,
  describeBulkCancel,
  previewBulkCancel,
} from '../../../shared/ops/bulk-cancel.ts';
import { OpsError } from '../../../shared/ops/ops-errors.ts';
import type { ProblemStatusFilter } from '../../../shared/ops/problem-jobs.ts';
import { BulkRuns, PREVIEW_TTL_MS, REFRESH_SCRIPT } from '../bulk-runs.ts';
import { jobLink, problemsOf, statusBadge } from '../components.ts';
import type { UiContext, UiRoute } from '../context.ts';
import { bounded } from '../data.ts';
import { esc, human } from '../html.ts';

/** The time windows the form offers (ms). */
export const WINDOWS: Readonly<Record<string, number>> = {
  '15m': 900_000,
  '1h': 3_600_000,
  '24h': 86_400_000,
  '7d': 604_800_000,
};
/** Rows the preview shows. */
const PREVIEW_ROWS = 20;
/** The fastest rate the page takes: a bulk action is an operator's, not a load test. */
export const BULK_MAX_RATE = 100;
const STATUSES: readonly ProblemStatusFilter[] = [
  'RETRY_WAIT',
  'IN_PROGRESS',
  'stuck',
] as ProblemStatusFilter[];

/** The rate a form gave: jobs per second from 0.1 to BULK_MAX_RATE, else undefined. */
export function formRate(value: unknown): number | undefined {
  const rate = typeof value === 'string' && value.trim() !== '' ? Number(value) : BULK_DEFAULT_RATE;
  return Number.isFinite(rate) && rate >= 0.1 && rate <= BULK_MAX_RATE ? rate : undefined;
}

const option = (value: string, label: string, selected: string | undefined) =>
  `<option value="${esc(value)}"${value === (selected ?? '') ? ' selected' : ''}>${esc(label)}</option>`;

export const bulkCancelRoutes: UiRoute = (app, ui) => {
  const runs = new BulkRuns<BulkCancelPreview, BulkCancelReport>();

  app.get('/jobs/bulk-cancel', async (c) => {
    const q = {
      type: c.req.query('type'),
      error: c.req.query('error'),
      since: c.req.query('since'),
      status: c.req.query('status'),
    };
    const filter: BulkCancelFilter = {
      ...(q.type ? { type: q.type } : {}),
      ...(q.error ? { errorContains: q.error } : {}),
      ...(q.since && WINDOWS[q.since] ? { since: Date.now() - (WINDOWS[q.since] ?? 0) } : {}),
      ...(q.status && STATUSES.includes(q.status as ProblemStatusFilter)
        ? { status: [q.status as ProblemStatusFilter] }
        : {}),
    };
    const form = `<form class="filters" method="get" action="/jobs/bulk-cancel" aria-label="jobs to cancel">
<label for="b-type">type<input id="b-type" name="type" value="${esc(q.type ?? '')}"></label>
<label for="b-error">last error contains<input id="b-error" name="error" value="${esc(q.error ?? '')}"></label>
<label for="b-since">last problem within<select id="b-since" name="since">${option('', 'any time', q.since)}${Object.keys(
      WINDOWS,
    )
      .map((w) => option(w, w, q.since))
      .join('')}</select></label>
<label for="b-status">status<select id="b-status" name="status">${option('', 'RETRY_WAIT or IN_PROGRESS', q.status)}${STATUSES.map((s) => option(s, s, q.status)).join('')}</select></label>
<button type="submit" id="preview">Preview</button></form>`;
    const intro = `<h1>Cancel by filter</h1><p class="muted">Finds unfinished jobs in the problems index (every job waiting for a retry, and running jobs that had a problem before; a first attempt running now is not there: cancel it from its page). Nothing changes until you confirm.</p>${form}`;
    if (!q.type && !q.error && !q.since) return c.html(ui.frame('Cancel by filter', intro));
    try {
      checkBulkFilter(filter);
    } catch (error) {
      if (!(error instanceof OpsError)) throw error;
      return c.html(ui.frame('Cancel by filter', `${intro}<p role="alert">${esc(error.message)}</p>`), 400);
    }
    const found = await bounded('DynamoDB', 'preview of the cancel', ui.actionMs, () =>
      previewBulkCancel(ui.target, filter),
    );
    if (!found.ok) return c.html(ui.frame('Cancel by filter', intro, { problems: problemsOf(found) }));
    return c.html(
      ui.frame('Cancel by filter', `${intro}${previewHtml(ui, found.value, runs.keepPreview(found.value))}`),
    );
  });

  app.post('/jobs/bulk-cancel', async (c) => {
    const refused = ui.refuseIfReadOnly(c);
    if (refused) return refused;
    const form = await c.req.parseBody();
    const rate = formRate(form.rate);
    if (rate === undefined) {
      return c.html(
        ui.frame(
          'Cancel by filter',
          `<h1>Cancel by filter</h1><p role="alert">The rate must be a number of jobs per second from 0.1 to ${BULK_MAX_RATE}; nothing was changed.</p><p><a href="/jobs/bulk-cancel">Back</a></p>`,
        ),
        400,
      );
    }
    const preview =
      typeof form.preview === 'string' && form.confirmed === 'yes'
        ? runs.takePreview(form.preview)
        : undefined;
    if (!preview) {
      return c.html(
        ui.frame(
          'Cancel by filter',
          `<h1>Cancel by filter</h1><p role="alert">This preview was used already or is older than ${PREVIEW_TTL_MS / 60_000} minutes; nothing was changed. Preview again.</p><p><a href="/jobs/bulk-cancel">Back</a></p>`,
        ),
        409,
      );
    }
    const reason = typeof form.reason === 'string' && form.reason.trim() ? form.reason.trim() : undefined;
    const n = preview.jobs.length;
    const run = runs.start(
      { title: `cancel of ${n} job${n === 1 ? '' : 's'}`, by: ui.actor, total: n },
      async (signal, progress) => {
        const report = await bulkCancel(ui.target, preview, {
          by: ui.actor,
          ratePerSecond: rate,
          signal,
          ...(reason ? { reason } : {}),
          onProgress: (item) => progress(`${item.outcome} ${item.dedupKey}`),
        });
        ui.log(`cancel by filter from the inspector: ${describeBulkCancel(report)}`);
        return report;
      },
    );
    return c.redirect(`/jobs/bulk-cancel/runs/${run.id}`, 303);
  });

  app.get('/jobs/bulk-cancel/runs/:id', (c) => {
    const run = runs.run(c.req.param('id'));
    if (!run)
      return c.html(
        ui.frame(
          'Cancel by filter',
          '<h1>No such run</h1><p>It ended before this inspector started, or was forgotten.</p>',
        ),
        404,
      );
    const head = `<h1>${esc(run.title[0]?.toUpperCase() + run.title.slice(1))}</h1><p class="muted">By ${esc(run.by)}, started ${esc(human(Date.now() - run.startedAt))} ago.</p>`;
    if (run.error)
      return c.html(
        ui.frame('Cancel by filter', `${head}<p role="alert">Stopped by an error: ${esc(run.error)}</p>`),
      );
    if (!run.result) {
      const body = `${head}<p id="progress" role="status">${run.done} of ${run.total} done${run.last ? `; last: ${esc(run.last)}` : ''}${run.stop.signal.aborted ? '; stopping' : ''}</p><progress max="${run.total}" value="${run.done}"></progress>
<form method="post" action="/jobs/bulk-cancel/runs/${esc(run.id)}/stop"><button type="submit" class="danger" id="stop">Stop</button></form>`;
      return c.html(ui.frame('Cancel by filter', body, { script: REFRESH_SCRIPT }));
    }
    const r = run.result;
    const table = `<table><thead><tr><th>job</th><th>outcome</th><th>status then</th><th>why</th></tr></thead><tbody>${r.items
      .map(
        (i) =>
          `<tr><td>${jobLink(i.dedupKey)}</td><td>${esc(i.outcome)}</td><td>${esc(i.status ?? '')}</td><td>${esc(i.why ?? '')}</td></tr>`,
      )
      .join('')}</tbody></table>`;
    return c.html(
      ui.frame(
        'Cancel by filter',
        `${head}<p id="outcome">${esc(describeBulkCancel(r))}</p>${table}<p><a href="/jobs?status=CANCELLED">Cancelled jobs</a></p>`,
      ),
    );
  });

  app.post('/jobs/bulk-cancel/runs/:id/stop', (c) => {
    const refused = ui.refuseIfReadOnly(c);
    if (refused) return refused;
    const run = runs.run(c.req.param('id'));
    run?.stop.abort();
    return c.redirect(`/jobs/bulk-cancel/runs/${encodeURIComponent(c.req.param('id'))}`, 303);
  });
};

/** The preview: the count, the first rows, and the confirmation form naming the kept preview. */
function previewHtml(ui: UiContext, preview: BulkCancelPreview, id: string): string {
  const n = preview.jobs.length;
  if (n === 0) return '<p id="count">No unfinished job matches: nothing to cancel.</p>';
  const now = Date.now();
  const rows = preview.jobs
    .slice(0, PREVIEW_ROWS)
    .map(
      (j) =>
        `<tr><td>${jobLink(j.dedupKey)}</td><td>${statusBadge(j.status)}</td><td>${esc(j.type ?? '')}</td><td class="num">${esc(j.attempts)}</td><td>${esc(j.lastError ?? '')}</td><td>${esc(human(now - j.problemAt))} ago</td></tr>`,
    )
    .join('');
  const more = preview.more ? ` More match: only the first ${preview.limit} are taken.` : '';
  const confirm = ui.config.readOnly
    ? '<p class="muted">Read-only: cancel is off (started with --read-only).</p>'
    : `<form method="post" action="/jobs/bulk-cancel" aria-label="confirm the cancel"><input type="hidden" name="preview" value="${esc(id)}"><input type="hidden" name="confirmed" value="yes">
<label for="b-reason">reason <input id="b-reason" name="reason" maxlength="240"></label>
<label for="b-rate">jobs per second <input id="b-rate" name="rate" type="number" min="0.1" max="${BULK_MAX_RATE}" step="0.1" value="${BULK_DEFAULT_RATE}"></label>
<button type="submit" class="danger" id="confirm">Cancel these ${n} job${n === 1 ? '' : 's'}</button></form>
<p class="muted">Each job is cancelled as it is then: one that finished since this preview is refused and reported; a running one stops at its next heartbeat and commits nothing. This cannot be undone. The history names ${esc(ui.actor)}.</p>`;
  return `<h2 id="count">${n} job${n === 1 ? '' : 's'} match${n === 1 ? 'es' : ''}</h2><p class="muted">First ${Math.min(n, PREVIEW_ROWS)} shown.${more} Read ${preview.reads.itemsRead} index entries (${preview.reads.readUnits} read units).</p>
<table><thead><tr><th>job</th><th>status</th><th>type</th><th class="num">attempts</th><th>last error</th><th>last problem</th></tr></thead><tbody>${rows}</tbody></table>${confirm}`;
}
