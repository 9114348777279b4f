/** Pieces of HTML more than one page draws: status badges, a lease's time left, a table of letters. */
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import type { DeadLetterSummary } from '../../shared/ops/dlq-letters.ts';
import type { Bounded } from './data.ts';
import { esc, human } from './html.ts';

/** The banners of the calls that gave no answer. */
export const problemsOf = (...results: Bounded<unknown>[]): string[] =>
  results.flatMap((r) => (r.ok ? [] : [r.problem]));

/** A job's status as a badge: completed good, dead bad, the rest a warning. */
export function statusBadge(status: JobStatus): string {
  const kind = status === JobStatus.Completed ? 'good' : status === JobStatus.Dead ? 'bad' : 'warn';
  return `<span class="badge ${kind}">${esc(status)}</span>`;
}

/** A lease's time left, or how long ago it ended. */
export function leaseLeft(remainingMs: number): string {
  return remainingMs >= 0 ? `${human(remainingMs)} left` : `ended ${human(-remainingMs)} ago`;
}

/** A link to a job's page. */
export function jobLink(dedupKey: string): string {
  return `<a href="/jobs/${encodeURIComponent(dedupKey)}">${esc(dedupKey)}</a>`;
}

/** The letters a redrive will act on, as its confirmation lists them. */
export function letterTable(letters: readonly DeadLetterSummary[]): string {
  return `<table><thead><tr><th>job</th><th>type</th><th>reason</th><th class="num">attempts</th></tr></thead><tbody>${letters
    .map(
      (l) =>
        `<tr><td>${esc(l.dedupKey ?? '-')}</td><td>${esc(l.type ?? '')}</td><td>${esc(l.reason)}</td><td class="num">${l.attempts ?? ''}</td></tr>`,
    )
    .join('')}</tbody></table>`;
}
