/**
 * `POST /jobs/:key/reveal`: what a job's page does not show by default, on request: its result and
 * checkpoint data, and its dead letters, each with its error, attributes and payload (redacted by the
 * deployment's hook, with its size; an offloaded payload read from S3), and for the letter of a DEAD
 * job's death, the form that edits its payload (fix-page.ts). A POST: a payload is not in any URL, the
 * browser's history or a prefetch.
 */
import type { Hono } from 'hono';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import type { DeadLetter } from '../../shared/ops/dlq-letters.ts';
import { findJobByKey } from '../../shared/ops/find-jobs.ts';
import { LETTER_MARK_TEXT, letterMark, lettersOfJob } from '../../shared/ops/job-letters.ts';
import { type ShownValue, showLetterPayload, showValue } from '../../shared/ops/payload-view.ts';
import { formatErrorText } from '../format.ts';
import { bounded } from './data.ts';
import type { FindUi } from './find-context.ts';
import { esc } from './html.ts';

/** The job page's button (a POST form) that opens this page. */
export function revealButton(key: string): string {
  return `<form method="post" action="/jobs/${encodeURIComponent(key)}/reveal" aria-label="show payload and result"><button type="submit" id="reveal">Show payload, result and dead letters</button></form>`;
}

/** A value with its size and whether the hook redacted it. */
export function shownBlock(id: string, label: string, shown: ShownValue, extra = ''): string {
  return `<h3>${esc(label)} <span class="muted">(${shown.bytes.toLocaleString('en')} bytes${shown.redacted ? ', redacted' : ''}${extra})</span></h3><pre id="${esc(id)}">${esc(shown.text)}</pre>`;
}

/**
 * The textarea of a payload edit, sent to the fix page. Its text is escaped as every value is, but a tab
 * stays a tab (JSON whitespace an operator may paste; as `\u0009` outside a string it is no JSON).
 */
export function editForm(key: string, letterId: string, text: string, problem?: string): string {
  return `<form method="post" action="/jobs/${encodeURIComponent(key)}/fix" aria-label="edit the payload and redrive"><input type="hidden" name="letter" value="${esc(letterId)}">
${problem ? `<div class="banner" role="alert" id="fix-problem">${esc(problem)}</div>` : ''}<label for="fix-payload">Payload to send (JSON), checked against the job type's schema before anything changes</label>
<textarea id="fix-payload" name="payload" rows="${Math.min(30, Math.max(6, text.split('\n').length + 2))}" cols="90" spellcheck="false">${text.split('\t').map(esc).join('\t')}</textarea>
<p><button type="submit" id="fix-check">Check and review the change…</button></p></form>`;
}

/** Registers `POST /jobs/:key/reveal`. */
export function revealRoute(app: Hono, ui: FindUi): void {
  app.post('/jobs/:key/reveal', async (c) => {
    const key = c.req.param('key');
    const back = `<p><a href="/jobs/${encodeURIComponent(key)}">Back to the job</a></p>`;
    const read = await bounded('DynamoDB', `read of job ${key}`, ui.readMs, () =>
      findJobByKey(ui.target, key),
    );
    if (!read.ok)
      return c.html(ui.frame(key, `<h1>Job ${esc(key)}</h1>${back}`, { problems: [read.problem] }));
    const job = read.value;
    const redact = ui.config.redact;
    const parts: string[] = [`<h1>Job ${esc(key)}: payload and result</h1>`];
    if (!redact) {
      parts.push(
        '<p class="muted">No redaction hook (the job module exports no <code>redactError</code>): values are shown as stored.</p>',
      );
    }
    if (job) {
      const result = job.result === undefined ? undefined : showValue(job.result, redact);
      parts.push(
        result ? shownBlock('job-result', 'Result', result) : '<p class="muted">No result stored.</p>',
      );
      if (job.checkpoint?.data !== undefined) {
        parts.push(
          shownBlock(
            'job-checkpoint',
            `Checkpoint data (step ${job.checkpoint.step})`,
            showValue(job.checkpoint.data, redact),
          ),
        );
      }
    } else {
      parts.push('<p>No job item under this key (never claimed, or removed by TTL).</p>');
    }
    // Read-only browses nothing: a receive hides a letter and counts (dlq-read-only.ts).
    if (ui.config.readOnly) {
      parts.push(
        '<p class="muted">Read-only: dead letters are not read (finding them means receiving letters).</p>',
      );
      return c.html(ui.frame(`Job ${key}`, `${parts.join('')}${back}`));
    }
    const found = await bounded('SQS', 'browse of the DLQ', Math.max(ui.readMs, 15_000), () =>
      lettersOfJob(ui.target, key),
    );
    if (!found.ok)
      return c.html(ui.frame(`Job ${key}`, `${parts.join('')}${back}`, { problems: [found.problem] }));
    const { letters, shortfall } = found.value;
    parts.push(`<h2>Dead letters of this job (${letters.length})</h2>`);
    if (shortfall) parts.push(`<p class="muted">${esc(shortfall)}</p>`);
    if (letters.length === 0) {
      parts.push(
        '<p class="muted" id="no-letters">None in the DLQ. leaseq keeps no other copy of a payload: the job item holds none, and a message is read only by the worker that receives it.</p>',
      );
    }
    for (const letter of letters) parts.push(await letterSection(ui, key, letter, job));
    return c.html(ui.frame(`Job ${key}`, `${parts.join('')}${back}`));
  });
}

