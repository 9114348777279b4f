/** Cancel one job, `POST /jobs/<dedupKey>/cancel`: a confirmation page first, then `cancelJob`. */
import { cancelJob, describeCancel } from '../../../shared/ops/cancel.ts';
import { problemsOf } from '../components.ts';
import type { UiRoute } from '../context.ts';
import { bounded } from '../data.ts';
import { esc } from '../html.ts';

export const jobCancelRoutes: UiRoute = (app, ui) => {
  const { frame } = ui;
  app.post('/jobs/:key/cancel', async (c) => {
    const refused = ui.refuseIfReadOnly(c);
    if (refused) return refused;
    const key = c.req.param('key');
    const form = await c.req.parseBody();
    const reason = typeof form.reason === 'string' && form.reason.trim() ? form.reason.trim() : undefined;
    const back = `<p><a href="/jobs/${encodeURIComponent(key)}">Back to the job</a></p>`;
    if (form.confirmed !== 'yes') {
      const body = `<h1>Cancel job ${esc(key)}?</h1><p>The job never runs again: if it runs now, it stops at its next heartbeat and commits nothing; a retry it waits for does not run; copies sent under its key are dropped. This cannot be undone.</p>
<form method="post" action="/jobs/${encodeURIComponent(key)}/cancel"><input type="hidden" name="confirmed" value="yes"><label for="c-reason">reason <input id="c-reason" name="reason" maxlength="240"></label> <button type="submit" class="danger" id="confirm">Confirm cancel</button> <a href="/jobs/${encodeURIComponent(key)}">Back</a></form>`;
      return c.html(frame('Confirm cancel', body));
    }
    const done = await bounded('DynamoDB', `cancel of ${key}`, ui.actionMs, () =>
      cancelJob(ui.target, key, { by: ui.actor, ...(reason ? { reason } : {}) }),
    );
    if (done.ok) ui.log(`cancel from the inspector: ${done.value.outcome}`);
    const body = done.ok
      ? `<h1>Cancel</h1><p id="outcome">${esc(describeCancel(key, done.value))}</p>${back}`
      : `<h1>Cancel</h1>${back}`;
    return c.html(frame('Cancel', body, { problems: problemsOf(done) }));
  });
};
