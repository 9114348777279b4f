/**
 * The dead-letters page of a read-only inspector (`leaseq ui --read-only`). It receives no letter:
 * ReceiveMessage hides a letter for the browse's visibility timeout (a redrive or another reader then
 * misses it) and adds to its receive count, which is a change. It shows the DLQ's counts
 * (GetQueueAttributes) and the dead job items from the problems index, which name the letters leaseq's
 * workers wrote; a letter another sender put there shows in the count only.
 */
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { queueStats, totalDepth } from '../../shared/ops/queue-stats.ts';
import type { OpsTarget } from '../../shared/ops/target.ts';
import { bounded, listProblems } from './data.ts';
import { esc, human } from './html.ts';

/** What the page says it shows, and why. */
export const READ_ONLY_DLQ_NOTE =
  'Read-only: the letters themselves are not read (receiving one hides it for a while and counts a receive). ' +
  'Below: the DLQ’s counts, and the dead jobs from the problems index, which name the letters leaseq wrote; ' +
  'a letter another sender put in the DLQ shows in the counts only.';

/** The page's body and the banners of the calls that did not answer. */
export async function readOnlyDeadLetters(
  target: OpsTarget,
  readMs: number,
  now: number,
): Promise<{ body: string; problems: string[] }> {
  const [depth, dead] = await Promise.all([
    bounded('SQS', 'DLQ depth (GetQueueAttributes)', readMs, () =>
      queueStats(target.clients.sqs, target.names.dlqUrl),
    ),
    bounded('DynamoDB', 'query of the problems index', readMs, () =>
      listProblems(target, { status: JobStatus.Dead }, now),
    ),
  ]);
  const counts = depth.ok
    ? `<p id="dlq-counts">${totalDepth(depth.value)} letters in the DLQ: ${depth.value.visible} visible, ${depth.value.inFlight} being read, ${depth.value.delayed} delayed.</p>`
    : '';
  const rows = dead.ok ? dead.value.rows : [];
  const table = rows.length
    ? `<table><caption class="muted">dead jobs, newest first</caption><thead><tr><th>job</th><th>type</th><th>reason</th><th class="num">attempts</th><th>worker</th><th>dead</th></tr></thead><tbody>${rows
        .map(
          (r) =>
            `<tr><td><a href="/jobs/${encodeURIComponent(r.dedupKey)}">${esc(r.dedupKey)}</a></td><td>${esc(r.type ?? '')}</td><td>${esc(r.error ?? '')}</td><td class="num">${esc(r.attempts)}</td><td>${esc(r.owner ?? '')}</td><td>${r.at === undefined ? '-' : `${human(now - r.at)} ago`}</td></tr>`,
        )
        .join('')}</tbody></table>`
    : `<p class="muted">${dead.ok ? 'No dead job.' : 'Dead jobs unavailable (see above).'}</p>`;
  const body = `<h1>Dead letters</h1><p class="muted">${esc(READ_ONLY_DLQ_NOTE)}</p>${counts}${table}`;
  return { body, problems: [depth, dead].flatMap((r) => (r.ok ? [] : [r.problem])) };
}
