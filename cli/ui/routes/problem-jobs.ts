/** The problem jobs `/jobs`: from the problems index, filtered by status, type, error text and age. */
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { jobLink, problemsOf, statusBadge } from '../components.ts';
import type { UiRoute } from '../context.ts';
import { bounded, listProblems, type ProblemFilter } from '../data.ts';
import { esc, human } from '../html.ts';

/** The problem jobs' status filter: a status, or `stuck` (the stuck rule of `leaseq leases`). */
const STATUS_FILTERS: string[] = [...Object.values(JobStatus), 'stuck'];

/** The age filter's choices (ms). */
const AGES: Record<string, number> = {
  '15m': 900_000,
  '1h': 3_600_000,
  '24h': 86_400_000,
  '7d': 604_800_000,
};

export const problemJobsRoutes: UiRoute = (app, ui) => {
  app.get('/jobs', async (c) => {
    const now = Date.now();
    const status = c.req.query('status') || undefined;
    const type = c.req.query('type') || undefined;
    const error = c.req.query('error') || undefined;
    const age = c.req.query('age') || undefined;
    const filter: ProblemFilter = {
      ...(status && STATUS_FILTERS.includes(status) ? { status: status as JobStatus | 'stuck' } : {}),
      ...(type ? { type } : {}),
      ...(error ? { error } : {}),
      ...(age && AGES[age] ? { maxAgeMs: AGES[age] } : {}),
    };
    const listing = await bounded('DynamoDB', 'query of the problems index', ui.readMs, () =>
      listProblems(ui.target, filter, now),
    );
    const shown = listing.ok ? listing.value.rows : [];
    const types = [...new Set(shown.map((r) => r.type).filter((t): t is string => !!t))].sort();
    const option = (value: string, label: string, selected: string | undefined) =>
      `<option value="${esc(value)}"${value === (selected ?? '') ? ' selected' : ''}>${esc(label)}</option>`;
    const form = `<form class="filters" method="get" action="/jobs" role="search" aria-label="filter problem jobs">
<label for="f-status">status<select id="f-status" name="status">${option('', 'any', status)}${STATUS_FILTERS.map(
      (s) => option(s, s, status),
    ).join('')}</select></label>
<label for="f-type">type<select id="f-type" name="type">${option('', 'any', type)}${types.map((t) => option(t, t, type)).join('')}</select></label>
<label for="f-error">error or stuck reason contains<input id="f-error" name="error" value="${esc(error ?? '')}"></label>
<label for="f-age">last change within<select id="f-age" name="age">${option('', 'any time', age)}${Object.keys(
      AGES,
    )
      .map((a) => option(a, a, age))
      .join('')}</select></label>
<button type="submit">Filter</button></form>`;
    const table = shown.length
      ? `<table><thead><tr><th>job</th><th>status</th><th>type</th><th class="num">attempts</th><th>worker</th><th>problem</th><th>last change</th></tr></thead><tbody>${shown
          .slice(0, 500)
          .map(
            (r) =>
              `<tr><td>${jobLink(r.dedupKey)}</td><td>${statusBadge(r.status)}</td><td>${esc(r.type ?? '')}</td><td class="num">${esc(r.attempts)}</td><td>${esc(r.owner ?? '')}</td><td>${esc(r.error ?? r.stuck ?? (r.attempts > 1 ? 'retried' : ''))}</td><td>${r.at === undefined ? '-' : `${human(now - r.at)} ago`}</td></tr>`,
          )
          .join(
            '',
          )}</tbody></table>${shown.length > 500 ? `<p class="muted">First 500 of ${shown.length}.</p>` : ''}`
      : `<p class="muted">${listing.ok ? 'No job matches.' : 'Jobs unavailable (see above).'}</p>`;
    const source = listing.ok
      ? listing.value.source.kind === 'index'
        ? `Read from the problems index (${listing.value.source.readUnits} read units).`
        : 'This jobs table has no problems index (made before it): read with a scan.'
      : '';
    const body = `<h1>Problem jobs</h1><p class="muted">Jobs that were retried, waited for a retry, lost a lease, are dead or stuck, newest problem first. ${esc(source)}</p>${form}${table}`;
    return c.html(ui.frame('Problem jobs', body, { problems: problemsOf(listing) }));
  });
};
