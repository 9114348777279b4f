/**
 * Redrive from the inspector, `POST /dlq/redrive`: the selected letters (by message id) or every letter
 * of one of leaseq's reasons, after a confirmation page that lists them; then `redrive` and a result page.
 */
import { DEAD_LETTER_REASONS } from '../../../shared/ops/dlq-letters.ts';
import { type RedriveItem, redrive } from '../../../shared/ops/dlq-redrive.ts';
import { letterTable, problemsOf } from '../components.ts';
import type { UiRoute } from '../context.ts';
import { bounded } from '../data.ts';
import { esc } from '../html.ts';
import { surveyDlq } from './dlq.ts';

export const dlqRedriveRoutes: UiRoute = (app, ui) => {
  const { frame, target, log } = ui;
  app.post('/dlq/redrive', async (c) => {
    const refused = ui.refuseIfReadOnly(c);
    if (refused) return refused;
    const form = await c.req.parseBody({ all: true });
    const ids = [form.letter ?? []].flat().filter((v): v is string => typeof v === 'string');
    const reason = typeof form.reason === 'string' && form.reason ? form.reason : undefined;
    // Only leaseq's own reasons, matched exactly: redrive's filter reads a trailing `*` as a prefix, and a
    // letter's reason is whatever its sender wrote (a reason `*` would redrive every letter).
    if (reason && !DEAD_LETTER_REASONS.includes(reason)) {
      return c.html(
        frame(
          'Redrive',
          `<h1>Redrive</h1><p>${esc(reason)} is not a reason leaseq gives: select its letters instead.</p><p><a href="/dlq">Back to the dead letters</a></p>`,
        ),
        400,
      );
    }
    if (ids.length === 0 && !reason) {
      return c.html(
        frame(
          'Redrive',
          '<h1>Redrive</h1><p>Select letters first.</p><p><a href="/dlq">Back to the dead letters</a></p>',
        ),
        400,
      );
    }
    const result = await surveyDlq(ui);
    if (!result.ok) return c.html(frame('Redrive', '<h1>Redrive</h1>', { problems: [result.problem] }));
    const chosen = reason
      ? result.value.letters.filter((l) => l.reason === reason)
      : result.value.letters.filter((l) => ids.includes(l.messageId) && l.dedupKey);
    if (form.confirmed !== 'yes') {
      const hidden = reason
        ? `<input type="hidden" name="reason" value="${esc(reason)}">`
        : ids.map((id) => `<input type="hidden" name="letter" value="${esc(id)}">`).join('');
      const body = `<h1>Redrive ${chosen.length} letter${chosen.length === 1 ? '' : 's'}?</h1>
<p>${reason ? `Every letter with reason <strong>${esc(reason)}</strong>` : 'These letters'} go back to the jobs queue; a dead job item is reset (attempts start again). A job that completed, was cancelled or runs now is skipped, and so is a letter that is not the job its key holds now (an older death, or a job before its key was reset).</p>
${letterTable(chosen)}
<form method="post" action="/dlq/redrive">${hidden}<input type="hidden" name="confirmed" value="yes"><button type="submit" id="confirm">Confirm redrive</button> <a href="/dlq">Cancel</a></form>`;
      return c.html(frame('Confirm redrive', body));
    }
    // The selected letters by their message ids, in one run: a redrive by dedup key acted on whichever
    // letter of the key it browsed first, and left the selected one in the DLQ.
    const filter = reason ? { reason } : { messageIds: chosen.map((l) => l.messageId) };
    const runs = [
      await bounded('SQS', 'redrive', ui.actionMs, () => redrive(target, { filter, by: ui.actor })),
    ];
    const items: RedriveItem[] = runs.flatMap((r) => (r.ok ? r.value.items : []));
    const redriven = items.filter((i) => i.outcome === 'redriven').length;
    // Rows and counts are of letters: two letters of one job are two rows, told apart by their ids.
    const letters = `${items.length} letter${items.length === 1 ? '' : 's'}`;
    log(`redrive from the inspector: ${letters}: ${redriven} redriven, ${items.length - redriven} not`);
    const body = `<h1>Redrive done</h1><p id="outcome">${letters}: ${redriven} redriven, ${items.length - redriven} not.</p>
<table><thead><tr><th>job</th><th>letter</th><th>reason</th><th>outcome</th><th>detail</th></tr></thead><tbody>${items
      .map(
        (i) =>
          `<tr><td>${i.dedupKey ? `<a href="/jobs/${encodeURIComponent(i.dedupKey)}">${esc(i.dedupKey)}</a>` : '-'}</td><td>${esc(i.messageId)}</td><td>${esc(i.reason)}</td><td>${esc(i.skip ? `${i.outcome} (${i.skip})` : i.outcome)}</td><td>${esc(i.detail ?? '')}</td></tr>`,
      )
      .join('')}</tbody></table><p><a href="/dlq">Back to the dead letters</a></p>`;
    return c.html(frame('Redrive', body, { problems: problemsOf(...runs) }));
  });
};
