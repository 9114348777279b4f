/**
 * `GET /find?q=`: the search box of every page. A dedup key is one GetItem: the job's page, or a page
 * saying no job has that key; filters list the problem jobs from the `problems` index, a page at a time
 * (`cursor`), with a bounded count (shared/ops/find-jobs.ts). The box's syntax is search.ts's.
 */
import type { Hono } from 'hono';
import {
  describeCount,
  FIND_COUNT_BOUND,
  type FindPage,
  findJobByKey,
  findProblemJobs,
} from '../../shared/ops/find-jobs.ts';
import { ProblemJobsFilterError } from '../../shared/ops/problem-jobs.ts';
import { formatErrorText } from '../format.ts';
import { statusBadge } from './components.ts';
import { bounded } from './data.ts';
import type { FindUi } from './find-context.ts';
import { esc, human } from './html.ts';
import { parseSearch } from './search.ts';

const HELP = `<p>Type a dedup key to open its job, or filters to list problem jobs (retried, waiting for a retry, dead, stuck, cancelled):</p>
<ul><li><code>type:ledger.credit status:DEAD reason:max-attempts</code></li>
<li><code>error:"connection reset" since:1h</code> (since: a duration back from now, 90s 15m 1h 7d, or an ISO 8601 time)</li>
<li><code>status:RETRY_WAIT,stuck</code> · words outside a filter are error text: <code>status:DEAD timeout</code></li>
<li><code>key:type:123</code> for a key that starts like a filter</li></ul>`;

function resultTable(found: FindPage, now: number): string {
  if (found.jobs.length === 0) {
    return found.next
      ? '<p class="muted" id="find-none">No match in the part of the problems index this page read (one query per shard): "Next page" reads on.</p>'
      : '<p class="muted" id="find-none">No problem job matches.</p>';
  }
  const rows = found.jobs
    .map(
      (j) =>
        `<tr><td><a href="/jobs/${encodeURIComponent(j.dedupKey)}">${esc(j.dedupKey)}</a></td><td>${statusBadge(j.status)}${j.stuck ? ` <span class="badge bad">${esc(j.stuck)}</span>` : ''}</td><td>${esc(j.type ?? '')}</td><td class="num">${esc(j.attempts)}</td><td>${esc(j.deadReason ?? '')}</td><td>${esc(formatErrorText(j.lastErrorClass, j.lastError) ?? '')}</td><td>${esc(`${human(now - j.problemAt)} ago`)}</td></tr>`,
    )
    .join('');
  return `<table id="find-results"><thead><tr><th>job</th><th>status</th><th>type</th><th class="num">attempts</th><th>reason</th><th>last error</th><th>last problem</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** Registers `GET /find`. */
export function findRoute(app: Hono, ui: FindUi): void {
  app.get('/find', async (c) => {
    const now = Date.now();
    const q = c.req.query('q') ?? '';
    const cursor = c.req.query('cursor') || undefined;
    const from = Math.max(0, Math.min(1_000_000, Number.parseInt(c.req.query('from') ?? '0', 10) || 0));
    const search = parseSearch(q, now);
    const frame = (body: string, extra: { problems?: string[] } = {}) =>
      ui.frame('Find', `<h1>Find</h1>${body}`, { ...extra, search: q });
    if (search.kind === 'empty') return c.html(frame(HELP));
    if (search.kind === 'invalid') {
      return c.html(
        frame(`<p class="banner" role="alert" id="find-problem">${esc(search.problem)}</p>${HELP}`),
        400,
      );
    }
    if (search.kind === 'key') {
      const read = await bounded('DynamoDB', `read of job ${search.key}`, ui.readMs, () =>
        findJobByKey(ui.target, search.key),
      );
      if (!read.ok) return c.html(frame('', { problems: [read.problem] }));
      if (read.value) return c.redirect(`/jobs/${encodeURIComponent(search.key)}`, 303);
      const hint = /\s/.test(search.key)
        ? ''
        : ` To search error text, write <code>error:${esc(search.key)}</code>.`;
      return c.html(
        frame(
          `<p id="find-none">No job has the dedup key <strong>${esc(search.key)}</strong> (one read of the jobs table by key): it was never claimed, or TTL removed it. A message refused before any claim is only in the <a href="/dlq">dead letters</a>.${hint}</p>`,
        ),
        404,
      );
    }
    const found = await bounded('DynamoDB', 'query of the problems index', ui.readMs, async () => {
      try {
        return await findProblemJobs(ui.target, search.filter, cursor ? { cursor } : {}, now);
      } catch (error) {
        if (error instanceof ProblemJobsFilterError) return error;
        throw error;
      }
    });
    if (!found.ok) return c.html(frame('', { problems: [found.problem] }));
    if (found.value instanceof ProblemJobsFilterError) {
      return c.html(frame(`<p class="banner" role="alert">${esc(found.value.message)}</p>`), 400);
    }
    const page = found.value;
    const shown = page.jobs.length;
    const range = shown === 0 ? '' : ` Rows ${from + 1}–${from + shown}.`;
    const count = `<p id="find-count"><strong>${esc(describeCount(page.count))}</strong> match${page.count.n === 1 && !page.count.atLeast ? 'es' : ''}${page.count.atLeast ? ` (the count stops at ${FIND_COUNT_BOUND} matches, or at one query per shard of the index)` : ''}.${range}</p>`;
    const next = page.next
      ? `<p><a class="button" id="find-next" href="/find?${new URLSearchParams({ q, cursor: page.next, from: String(from + shown) }).toString()}">Next page</a></p>`
      : '';
    const first = cursor
      ? `<p><a href="/find?${new URLSearchParams({ q }).toString()}">First page</a></p>`
      : '';
    const cost = `<p class="muted">Read from the problems index: ${page.readUnits} read units in ${page.queries} queries (this page and its count).</p>`;
    return c.html(frame(`${count}${resultTable(page, now)}${next}${first}${cost}`));
  });
}
