/**
 * `POST /jobs/:key/fix`: edit and retry from the page, as `leaseq dlq redrive --payload-file` does
 * (shared/ops/dlq-redrive-edit.ts, through the redrive). The edited text is read as JSON, held to the
 * body limit, checked against the job type's schema in the job module and put in the letter's envelope
 * before anything changes; then a confirmation shows the diff; only the confirmed form redrives the one
 * letter, with the new payload. The terminal gets counts, never the payload.
 */
import type { Hono } from 'hono';
import { DEFAULT_MAX_BODY_BYTES } from '../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { findDeadLetter } from '../../shared/ops/dlq.ts';
import type { DeadLetter } from '../../shared/ops/dlq-letters.ts';
import { type RedriveItem, redrive } from '../../shared/ops/dlq-redrive.ts';
import { editedBody } from '../../shared/ops/dlq-redrive-edit.ts';
import { findJobByKey } from '../../shared/ops/find-jobs.ts';
import { letterMark } from '../../shared/ops/job-letters.ts';
import { messageOf } from '../../shared/ops/ops-errors.ts';
import { showLetterPayload } from '../../shared/ops/payload-view.ts';
import { correctedHash, operatorIdentity, payloadCheck } from '../commands/redrive-input.ts';
import { bounded } from './data.ts';
import { changes, type DiffLine, lineDiff } from './diff.ts';
import type { FindUi } from './find-context.ts';
import { esc } from './html.ts';
import { editForm } from './reveal-page.ts';

/** Pure: the edited text as a payload, or why not (the position of a JSON fault, never the text near it). */
export function readEditedPayload(text: string): { value: unknown } | { problem: string } {
  const size = Buffer.byteLength(text, 'utf8');
  if (size > DEFAULT_MAX_BODY_BYTES) {
    return {
      problem: `the payload is ${size} bytes, above the ${DEFAULT_MAX_BODY_BYTES} byte body limit; nothing was sent`,
    };
  }
  if (text.trim() === '')
    return { problem: 'the payload is empty: write the JSON to send (null is a payload)' };
  try {
    return { value: JSON.parse(text) as unknown };
  } catch (error) {
    const at = /position \d+(?: \(line \d+ column \d+\))?/.exec((error as Error).message ?? '');
    return {
      problem: `the payload is not JSON (at ${at ? at[0] : 'an unexpected token'}); nothing was sent`,
    };
  }
}

function diffTable(diff: readonly DiffLine[]): string {
  const sign = { same: ' ', add: '+', del: '-' } as const;
  const cls = { same: '', add: ' class="good"', del: ' class="bad"' } as const;
  return `<pre id="fix-diff" aria-label="changes to the payload">${diff
    .map((d) => `<span${cls[d.op]}>${sign[d.op]} ${esc(d.text)}</span>`)
    .join('\n')}</pre>`;
}

