/**
 * Redrive by filter, `/dlq/bulk-redrive`: a filter form (type, reason, error text, time window), a preview
 * of the dead jobs it finds in the problems index (the count and the first rows; no letter received), a
 * confirmation POST naming the kept filter, then `redrive` in the background at the chosen rate, and a run
 * page with progress, a stop button and each letter's outcome. The redrive takes the letters that match
 * when it runs, each planned as `leaseq dlq redrive` plans it (dlq-redrive-plan.ts).
 */
import { DEAD_LETTER_REASONS, type DeadLetterFilter } from '../../../shared/ops/dlq-letters.ts';
import { type RedriveReport, redrive } from '../../../shared/ops/dlq-redrive.ts';
import { previewRedrive, type RedrivePreview } from '../../../shared/ops/dlq-redrive-preview.ts';
import { BulkRuns, PREVIEW_TTL_MS, REFRESH_SCRIPT } from '../bulk-runs.ts';
import { jobLink, problemsOf } from '../components.ts';
import type { UiContext, UiRoute } from '../context.ts';
import { bounded } from '../data.ts';
import { esc, human } from '../html.ts';
import { BULK_MAX_RATE, formRate, WINDOWS } from './bulk-cancel.ts';

const option = (value: string, label: string, selected: string | undefined) =>
  `<option value="${esc(value)}"${value === (selected ?? '') ? ' selected' : ''}>${esc(label)}</option>`;

export const bulkRedriveRoutes: UiRoute = (app, ui) => {
  const runs = new BulkRuns<DeadLetterFilter, RedriveReport>();
  const title = 'Redrive by filter';

  app.get('/dlq/bulk-redrive', async (c) => {
    const q = {
      type: c.req.query('type'),
      reason: c.req.query('reason'),
      error: c.req.query('error'),
      since: c.req.query('since'),
    };
    // Only leaseq's own reasons, exactly (a `*` would be read as a prefix).
    const filter: DeadLetterFilter = {
      ...(q.type ? { type: q.type } : {}),
      ...(q.reason && DEAD_LETTER_REASONS.includes(q.reason) ? { reason: q.reason } : {}),
      ...(q.error ? { errorContains: q.error } : {}),
      ...(q.since && WINDOWS[q.since] ? { since: Date.now() - (WINDOWS[q.since] ?? 0) } : {}),
    };
    const form = `<form class="filters" method="get" action="/dlq/bulk-redrive" aria-label="letters to redrive">
<label for="r-type">type<input id="r-type" name="type" value="${esc(q.type ?? '')}"></label>
<label for="r-reason">reason<select id="r-reason" name="reason">${option('', 'any', q.reason)}${DEAD_LETTER_REASONS.map((r) => option(r, r, q.reason)).join('')}</select></label>
<label for="r-error">error contains<input id="r-error" name="error" value="${esc(q.error ?? '')}"></label>
<label for="r-since">dead within<select id="r-since" name="since">${option('', 'any time', q.since)}${Object.keys(
      WINDOWS,
    )
      .map((w) => option(w, w, q.since))
      .join('')}</select></label>
<button type="submit" id="preview">Preview</button></form>`;
    const intro = `<h1>${title}</h1><p class="muted">Finds the dead jobs in the problems index (no letter is received); the redrive then sends their letters back. A letter whose body never became a job (invalid-*) is not counted here. Nothing changes until you confirm.</p>${form}`;
    if (Object.keys(filter).length === 0) return c.html(ui.frame(title, intro));
    const found = await bounded('DynamoDB', 'preview of the redrive', ui.actionMs, () =>
      previewRedrive(ui.target, filter, { rows: 20 }),
    );
    if (!found.ok) return c.html(ui.frame(title, intro, { problems: problemsOf(found) }));
    return c.html(ui.frame(title, `${intro}${previewHtml(ui, found.value, runs.keepPreview(filter))}`));
  });

  app.post('/dlq/bulk-redrive', async (c) => {
    const refused = ui.refuseIfReadOnly(c);
    if (refused) return refused;
    const form = await c.req.parseBody();
    const rate = formRate(form.rate);
    const back = '<p><a href="/dlq/bulk-redrive">Back</a></p>';
    if (rate === undefined) {
      return c.html(
        ui.frame(
          title,
          `<h1>${title}</h1><p role="alert">The rate must be a number of letters per second from 0.1 to ${BULK_MAX_RATE}; nothing was changed.</p>${back}`,
        ),
        400,
      );
    }
    const filter =
      typeof form.preview === 'string' && form.confirmed === 'yes'
        ? runs.takePreview(form.preview)
        : undefined;
    if (!filter) {
      return c.html(
        ui.frame(
          title,
          `<h1>${title}</h1><p role="alert">This preview was used already or is older than ${PREVIEW_TTL_MS / 60_000} minutes; nothing was changed. Preview again.</p>${back}`,
        ),
        409,
      );
    }
    const total = Number(form.count) || 0;
    const run = runs.start({ title: 'redrive by filter', by: ui.actor, total }, async (signal, progress) => {
      const report = await redrive(ui.target, {
        filter,
        by: ui.actor,
        ratePerSecond: rate,
        signal,
        onProgress: (item) => progress(`${item.outcome} ${item.dedupKey ?? item.messageId}`),
      });
      ui.log(
        `redrive by filter from the inspector: ${report.redriven} redriven, ${report.skipped} skipped, ${report.failed} failed`,
      );
      return report;
    });
    return c.redirect(`/dlq/bulk-redrive/runs/${run.id}`, 303);
  });

  app.get('/dlq/bulk-redrive/runs/:id', (c) => {
    const run = runs.run(c.req.param('id'));
    if (!run)
      return c.html(
        ui.frame(
          title,
          '<h1>No such run</h1><p>It ended before this inspector started, or was forgotten.</p>',
        ),
        404,
      );
    const head = `<h1>Redrive by filter</h1><p class="muted">By ${esc(run.by)}, started ${esc(human(Date.now() - run.startedAt))} ago.</p>`;
    if (run.error)
      return c.html(ui.frame(title, `${head}<p role="alert">Stopped by an error: ${esc(run.error)}</p>`));
    if (!run.result) {
      const body = `${head}<p id="progress" role="status">${run.done} letter${run.done === 1 ? '' : 's'} done (about ${run.total} expected)${run.last ? `; last: ${esc(run.last)}` : ''}${run.stop.signal.aborted ? '; stopping' : ''}</p>
<form method="post" action="/dlq/bulk-redrive/runs/${esc(run.id)}/stop"><button type="submit" class="danger" id="stop">Stop</button></form>`;
      return c.html(ui.frame(title, body, { script: REFRESH_SCRIPT }));
    }
    const r = run.result;
    const stopped = r.interrupted ? ' Stopped: the letters not reached stay in the DLQ as they were.' : '';
    const table = `<table><thead><tr><th>job</th><th>letter</th><th>reason</th><th>outcome</th><th>detail</th></tr></thead><tbody>${r.items
      .map(
        (i) =>
          `<tr><td>${i.dedupKey ? jobLink(i.dedupKey) : '-'}</td><td>${esc(i.messageId)}</td><td>${esc(i.reason)}</td><td>${esc(i.skip ? `${i.outcome} (${i.skip})` : i.outcome)}</td><td>${esc(i.detail ?? '')}</td></tr>`,
      )
      .join('')}</tbody></table>`;
    return c.html(
      ui.frame(
        title,
        `${head}<p id="outcome">${r.matched} letters: ${r.redriven} redriven, ${r.skipped} skipped, ${r.failed} failed.${stopped}</p>${table}<p><a href="/dlq">Dead letters</a></p>`,
      ),
    );
  });

  app.post('/dlq/bulk-redrive/runs/:id/stop', (c) => {
    const refused = ui.refuseIfReadOnly(c);
    if (refused) return refused;
    runs.run(c.req.param('id'))?.stop.abort();
    return c.redirect(`/dlq/bulk-redrive/runs/${encodeURIComponent(c.req.param('id'))}`, 303);
  });
};

