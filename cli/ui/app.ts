/**
 * `leaseq ui`: the routes of the local inspector. Pages are rendered on the server; every store call is
 * bounded (data.ts), every request passes the gate (guard.ts), and the actions (redrive, purge, cancel)
 * ask for a confirmation first and are absent in read-only mode.
 */
import { type Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { scanJobSummaries } from '../../shared/core/adapters/dynamodb-scans.ts';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { cancelJob, describeCancel } from '../../shared/ops/cancel.ts';
import { findDeadLetter, purgeDlq, surveyDeadLetters } from '../../shared/ops/dlq.ts';
import { DEAD_LETTER_REASONS, type DeadLetterSummary } from '../../shared/ops/dlq-letters.ts';
import { type RedriveItem, redrive } from '../../shared/ops/dlq-redrive.ts';
import { inspectJob } from '../../shared/ops/inspect.ts';
import { collect, summariseJobs } from '../../shared/ops/jobs.ts';
import { listLeases } from '../../shared/ops/leases.ts';
import { queueStats, totalDepth } from '../../shared/ops/queue-stats.ts';
import type { OpsTarget } from '../../shared/ops/target.ts';
import { jobTimeline } from '../../shared/ops/timeline.ts';
import { operatorIdentity } from '../commands/redrive-input.ts';
import { formatErrorText } from '../format.ts';
import { CHART_SCRIPT } from './chart-script.ts';
import { type Bounded, bounded, listProblems, type ProblemFilter } from './data.ts';
import { readOnlyDeadLetters } from './dlq-read-only.ts';
import { esc, human, iso, page } from './html.ts';
import { sessionGate, UiSessions } from './session.ts';
import { OtlpFormatError, parseOtlpJson, type SpanBuffer } from './spans.ts';
import { waterfall } from './waterfall.ts';

export interface UiConfig {
  readonly target: OpsTarget;
  /** The CLI's target line, shown in the header. */
  readonly targetLine: string;
  /** The token of the first printed link: traded once for a session (session.ts). */
  readonly token: string;
  /** The inspector's host name, `leaseq-<random>.localhost` (guard.ts `newUiHost`). */
  readonly host: string;
  /** The token the trace intake takes spans with (header `x-leaseq-trace-token`). */
  readonly traceToken: string;
  /** The port the server listens on (known once it listens). */
  readonly port: () => number;
  readonly readOnly: boolean;
  readonly spans: SpanBuffer;
  /** Bound of one read (ms). @default 4000 */
  readonly timeoutMs?: number;
  /** Bound of one action, a redrive or purge (ms). @default 120000 */
  readonly actionTimeoutMs?: number;
  /** Local worker pools' completed-job counts (`leaseq workers`), when any run. */
  readonly localWorkers?: () => Readonly<Record<string, number>> | undefined;
  /** One line per action for the terminal (counts only, no payload). */
  readonly log?: (line: string) => void;
}

/** Biggest OTLP request taken (a batch of the BatchSpanProcessor is far below). */
const TRACES_MAX_BYTES = 4 * 1024 * 1024;

/** Security headers of every answer: no framing, no referrer, nothing cached, scripts only inline ones. */
const HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  // Not no-referrer: with it Chromium sends `Origin: null` on the pages' own form posts, which the gate
  // refuses; same-origin still sends no URL (with its query) to another site.
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

export function createUiApp(config: UiConfig): Hono {
  const app = new Hono();
  const { target } = config;
  const readMs = config.timeoutMs ?? 4000;
  const actionMs = config.actionTimeoutMs ?? 120_000;
  const log = config.log ?? (() => {});
  const frame = (
    title: string,
    body: string,
    extra: { problems?: string[]; notice?: string; script?: string } = {},
  ) => page(body, { title, target: config.targetLine, ...extra });
  const problemsOf = (...results: Bounded<unknown>[]) => results.flatMap((r) => (r.ok ? [] : [r.problem]));

  app.use('*', async (c, next) => {
    for (const [k, v] of Object.entries(HEADERS)) c.header(k, v);
    await next();
  });
  app.use(
    '*',
    sessionGate({
      sessions: new UiSessions(config.token),
      host: config.host,
      port: config.port,
      traceToken: config.traceToken,
      refuse: (c, why, status) =>
        c.html(
          page(`<h1>${status} ${status === 401 ? 'Unauthorized' : 'Forbidden'}</h1><p>${esc(why)}</p>`, {
            title: 'Refused',
            target: '',
          }),
          status,
        ),
      onNewLink: (url) => log(`the link was used; for another browser: ${url}`),
    }),
  );

  app.onError((error, c) => {
    // One line, no stack and no request body: the terminal and the page say what failed.
    log(`error on ${c.req.method} ${c.req.path}: ${error.name}: ${error.message}`.slice(0, 300));
    return c.html(
      frame(
        'Error',
        `<h1>Something failed</h1><div class="banner" role="alert">${esc(`${error.name}: ${error.message}`)}</div>`,
      ),
      500,
    );
  });

  // ---------- overview ----------
  const overviewData = async () => {
    const now = Date.now();
    const [queue, dlq, jobs, leases] = await Promise.all([
      bounded('SQS', 'jobs queue depth (GetQueueAttributes)', readMs, () =>
        queueStats(target.clients.sqs, target.names.queueUrl),
      ),
      bounded('SQS', 'DLQ depth (GetQueueAttributes)', readMs, () =>
        queueStats(target.clients.sqs, target.names.dlqUrl),
      ),
      bounded('DynamoDB', 'scan of the jobs table', readMs, async () =>
        summariseJobs(
          await collect(scanJobSummaries(target.clients.doc, target.names.jobsTable)),
          Date.now(),
        ),
      ),
      bounded('DynamoDB', 'job and named leases (scans)', readMs, () => listLeases(target)),
    ]);
    return { now, queue, dlq, jobs, leases };
  };

  app.get('/api/overview', async (c) => {
    const d = await overviewData();
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
    const d = await overviewData();
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
          `<tr><td><a href="/jobs/${encodeURIComponent(l.dedupKey)}">${esc(l.dedupKey)}</a></td><td>${esc(l.type ?? '')}</td><td>${esc(l.owner ?? '')}</td><td class="num">${esc(l.attempts)}</td><td>${l.remainingMs >= 0 ? `${human(l.remainingMs)} left` : `ended ${human(-l.remainingMs)} ago`}</td><td>${l.stuck ? `<span class="badge bad">${esc(l.stuck)}</span>` : '<span class="badge good">live</span>'}</td></tr>`,
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
    const local = config.localWorkers?.();
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
      frame('Overview', body, {
        problems: problemsOf(d.queue, d.dlq, d.jobs, d.leases),
        script: CHART_SCRIPT,
      }),
    );
  });

  // ---------- problem jobs ----------
  app.get('/jobs', async (c) => {
    const now = Date.now();
    const status = c.req.query('status') || undefined;
    const type = c.req.query('type') || undefined;
    const error = c.req.query('error') || undefined;
    const age = c.req.query('age') || undefined;
    const ages: Record<string, number> = {
      '15m': 900_000,
      '1h': 3_600_000,
      '24h': 86_400_000,
      '7d': 604_800_000,
    };
    const filter: ProblemFilter = {
      ...(status && (STATUS_FILTERS as string[]).includes(status)
        ? { status: status as JobStatus | 'stuck' }
        : {}),
      ...(type ? { type } : {}),
      ...(error ? { error } : {}),
      ...(age && ages[age] ? { maxAgeMs: ages[age] } : {}),
    };
    const listing = await bounded('DynamoDB', 'query of the problems index', readMs, () =>
      listProblems(target, filter, now),
    );
    const rows = listing;
    const shown = listing.ok ? listing.value.rows : [];
    const all = shown;
    const types = [...new Set(all.map((r) => r.type).filter((t): t is string => !!t))].sort();
    const option = (value: string, label: string, selected: string | undefined) =>
      `<option value="${esc(value)}"${value === (selected ?? '') ? ' selected' : ''}>${esc(label)}</option>`;
    const form = `<form class="filters" method="get" action="/jobs" role="search" aria-label="filter problem jobs">
<label for="f-status">status<select id="f-status" name="status">${option('', 'any', status)}${STATUS_FILTERS.map(
      (s) => option(s, s, status),
    ).join('')}</select></label>
<label for="f-type">type<select id="f-type" name="type">${option('', 'any', type)}${types.map((t) => option(t, t, type)).join('')}</select></label>
<label for="f-error">error or stuck reason contains<input id="f-error" name="error" value="${esc(error ?? '')}"></label>
<label for="f-age">last change within<select id="f-age" name="age">${option('', 'any time', age)}${Object.keys(
      ages,
    )
      .map((a) => option(a, a, age))
      .join('')}</select></label>
<button type="submit">Filter</button></form>`;
    const table = shown.length
      ? `<table><thead><tr><th>job</th><th>status</th><th>type</th><th class="num">attempts</th><th>worker</th><th>problem</th><th>last change</th></tr></thead><tbody>${shown
          .slice(0, 500)
          .map(
            (r) =>
              `<tr><td><a href="/jobs/${encodeURIComponent(r.dedupKey)}">${esc(r.dedupKey)}</a></td><td>${statusBadge(r.status)}</td><td>${esc(r.type ?? '')}</td><td class="num">${esc(r.attempts)}</td><td>${esc(r.owner ?? '')}</td><td>${esc(r.error ?? r.stuck ?? (r.attempts > 1 ? 'retried' : ''))}</td><td>${r.at === undefined ? '-' : `${human(now - r.at)} ago`}</td></tr>`,
          )
          .join(
            '',
          )}</tbody></table>${shown.length > 500 ? `<p class="muted">First 500 of ${shown.length}.</p>` : ''}`
      : `<p class="muted">${rows.ok ? 'No job matches.' : 'Jobs unavailable (see above).'}</p>`;
    const source = listing.ok
      ? listing.value.source.kind === 'index'
        ? `Read from the problems index (${listing.value.source.readUnits} read units).`
        : 'This jobs table has no problems index (made before it): read with a scan.'
      : '';
    const body = `<h1>Problem jobs</h1><p class="muted">Jobs that were retried, waited for a retry, lost a lease, are dead or stuck, newest problem first. ${esc(source)}</p>${form}${table}`;
    return c.html(frame('Problem jobs', body, { problems: problemsOf(rows) }));
  });

  // ---------- one job ----------
  app.get('/jobs/:key', async (c) => {
    const key = c.req.param('key');
    const show = c.req.query('show');
    const report = await bounded('DynamoDB', `read of job ${key}`, readMs, () => inspectJob(target, key));
    if (!report.ok) return c.html(frame(key, `<h1>Job ${esc(key)}</h1>`, { problems: [report.problem] }));
    if (!report.value) {
      return c.html(
        frame(
          key,
          `<h1>Job ${esc(key)}</h1><p>No job item under this key (never claimed, or removed by TTL).</p>`,
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
        `${lease.remainingMs >= 0 ? `${human(lease.remainingMs)} left` : `ended ${human(-lease.remainingMs)} ago`}${lease.stuck ? ` <span class="badge bad">${esc(lease.stuck)}</span>` : ''}`,
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
    const data =
      show === 'data'
        ? `<h2>Checkpoint data and result</h2><pre>${esc(JSON.stringify({ checkpointData: job.checkpoint?.data, result: job.result }, null, 2))}</pre>`
        : `<p><a class="button" href="/jobs/${encodeURIComponent(key)}?show=data">Show checkpoint data and result</a></p>`;
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

  // ---------- dead letters ----------
  const survey = () =>
    bounded('SQS', 'browse of the DLQ', Math.max(readMs, 15_000), () =>
      surveyDeadLetters(target.clients.sqs, target.names.dlqUrl, { limit: 500 }),
    );

  app.get('/dlq', async (c) => {
    // Read-only receives nothing (a receive hides a letter and counts): counts and dead jobs instead.
    if (config.readOnly) {
      const { body, problems } = await readOnlyDeadLetters(target, readMs, Date.now());
      return c.html(frame('Dead letters', body, { problems }));
    }
    const result = await survey();
    const letters = result.ok ? result.value.letters : [];
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
        const box = selectable
          ? l.dedupKey
            ? `<input type="checkbox" name="letter" value="${esc(l.messageId)}" id="${id}" aria-label="select the letter of ${esc(l.dedupKey)}">`
            : '<span class="muted" title="no readable dedup key: use leaseq dlq redrive">–</span>'
          : '';
        return `<tr>${selectable ? `<td>${box}</td>` : ''}<td>${l.dedupKey ? `<a href="/jobs/${encodeURIComponent(l.dedupKey)}">${esc(l.dedupKey)}</a>` : '<span class="muted">unreadable</span>'}</td><td>${esc(l.type ?? '')}</td><td>${esc(l.reason)}</td><td>${esc(l.errorClass ?? '')}</td><td class="num">${l.attempts ?? ''}</td><td>${esc(l.deadAt ?? '')}</td><td><a href="/dlq/letters/${encodeURIComponent(l.messageId)}">letter</a></td></tr>`;
      })
      .join('');
    const table = letters.length
      ? `<table><thead><tr>${selectable ? '<th><span class="muted">select</span></th>' : ''}<th>job</th><th>type</th><th>reason</th><th>error</th><th class="num">attempts</th><th>dead at</th><th>details</th></tr></thead><tbody>${rows}</tbody></table>`
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
    return c.html(frame('Dead letters', body, { problems: problemsOf(result) }));
  });

  app.get('/dlq/letters/:id', async (c) => {
    const id = c.req.param('id');
    if (config.readOnly) {
      const why = 'Started with --read-only: a letter is not read (finding it means receiving letters).';
      return c.html(frame('Read-only', `<h1>Read-only</h1><p>${esc(why)}</p>`), 403);
    }
    const letter = await bounded('SQS', 'search of the DLQ', Math.max(readMs, 15_000), () =>
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

  const refuseIfReadOnly = (c: Context) =>
    config.readOnly
      ? c.html(frame('Read-only', '<h1>Read-only</h1><p>Started with --read-only: actions are off.</p>'), 403)
      : undefined;

  app.post('/dlq/redrive', async (c) => {
    const refused = refuseIfReadOnly(c);
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
    const result = await survey();
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
    const runs = [await bounded('SQS', 'redrive', actionMs, () => redrive(target, { filter }))];
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

  app.post('/jobs/:key/cancel', async (c) => {
    const refused = refuseIfReadOnly(c);
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
    const done = await bounded('DynamoDB', `cancel of ${key}`, actionMs, () =>
      cancelJob(target, key, { by: operatorIdentity(), ...(reason ? { reason } : {}) }),
    );
    if (done.ok) log(`cancel from the inspector: ${done.value.outcome}`);
    const body = done.ok
      ? `<h1>Cancel</h1><p id="outcome">${esc(describeCancel(key, done.value))}</p>${back}`
      : `<h1>Cancel</h1>${back}`;
    return c.html(frame('Cancel', body, { problems: problemsOf(done) }));
  });

  app.post('/dlq/purge', async (c) => {
    const refused = refuseIfReadOnly(c);
    if (refused) return refused;
    const form = await c.req.parseBody();
    if (form.confirmed !== 'yes') {
      const depth = await bounded('SQS', 'DLQ depth', readMs, () =>
        queueStats(target.clients.sqs, target.names.dlqUrl),
      );
      const n = depth.ok ? totalDepth(depth.value) : undefined;
      const body = `<h1>Purge the DLQ?</h1><p>Deletes every dead letter${n === undefined ? '' : ` (about ${n})`}; their jobs do not run again. This cannot be undone.</p>
<form method="post" action="/dlq/purge"><input type="hidden" name="confirmed" value="yes"><button type="submit" class="danger" id="confirm">Confirm purge</button> <a href="/dlq">Cancel</a></form>`;
      return c.html(frame('Confirm purge', body, { problems: problemsOf(depth) }));
    }
    const done = await bounded('SQS', 'purge of the DLQ', actionMs, () =>
      purgeDlq(target.clients.sqs, target.names.dlqUrl),
    );
    if (done.ok) log(`purge from the inspector: ${done.value.deleted} deleted`);
    const body = done.ok
      ? `<h1>Purged</h1><p id="outcome">${done.value.deleted} deleted, ${done.value.remaining} remaining.</p><p><a href="/dlq">Back</a></p>`
      : '<h1>Purge</h1>';
    return c.html(frame('Purge', body, { problems: problemsOf(done) }));
  });

  // ---------- trace intake ----------
  app.post(
    '/v1/traces',
    bodyLimit({ maxSize: TRACES_MAX_BYTES, onError: (c) => c.json({ error: 'request too large' }, 413) }),
    async (c) => {
      const type = (c.req.header('content-type') ?? '').split(';')[0]?.trim().toLowerCase();
      if (type !== 'application/json') {
        return c.json(
          {
            error:
              'only OTLP/HTTP JSON is taken: set OTEL_EXPORTER_OTLP_PROTOCOL=http/json (leaseq workers send JSON already)',
          },
          415,
        );
      }
      try {
        config.spans.add(parseOtlpJson(await c.req.json()));
      } catch (error) {
        const message = error instanceof OtlpFormatError ? error.message : 'body is not JSON';
        return c.json({ error: message }, 400);
      }
      return c.json({});
    },
  );

  return app;
}

/** The problem jobs' status filter: a status, or `stuck` (the stuck rule of `leaseq leases`). */
const STATUS_FILTERS: string[] = [...Object.values(JobStatus), 'stuck'];

function statusBadge(status: JobStatus): string {
  const kind = status === JobStatus.Completed ? 'good' : status === JobStatus.Dead ? 'bad' : 'warn';
  return `<span class="badge ${kind}">${esc(status)}</span>`;
}

function letterTable(letters: readonly DeadLetterSummary[]): string {
  return `<table><thead><tr><th>job</th><th>type</th><th>reason</th><th class="num">attempts</th></tr></thead><tbody>${letters
    .map(
      (l) =>
        `<tr><td>${esc(l.dedupKey ?? '-')}</td><td>${esc(l.type ?? '')}</td><td>${esc(l.reason)}</td><td class="num">${l.attempts ?? ''}</td></tr>`,
    )
    .join('')}</tbody></table>`;
}
