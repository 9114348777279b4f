/** The dead letters `/dlq`: letters per reason, each letter, and the forms to redrive or purge. */
import { surveyDeadLetters } from '../../../shared/ops/dlq.ts';
import { DEAD_LETTER_REASONS } from '../../../shared/ops/dlq-letters.ts';
import { LETTER_MARK_TEXT, markLetters } from '../../../shared/ops/job-letters.ts';
import { formatErrorText } from '../../format.ts';
import { jobLink, problemsOf } from '../components.ts';
import type { UiContext, UiRoute } from '../context.ts';
import { bounded } from '../data.ts';
import { readOnlyDeadLetters } from '../dlq-read-only.ts';
import { esc } from '../html.ts';

/** A browse of the DLQ (at most 500 letters), bounded by 15 s at least: the page and a redrive read it. */
export const surveyDlq = ({ target, readMs }: UiContext) =>
  bounded('SQS', 'browse of the DLQ', Math.max(readMs, 15_000), () =>
    surveyDeadLetters(target.clients.sqs, target.names.dlqUrl, { limit: 500 }),
  );

export const dlqRoutes: UiRoute = (app, ui) => {
  const { config, frame } = ui;
  app.get('/dlq', async (c) => {
    // Read-only receives nothing (a receive hides a letter and counts): counts and dead jobs instead.
    if (config.readOnly) {
      const { body, problems } = await readOnlyDeadLetters(ui.target, ui.readMs, Date.now());
      return c.html(frame('Dead letters', body, { problems }));
    }
    const result = await surveyDlq(ui);
    const letters = result.ok ? result.value.letters : [];
    // What became of each letter's job since it died (BatchGetItem, 100 keys a request).
    const marked = await bounded('DynamoDB', "read of the letters' jobs", ui.readMs, () =>
      markLetters(ui.target, letters),
    );
    const marks = marked.ok ? marked.value.marks : new Map<string, never>();
    const reasons = new Map<string, number>();
    for (const l of letters) reasons.set(l.reason, (reasons.get(l.reason) ?? 0) + 1);
    const reasonTable = reasons.size
      ? `<table><caption class="muted">dead letters per reason</caption><thead><tr><th>reason</th><th class="num">letters</th></tr></thead><tbody>${[
          ...reasons,
        ]
          .sort((a, b) => b[1] - a[1])
          .map(([r, k]) => `<tr><td>${esc(r)}</td><td class="num">${k}</td></tr>`)
          .join('')}</tbody></table>`
      : '';
    const byReason = [...reasons.keys()].filter((r) => DEAD_LETTER_REASONS.includes(r));
    const selectable = !config.readOnly;
    const rows = letters
      .map((l) => {
        const id = `l-${esc(l.messageId)}`;
        const mark = marks.get(l.messageId);
        const box = selectable
          ? l.dedupKey
            ? `<input type="checkbox" name="letter" value="${esc(l.messageId)}" id="${id}" aria-label="select the letter of ${esc(l.dedupKey)}">`
            : '<span class="muted" title="no readable dedup key: use leaseq dlq redrive">–</span>'
          : '';
        return `<tr>${selectable ? `<td>${box}</td>` : ''}<td>${l.dedupKey ? jobLink(l.dedupKey) : '<span class="muted">unreadable</span>'}</td><td>${esc(l.type ?? '')}</td><td>${esc(l.reason)}</td><td>${esc(formatErrorText(l.errorClass, l.errorMessage) ?? '')}</td><td>${mark ? `<span class="badge warn">${esc(LETTER_MARK_TEXT[mark])}</span>` : ''}</td><td class="num">${l.attempts ?? ''}</td><td>${esc(l.deadAt ?? '')}</td><td><a href="/dlq/letters/${encodeURIComponent(l.messageId)}">letter</a></td></tr>`;
      })
      .join('');
    const table = letters.length
      ? `<table><thead><tr>${selectable ? '<th><span class="muted">select</span></th>' : ''}<th>job</th><th>type</th><th>reason</th><th>error</th><th>since</th><th class="num">attempts</th><th>dead at</th><th>details</th></tr></thead><tbody>${rows}</tbody></table>`
      : `<p class="muted">${result.ok ? 'The DLQ is empty.' : 'Dead letters unavailable (see above).'}</p>`;
    const unseen =
      result.ok && result.value.seen < result.value.depth
        ? `<p class="muted">Saw ${result.value.seen} of the ${result.value.depth} letters the DLQ holds.</p>`
        : '';
    const actions = config.readOnly
      ? '<p class="muted">Read-only: redrive and purge are off (started with --read-only).</p>'
      : `<form method="post" action="/dlq/redrive" aria-label="redrive selected letters">${table}<button type="submit">Redrive selected…</button></form>
<form method="post" action="/dlq/redrive" class="filters" aria-label="redrive by reason"><label for="r-reason">reason<select id="r-reason" name="reason">${byReason.map((r) => `<option value="${esc(r)}">${esc(r)}</option>`).join('')}</select></label><button type="submit"${byReason.length ? '' : ' disabled'}>Redrive all with this reason…</button></form>
<form method="post" action="/dlq/purge" aria-label="purge the DLQ"><button type="submit" class="danger"${letters.length ? '' : ' disabled'}>Purge the DLQ…</button></form>`;
    const body = `<h1>Dead letters</h1>${reasonTable}${unseen}${config.readOnly ? table : ''}${actions}`;
    return c.html(frame('Dead letters', body, { problems: problemsOf(result, marked) }));
  });
};