/** The preview: the count of dead jobs, the first rows, and the confirmation naming the kept filter. */
function previewHtml(ui: UiContext, preview: RedrivePreview, id: string): string {
  if (preview.count === 0) return '<p id="count">No dead job in the problems index matches.</p>';
  const now = Date.now();
  const n = `${preview.count}${preview.more ? '+' : ''}`;
  const rows = preview.jobs
    .map(
      (j) =>
        `<tr><td>${jobLink(j.dedupKey)}</td><td>${esc(j.type ?? '')}</td><td>${esc(j.deadReason ?? '')}</td><td class="num">${esc(j.attempts)}</td><td>${esc(j.lastError ?? '')}</td><td>${esc(human(now - (j.deadAt ?? j.problemAt)))} ago</td></tr>`,
    )
    .join('');
  const confirm = ui.config.readOnly
    ? '<p class="muted">Read-only: redrive is off (started with --read-only).</p>'
    : `<form method="post" action="/dlq/bulk-redrive" aria-label="confirm the redrive"><input type="hidden" name="preview" value="${esc(id)}"><input type="hidden" name="count" value="${preview.count}"><input type="hidden" name="confirmed" value="yes">
<label for="r-rate">letters per second <input id="r-rate" name="rate" type="number" min="0.1" max="${BULK_MAX_RATE}" step="0.1" value="10"></label>
<button type="submit" id="confirm">Redrive these letters</button></form>
<p class="muted">Each letter is planned as it is then: a job that completed, was cancelled or runs now is skipped, and so is a letter that is not the job its key holds now. The history names ${esc(ui.actor)}.</p>`;
  return `<h2 id="count">${n} dead job${preview.count === 1 ? '' : 's'} match</h2><p class="muted">First ${preview.jobs.length} shown (${preview.readUnits} read units).</p>
<table><thead><tr><th>job</th><th>type</th><th>reason</th><th class="num">attempts</th><th>error</th><th>dead</th></tr></thead><tbody>${rows}</tbody></table>${confirm}`;
}
