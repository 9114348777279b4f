/** Purge the DLQ from the inspector, `POST /dlq/purge`: a confirmation page with the depth first. */
import { purgeDlq } from '../../../shared/ops/dlq.ts';
import { queueStats, totalDepth } from '../../../shared/ops/queue-stats.ts';
import { problemsOf } from '../components.ts';
import type { UiRoute } from '../context.ts';
import { bounded } from '../data.ts';

export const dlqPurgeRoutes: UiRoute = (app, ui) => {
  const { frame, target, log } = ui;
  app.post('/dlq/purge', async (c) => {
    const refused = ui.refuseIfReadOnly(c);
    if (refused) return refused;
    const form = await c.req.parseBody();
    if (form.confirmed !== 'yes') {
      const depth = await bounded('SQS', 'DLQ depth', ui.readMs, () =>
        queueStats(target.clients.sqs, target.names.dlqUrl),
      );
      const n = depth.ok ? totalDepth(depth.value) : undefined;
      const body = `<h1>Purge the DLQ?</h1><p>Deletes every dead letter${n === undefined ? '' : ` (about ${n})`}; their jobs do not run again. This cannot be undone.</p>
<form method="post" action="/dlq/purge"><input type="hidden" name="confirmed" value="yes"><button type="submit" class="danger" id="confirm">Confirm purge</button> <a href="/dlq">Cancel</a></form>`;
      return c.html(frame('Confirm purge', body, { problems: problemsOf(depth) }));
    }
    const done = await bounded('SQS', 'purge of the DLQ', ui.actionMs, () =>
      purgeDlq(target.clients.sqs, target.names.dlqUrl),
    );
    if (done.ok) log(`purge from the inspector: ${done.value.deleted} deleted`);
    const body = done.ok
      ? `<h1>Purged</h1><p id="outcome">${done.value.deleted} deleted, ${done.value.remaining} remaining.</p><p><a href="/dlq">Back</a></p>`
      : '<h1>Purge</h1>';
    return c.html(frame('Purge', body, { problems: problemsOf(done) }));
  });
};