/** Registers `POST /jobs/:key/fix`. */
export function fixRoute(app: Hono, ui: FindUi): void {
  app.post('/jobs/:key/fix', async (c) => {
    const refused = ui.refuseIfReadOnly(c);
    if (refused) return refused;
    const key = c.req.param('key');
    const back = `<p><a href="/jobs/${encodeURIComponent(key)}">Back to the job</a></p>`;
    const form = await c.req.parseBody();
    const letterId = typeof form.letter === 'string' ? form.letter : '';
    const text = typeof form.payload === 'string' ? form.payload : '';
    const page = (title: string, body: string, status: 200 | 400 | 404 = 200, problems: string[] = []) =>
      c.html(ui.frame(title, `${body}${back}`, { problems }), status);
    const jobs = ui.config.jobs;
    if (!jobs) {
      return page(
        'Edit refused',
        '<h1>Edit refused</h1><p>No job module: start leaseq ui with --job-module (or set LEASEQ_JOBS_MODULE) so an edited payload is checked against its schema.</p>',
        400,
      );
    }
    if (letterId === '')
      return page('Edit', "<h1>Edit</h1><p>No letter named: open the job's payload first.</p>", 400);
    const parsed = readEditedPayload(text);
    const retry = (problem: string) =>
      page(
        'Edit refused',
        `<h1>Edit job ${esc(key)}</h1><p>Nothing was changed.</p>${editForm(key, letterId, text, problem)}`,
        400,
      );
    if ('problem' in parsed) return retry(parsed.problem);
    const [jobRead, letterRead] = await Promise.all([
      bounded('DynamoDB', `read of job ${key}`, ui.readMs, () => findJobByKey(ui.target, key)),
      bounded('SQS', 'search of the DLQ', Math.max(ui.readMs, 15_000), () =>
        findDeadLetter(ui.target.clients.sqs, ui.target.names.dlqUrl, letterId),
      ),
    ]);
    if (!jobRead.ok || !letterRead.ok) {
      const missing = !letterRead.ok && /no message/.test(letterRead.problem);
      if (missing)
        return page(
          'Edit',
          '<h1>Edit</h1><p id="fix-problem">The letter is no longer in the DLQ (redriven or purged?). Nothing was changed.</p>',
          404,
        );
      return page(
        'Edit',
        '<h1>Edit</h1>',
        200,
        [jobRead, letterRead].flatMap((r) => (r.ok ? [] : [r.problem])),
      );
    }
    const job = jobRead.value;
    const letter: DeadLetter = letterRead.value;
    // The letter named must be this job's death, and the job still dead of it: the form may be old.
    if (letter.messageId !== letterId || letter.dedupKey !== key) {
      return page(
        'Edit',
        `<h1>Edit</h1><p id="fix-problem">Letter ${esc(letterId)} is not a letter of job ${esc(key)}. Nothing was changed.</p>`,
        400,
      );
    }
    if (job?.status !== JobStatus.Dead || letterMark(letter, job) !== undefined) {
      return page(
        'Edit',
        `<h1>Edit</h1><p id="fix-problem">Job ${esc(key)} is ${esc(job?.status ?? 'gone')} now, or this is not the letter of its death: a redrive would skip it. Nothing was changed.</p>`,
        400,
      );
    }
    const before = await showLetterPayload(letter.body, {
      ...(ui.config.redact ? { redact: ui.config.redact } : {}),
      ...(ui.config.payloadStore ? { store: ui.config.payloadStore } : {}),
      ...(ui.config.jobs?.jobs.plainBodies ? { plain: ui.config.jobs.jobs.plainBodies } : {}),
    });
    // A payload the hook redacts is never shown whole, so not as the diff's old side either.
    if (!('problem' in before) && before.redacted) {
      return page(
        'Edit refused',
        `<h1>Edit refused</h1><p id="fix-problem">The payload of job ${esc(key)} is redacted on these pages: correct it with <code>leaseq dlq redrive --dedup-key ${esc(key)} --payload-file &lt;file&gt;</code>. Nothing was changed.</p>`,
        400,
      );
    }
    const type = letter.type ?? job.type ?? '';
    const problem = payloadCheck(jobs, type, parsed.value);
    if (problem) return retry(`the payload does not fit job type ${type}: ${problem}`);
    try {
      // A plain body's letter is sent as an envelope of the key and type its attributes name (dlq-redrive-edit.ts).
      editedBody(letter.body, parsed.value, undefined, {
        ...(letter.dedupKey ? { dedupKey: letter.dedupKey } : {}),
        ...(letter.type ? { type: letter.type } : {}),
        ...(letter.originalMessageId ? { messageId: letter.originalMessageId } : {}),
      });
    } catch (error) {
      return retry(messageOf(error));
    }
    if (form.confirmed !== 'yes') {
      const old = 'problem' in before ? before.problem : JSON.stringify(before.value, null, 2);
      const diff = lineDiff(old, JSON.stringify(parsed.value, null, 2));
      const unchanged = changes(diff) === 0;
      const body = `<h1>Redrive job ${esc(key)} with this payload?</h1>
<p>The payload fits type <strong>${esc(type)}</strong>. The dead job is reset (attempts start again) and letter ${esc(letterId)} goes back to the jobs queue with the payload below in its envelope (same id, dedup key and type); the letter is then deleted.${unchanged ? ' <strong>The payload is unchanged.</strong>' : ''}</p>
${diffTable(diff)}
<form method="post" action="/jobs/${encodeURIComponent(key)}/fix"><input type="hidden" name="letter" value="${esc(letterId)}"><input type="hidden" name="payload" value="${esc(JSON.stringify(parsed.value))}"><input type="hidden" name="confirmed" value="yes"><button type="submit" id="confirm">Confirm redrive</button></form>`;
      return page('Confirm redrive', body);
    }
    const run = await bounded('SQS', 'redrive', ui.actionMs, () =>
      redrive(ui.target, {
        filter: { messageIds: [letterId] },
        payload: {
          value: parsed.value,
          check: (t, p) => payloadCheck(jobs, t, p),
          // Stored by the reset, so a copy of the old body cannot get the edit lettered as another payload.
          hash: (t, p) => correctedHash(jobs, t, p),
        },
        by: ui.actor ?? operatorIdentity(),
        // A body refused for its content is what an edit corrects; redrive skips those unless asked.
        ...(letter.reason.startsWith('invalid-') ? { includeHopeless: true } : {}),
      }),
    );
    if (!run.ok) return page('Redrive', '<h1>Redrive</h1>', 200, [run.problem]);
    const items: RedriveItem[] = [...run.value.items];
    const redriven = items.filter((i) => i.outcome === 'redriven').length;
    ui.log(
      `edited redrive from the inspector: ${items.length} letter${items.length === 1 ? '' : 's'}: ${redriven} redriven`,
    );
    const rows = items
      .map(
        (i) =>
          `<tr><td>${esc(i.messageId)}</td><td>${esc(i.skip ? `${i.outcome} (${i.skip})` : i.outcome)}</td><td>${esc(i.detail ?? '')}</td></tr>`,
      )
      .join('');
    return page(
      'Redrive',
      `<h1>Redrive done</h1><p id="outcome">${redriven === 1 ? `Job ${esc(key)} was redriven with the edited payload.` : `Job ${esc(key)} was not redriven.`}</p><table><thead><tr><th>letter</th><th>outcome</th><th>detail</th></tr></thead><tbody>${rows}</tbody></table>`,
    );
  });
}
