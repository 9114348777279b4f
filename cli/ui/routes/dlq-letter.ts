/**
 * One dead letter `/dlq/letters/<messageId>`: its error, attributes and a link to its job; its body and
 * payload on request (a POST; redacted by the deployment's hook, with their sizes). Not when read-only.
 */
import type { Context } from 'hono';
import type { BlankEnv } from 'hono/types';
import { findDeadLetter } from '../../../shared/ops/dlq.ts';
import { redactText, showLetterPayload } from '../../../shared/ops/payload-view.ts';
import { formatErrorText } from '../../format.ts';
import { jobLink } from '../components.ts';
import type { UiRoute } from '../context.ts';
import { bounded } from '../data.ts';
import { esc } from '../html.ts';
import { shownBlock } from '../reveal-page.ts';

export const dlqLetterRoutes: UiRoute = (app, ui) => {
  const { config, frame, target } = ui;
  const letterPage = async (c: Context<BlankEnv, '/dlq/letters/:id'>, reveal: boolean) => {
    const id = c.req.param('id') ?? '';
    if (config.readOnly) {
      const why = 'Started with --read-only: a letter is not read (finding it means receiving letters).';
      return c.html(frame('Read-only', `<h1>Read-only</h1><p>${esc(why)}</p>`), 403);
    }
    const letter = await bounded('SQS', 'search of the DLQ', Math.max(ui.readMs, 15_000), () =>
      findDeadLetter(target.clients.sqs, target.names.dlqUrl, id),
    );
    if (!letter.ok) {
      const missing = /no message/.test(letter.problem);
      return c.html(
        frame(
          'Letter',
          `<h1>Letter ${esc(id)}</h1>`,
          missing
            ? { notice: 'No such letter in the DLQ (redriven or purged?).' }
            : { problems: [letter.problem] },
        ),
        missing ? 404 : 200,
      );
    }
    const l = letter.value;
    const attrs = Object.entries(l.attributes)
      .map(([k, v]) => `<tr><th scope="row">${esc(k)}</th><td>${esc(v)}</td></tr>`)
      .join('');
    const body = reveal
      ? await revealed(l.body, config)
      : `<form method="post" action="/dlq/letters/${encodeURIComponent(id)}" aria-label="show the message body"><button type="submit" id="reveal-body">Show the message body and payload</button></form>`;
    const head = `<table><tbody><tr><th scope="row">job</th><td>${l.dedupKey ? jobLink(l.dedupKey) : '<span class="muted">unreadable</span>'}</td></tr><tr><th scope="row">error</th><td>${esc(formatErrorText(l.errorClass, l.errorMessage) ?? '-')}</td></tr>${attrs}</tbody></table>`;
    return c.html(frame('Letter', `<h1>Dead letter ${esc(id)}</h1>${head}${body}`));
  };
  app.get('/dlq/letters/:id', (c) => letterPage(c, false));
  app.post('/dlq/letters/:id', (c) => letterPage(c, true));
};

/** The body (the hook over its whole text) and the payload in it, each with its size. */
async function revealed(body: string, config: Parameters<UiRoute>[1]['config']): Promise<string> {
  const payload = await showLetterPayload(body, {
    ...(config.redact ? { redact: config.redact } : {}),
    ...(config.payloadStore ? { store: config.payloadStore } : {}),
    ...(config.jobs?.jobs.plainBodies ? { plain: config.jobs.jobs.plainBodies } : {}),
  });
  const shownPayload =
    'problem' in payload
      ? `<p class="muted">${esc(payload.problem)}</p>`
      : shownBlock('letter-payload', 'Payload', payload, payload.source === 's3' ? ', offloaded to S3' : '');
  // The hook is given indented JSON, as for every value shown (the compact body would slip past a hook
  // written for it); and a body whose inline payload the hook redacted but whose own text it left alone
  // is withheld: it holds that payload whole.
  const pretty = indented(body);
  const redacted = redactText(pretty, config.redact);
  const leaks =
    !('problem' in payload) && payload.source === 'inline' && payload.redacted && redacted === pretty;
  const text = leaks ? BODY_WITHHELD : redacted;
  return `${shownPayload}<h3>Body <span class="muted">(${Buffer.byteLength(body, 'utf8').toLocaleString('en')} bytes${text !== pretty ? ', redacted' : ''})</span></h3><pre id="letter-body">${esc(text)}</pre>`;
}

const BODY_WITHHELD = '[withheld: the body holds the payload, which the redaction hook redacts]';

/** A JSON body as indented JSON; any other body as it is. */
function indented(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2) ?? body;
  } catch {
    return body;
  }
}
