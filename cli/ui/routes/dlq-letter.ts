/** One dead letter `/dlq/letters/<messageId>`: its attributes, its body on request (not when read-only). */
import { findDeadLetter } from '../../../shared/ops/dlq.ts';
import type { UiRoute } from '../context.ts';
import { bounded } from '../data.ts';
import { esc } from '../html.ts';

export const dlqLetterRoutes: UiRoute = (app, ui) => {
  const { config, frame, target } = ui;
  app.get('/dlq/letters/:id', async (c) => {
    const id = c.req.param('id');
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
    const body =
      c.req.query('show') === 'body'
        ? `<h2>Body</h2><pre>${esc(l.body)}</pre>`
        : `<p><a class="button" href="/dlq/letters/${encodeURIComponent(id)}?show=body">Show the message body</a></p>`;
    return c.html(
      frame('Letter', `<h1>Dead letter ${esc(id)}</h1><table><tbody>${attrs}</tbody></table>${body}`),
    );
  });
};