async function letterSection(
  ui: FindUi,
  key: string,
  letter: DeadLetter,
  job: Awaited<ReturnType<typeof findJobByKey>>,
): Promise<string> {
  const mark = letterMark(letter, job);
  const attrs = Object.entries(letter.attributes)
    .map(([k, v]) => `<tr><th scope="row">${esc(k)}</th><td>${esc(v)}</td></tr>`)
    .join('');
  const error = formatErrorText(letter.errorClass, letter.errorMessage) ?? '-';
  const payload = await showLetterPayload(letter.body, {
    ...(ui.config.redact ? { redact: ui.config.redact } : {}),
    ...(ui.config.payloadStore ? { store: ui.config.payloadStore } : {}),
    ...(ui.config.jobs?.jobs.plainBodies ? { plain: ui.config.jobs.jobs.plainBodies } : {}),
  });
  const where =
    'ref' in payload && payload.ref ? `, offloaded to s3://${payload.ref.bucket}/${payload.ref.key}` : '';
  const body =
    'problem' in payload
      ? `<p class="banner" role="alert">${esc(payload.problem)}</p>`
      : shownBlock(`payload-${letter.messageId}`, 'Payload', payload, where);
  let edit = '';
  // Only the letter of the job's death, still DEAD, is corrected here: any other would be skipped by the
  // redrive (dlq-redrive-plan.ts) or run over a job that is not its own.
  if (job?.status === JobStatus.Dead && mark === undefined && !('problem' in payload)) {
    edit = payload.redacted
      ? `<p class="muted">The payload is shown redacted, so it is not offered for editing here: correct it with <code>leaseq dlq redrive --dedup-key ${esc(key)} --payload-file &lt;file&gt;</code>.</p>`
      : !ui.config.jobs
        ? '<p class="muted">No job module (start leaseq ui with --job-module, or set LEASEQ_JOBS_MODULE): an edited payload could not be checked against its schema, so editing is off.</p>'
        : `<h3>Edit and redrive</h3>${editForm(key, letter.messageId, JSON.stringify(payload.value, null, 2))}`;
  }
  return `<section class="letter" aria-label="dead letter ${esc(letter.messageId)}"><h3>Letter <a href="/dlq/letters/${encodeURIComponent(letter.messageId)}">${esc(letter.messageId)}</a>${mark ? ` <span class="badge warn">${esc(LETTER_MARK_TEXT[mark])}</span>` : ''}</h3>
<table><tbody><tr><th scope="row">error</th><td class="letter-error">${esc(error)}</td></tr><tr><th scope="row">reason</th><td>${esc(letter.reason)}</td></tr><tr><th scope="row">dead at</th><td>${esc(letter.deadAt ?? '-')}</td></tr>${attrs}</tbody></table>${body}${edit}</section>`;
}
