/** The overview `/` and its poll `/api/overview`: queue and DLQ depth, job counts, leases, workers. */
import { scanJobSummaries } from '../../../shared/core/adapters/dynamodb-scans.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { collect, summariseJobs } from '../../../shared/ops/jobs.ts';
import { listLeases } from '../../../shared/ops/leases.ts';
import { queueStats, totalDepth } from '../../../shared/ops/queue-stats.ts';
import { CHART_SCRIPT } from '../chart-script.ts';
import { jobLink, leaseLeft, problemsOf } from '../components.ts';
import type { UiContext, UiRoute } from '../context.ts';
import { bounded } from '../data.ts';
import { esc } from '../html.ts';

const overviewData = async ({ target, readMs }: UiContext) => {
  const now = Date.now();
  const [queue, dlq, jobs, leases] = await Promise.all([
    bounded('SQS', 'jobs queue depth (GetQueueAttributes)', readMs, () =>
      queueStats(target.clients.sqs, target.names.queueUrl),
    ),
    bounded('SQS', 'DLQ depth (GetQueueAttributes)', readMs, () =>
      queueStats(target.clients.sqs, target.names.dlqUrl),
    ),
    bounded('DynamoDB', 'scan of the jobs table', readMs, async () =>
      summariseJobs(await collect(scanJobSummaries(target.clients.doc, target.names.jobsTable)), Date.now()),
    ),
    bounded('DynamoDB', 'job and named leases (scans)', readMs, () => listLeases(target)),
  ]);
  return { now, queue, dlq, jobs, leases };
};

export const overviewRoutes: UiRoute = (app, ui) => {
  app.get('/api/overview', async (c) => {
    const d = await overviewData(ui);
    return c.json({
      at: d.now,
      queue: d.queue.ok ? d.queue.value : null,
      dlq: d.dlq.ok ? { ...d.dlq.value, depth: totalDepth(d.dlq.value) } : null,
      jobs: d.jobs.ok
        ? {
            byStatus: d.jobs.value.byStatus,
            live: d.jobs.value.live,
            stuck: d.jobs.value.stuck,
            total: d.jobs.value.total,
          }
        : null,
      problems: problemsOf(d.queue, d.dlq, d.jobs, d.leases),
    });
  });

  app.get('/', async (c) => {
    const d = await overviewData(ui);
    const q = d.queue.ok ? d.queue.value : undefined;
    const dl = d.dlq.ok ? d.dlq.value : undefined;
    const j = d.jobs.ok ? d.jobs.value : undefined;
    const n = (v: number | undefined) => (v === undefined ? '–' : String(v));
    const card = (id: string, label: string, value: string) =>
      `<div class="card"><div class="n" id="${id}">${esc(value)}</div><div class="muted">${esc(label)}</div></div>`;
    const cards = `<div class="cards">${[
      card('c-visible', 'jobs visible', n(q?.visible)),
      card('c-inflight', 'jobs in flight', n(q?.inFlight)),
      card('c-delayed', 'jobs delayed', n(q?.delayed)),
      card('c-dlq', 'dead letters', n(dl ? totalDepth(dl) : undefined)),
      card('c-live', 'live leases', n(j?.live)),
      card('c-stuck', 'stuck', n(j?.stuck)),
      card('c-rate', 'completed / s', '–'),
    ].join('')}</div>`;
    const statuses = j
      ? `<p>${Object.values(JobStatus)
          .map((s) => `${esc(s)}: <strong>${j.byStatus[s]}</strong>`)
          .join(' · ')} (${j.total} job items)</p>`
      : '';
    const chart = `<h2>Since this page opened</h2>
<div class="legend" aria-hidden="true"><span><i class="sw" style="background:#0b57d0"></i>visible</span><span><i class="sw" style="background:#7a3fb0"></i>in flight</span><span><i class="sw" style="background:#8a6100"></i>delayed</span><span><i class="sw" style="background:#b3261e"></i>dead letters</span><span><i class="sw" style="background:#1e7d3a"></i>completed / s</span></div>
<svg id="chart" role="img" aria-label="queue depth, DLQ depth and completion rate over the time this page has been open" width="720" height="180" viewBox="0 0 720 180"></svg>
<p class="muted" id="chart-note">Polling every 2 s.</p>`;
    const leases = d.leases.ok ? d.leases.value : undefined;
    const leaseRows = (leases?.jobLeases ?? [])
      .map(
        (l) =>
          `<tr><td>${jobLink(l.dedupKey)}</td><td>${esc(l.type ?? '')}</td><td>${esc(l.owner ?? '')}</td><td class="num">${esc(l.attempts)}</td><td>${leaseLeft(l.remainingMs)}</td><td>${l.stuck ? `<span class="badge bad">${esc(l.stuck)}</span>` : '<span class="badge good">live</span>'}</td></tr>`,
      )
      .join('');
    const leaseTable = leases
      ? leases.jobLeases.length === 0
        ? '<p class="muted">No job holds a lease.</p>'
        : `<table><caption class="muted">job leases, soonest end first</caption><thead><tr><th>job</th><th>type</th><th>worker</th><th class="num">attempts</th><th>lease</th><th>state</th></tr></thead><tbody>${leaseRows}</tbody></table>`
      : '<p class="muted">Leases unavailable (see above).</p>';
    const abandoned = (leases?.namedLeases ?? []).filter((l) => l.state === 'abandoned');
    const named = abandoned.length
      ? `<p><span class="badge warn">${abandoned.length} abandoned named lease${abandoned.length === 1 ? '' : 's'}</span> ${abandoned.map((l) => esc(l.leaseKey)).join(', ')}</p>`
      : '';
    const completed = j?.completedByWorker ?? [];
    const total = completed.reduce((s, w) => s + w.completed, 0);
    const local = ui.config.localWorkers?.();
    const workers = completed.length
      ? `<table><thead><tr><th>worker</th><th class="num">jobs completed</th><th class="num">share</th></tr></thead><tbody>${completed
          .map(
            (w) =>
              `<tr><td>${esc(w.worker)}</td><td class="num">${w.completed}</td><td class="num">${((100 * w.completed) / total).toFixed(0)} %</td></tr>`,
          )
          .join('')}</tbody></table>`
      : '<p class="muted">No completed jobs yet.</p>';
    const localLine = local
      ? `<p class="muted">Local worker pools right now (jobs per live worker): ${
          Object.entries(local)
            .map(([w, k]) => `${esc(w)} ${esc(k)}`)
            .join(', ') || '–'
        }</p>`
      : '';
    const body = `<h1>Overview</h1>${cards}${statuses}${chart}<h2>Leases</h2>${leaseTable}${named}<h2>Workers</h2>${workers}${localLine}`;
    return c.html(
      ui.frame('Overview', body, {
        problems: problemsOf(d.queue, d.dlq, d.jobs, d.leases),
        script: CHART_SCRIPT,
      }),
    );
  });
};
