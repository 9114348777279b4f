/**
 * One job `/jobs/<dedupKey>`: its fields, lease, checkpoint, timeline and spans; its payload, result and
 * dead letters on request (a POST: reveal-page.ts).
 */
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { inspectJob } from '../../../shared/ops/inspect.ts';
import { jobTimeline } from '../../../shared/ops/timeline.ts';
import { formatErrorText } from '../../format.ts';
import { leaseLeft, statusBadge } from '../components.ts';
import type { UiRoute } from '../context.ts';
import { bounded } from '../data.ts';
import { esc, human, iso } from '../html.ts';
import { revealButton } from '../reveal-page.ts';
import { waterfall } from '../waterfall.ts';

export const jobRoutes: UiRoute = (app, ui) => {
  const { config, frame } = ui;
  app.get('/jobs/:key', async (c) => {
    const key = c.req.param('key');
    const report = await bounded('DynamoDB', `read of job ${key}`, ui.readMs, () =>
      inspectJob(ui.target, key),
    );
    if (!report.ok) return c.html(frame(key, `<h1>Job ${esc(key)}</h1>`, { problems: [report.problem] }));
    if (!report.value) {
      return c.html(
        frame(
          key,
          `<h1>Job ${esc(key)}</h1><p>No job item under this key (never claimed, or removed by TTL).</p><p class="muted">A message refused before any claim may still be in the DLQ:</p>${revealButton(key)}`,
        ),
        404,
      );
    }
    const { job, lease, retryInMs, ownerLeases } = report.value;
    const fields: [string, string][] = [
      ['status', statusBadge(job.status)],
      ['type', esc(job.type ?? '-')],
      ['attempts', esc(`${job.attempts}${job.refunds ? ` (${job.refunds} given back)` : ''}`)],
      ['worker', esc(job.owner ?? '-')],
      ['fencing token', esc(job.token)],
      ['message id', esc(job.messageId)],
      ['created', esc(job.createdAt ?? '-')],
      ['last error', job.lastError ? esc(formatErrorText(job.lastErrorClass, job.lastError)) : '-'],
    ];
    if (job.deadReason) fields.push(['dead reason', esc(job.deadReason)]);
    if (lease)
      fields.push([
        'lease',
        `${leaseLeft(lease.remainingMs)}${lease.stuck ? ` <span class="badge bad">${esc(lease.stuck)}</span>` : ''}`,
      ]);
    if (retryInMs !== undefined)
      fields.push(['retry', retryInMs >= 0 ? `due in ${human(retryInMs)}` : `due ${human(-retryInMs)} ago`]);
    if (ownerLeases.length)
      fields.push(['named leases held', ownerLeases.map((l) => esc(l.leaseKey)).join(', ')]);
    const checkpoint = job.checkpoint
      ? `<p>Last step <strong>${esc(job.checkpoint.step)}</strong> at ${esc(iso(job.checkpoint.at))}; done: ${job.checkpoint.done.map(esc).join(', ')}.</p>`
      : '<p class="muted">No checkpoint.</p>';
    const timeline = jobTimeline(job);
    const list = `<ol class="timeline" aria-label="timeline">${timeline
      .map(
        (e) =>
          `<li class="${esc(e.kind)}"><span class="when">${esc(iso(e.at))}</span><strong>${esc(e.title)}</strong>${e.owner ? ` <span class="muted">by ${esc(e.owner)}${e.token === undefined ? '' : `, token ${esc(e.token)}`}</span>` : ''}${e.detail ? `<div class="muted">${esc(e.detail)}</div>` : ''}</li>`,
      )
      .join(
        '',
      )}</ol>${job.historyDropped ? `<p class="muted">${esc(job.historyDropped)} older events dropped.</p>` : ''}`;
    const spans = config.spans.forMessages([job.messageId]);
    // Payloads are not on the page by default: only on request, by a POST (no URL or history holds one).
    const data = `<h2>Payload and result</h2><p class="muted">Not shown by default: the payload (from the job's dead letters${job.status === JobStatus.Dead ? ', where it can be edited and redriven' : ''}), the result and the checkpoint data, redacted by the deployment's hook.</p>${revealButton(key)}`;
    // Only an unfinished job can be cancelled; a read-only inspector shows no action.
    const cancellable = job.status === JobStatus.InProgress || job.status === JobStatus.RetryWait;
    const cancel =
      cancellable && !config.readOnly
        ? `<form method="post" action="/jobs/${encodeURIComponent(key)}/cancel" aria-label="cancel this job"><button type="submit" class="danger">Cancel this job…</button></form>`
        : '';
    const body = `<h1>Job ${esc(key)}</h1><table><tbody>${fields.map(([k, v]) => `<tr><th scope="row">${esc(k)}</th><td>${v}</td></tr>`).join('')}</tbody></table>${cancel}
<h2>Timeline</h2>${list}<h2>Checkpoint</h2>${checkpoint}<h2>Traces</h2>${waterfall(spans, config.spans.received)}${data}
`;
    return c.html(frame(`Job ${key}`, body));
  });
};
