/**
 * What the inspector's search box reads. Pure, so its rules are unit-tested (test/unit/cli/ui-search.test.ts):
 * - text with no filter in it is a dedup key, exactly as typed (trimmed): keys may hold spaces and colons;
 * - `key:<text>` is a key too (for a key that starts like a filter: `key:type:123`);
 * - otherwise filters, any order: `type:<type> status:<list> reason:<reason> error:<text> since:<time>`;
 *   a value with spaces is quoted (`error:"connection reset"`); words outside a filter are error text;
 *   `status` takes a comma-separated list (RETRY_WAIT, DEAD, IN_PROGRESS, COMPLETED, CANCELLED, stuck);
 *   `since` a duration back from now (90s, 15m, 1h, 7d) or an ISO 8601 time.
 */
import { isEnvelopeDedupKey } from '../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import type { FindFilter } from '../../shared/ops/find-jobs.ts';
import type { ProblemStatusFilter } from '../../shared/ops/problem-jobs.ts';

export type Search =
  | { readonly kind: 'empty' }
  | { readonly kind: 'key'; readonly key: string }
  | { readonly kind: 'filter'; readonly filter: FindFilter }
  | { readonly kind: 'invalid'; readonly problem: string };

/** The filter names the box knows; any other `word:` is part of a key or of error text. */
export const SEARCH_FIELDS = ['key', 'type', 'status', 'reason', 'error', 'since'] as const;
type Field = (typeof SEARCH_FIELDS)[number];

const FIELD = /^(key|type|status|reason|error|since):/i;
/** A filter name starting a word anywhere in the text (as the tokenizer would read it, quotes aside). */
const FIELD_ANYWHERE = /(?:^|[ \t"])(?:key|type|status|reason|error|since):/i;
const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const STATUSES: readonly string[] = [...Object.values(JobStatus), 'stuck'];

/** Longest text the box takes (a key is at most 256 characters; filters a little more). */
export const SEARCH_MAX_CHARS = 1024;

/** Reads the box's text; `now` (epoch ms) anchors `since:<duration>`. */
export function parseSearch(text: string, now: number): Search {
  const q = text.trim();
  if (q === '') return { kind: 'empty' };
  if (q.length > SEARCH_MAX_CHARS) {
    return { kind: 'invalid', problem: `the search is ${q.length} characters, above ${SEARCH_MAX_CHARS}` };
  }
  if (/^key:/i.test(q)) return asKey(q.slice(4).trim());
  const tokens = tokenize(q);
  if (tokens === undefined) {
    // An open quote matters in filters only: with no filter in it the text is a key, quote and all.
    return FIELD_ANYWHERE.test(q) ? { kind: 'invalid', problem: 'a quote (") is not closed' } : asKey(q);
  }
  if (!tokens.some((t) => t.field !== undefined)) return asKey(q);
  const filter: { -readonly [K in keyof FindFilter]: FindFilter[K] } = {};
  const words: string[] = [];
  const statuses: ProblemStatusFilter[] = [];
  for (const { field, value } of tokens) {
    if (field === undefined) {
      words.push(value);
      continue;
    }
    if (value === '') return { kind: 'invalid', problem: `${field}: needs a value (${field}:<value>)` };
    switch (field) {
      case 'key':
        return { kind: 'invalid', problem: 'key: is the whole search (key:<dedup key>), not a filter' };
      case 'type':
        filter.type = value;
        break;
      case 'reason':
        filter.reason = value;
        break;
      case 'error':
        words.push(value);
        break;
      case 'status': {
        const parsed = parseStatuses(value);
        if (typeof parsed === 'string') return { kind: 'invalid', problem: parsed };
        for (const s of parsed) if (!statuses.includes(s)) statuses.push(s);
        break;
      }
      case 'since': {
        const since = parseSince(value, now);
        if (since === undefined) {
          return {
            kind: 'invalid',
            problem: `since:${value} is not a duration (90s, 15m, 1h, 7d) or an ISO 8601 time`,
          };
        }
        filter.since = since;
        break;
      }
    }
  }
  if (statuses.length > 0) filter.status = statuses;
  if (words.length > 0) filter.error = words.join(' ');
  return { kind: 'filter', filter };
}

function asKey(key: string): Search {
  if (key === '') return { kind: 'invalid', problem: 'key: needs a dedup key (key:<dedup key>)' };
  return isEnvelopeDedupKey(key)
    ? { kind: 'key', key }
    : {
        kind: 'invalid',
        problem:
          'not a dedup key (1-256 printable ASCII characters); to search error text write error:<text>',
      };
}

/** Words and `field:value` tokens; a value may be quoted. Undefined when a quote is not closed. */
function tokenize(q: string): { field?: Field; value: string }[] | undefined {
  const out: { field?: Field; value: string }[] = [];
  let i = 0;
  while (i < q.length) {
    while (q[i] === ' ' || q[i] === '\t') i++;
    if (i >= q.length) break;
    const rest = q.slice(i);
    const named = FIELD.exec(rest);
    const field = named ? ((named[1] ?? '').toLowerCase() as Field) : undefined;
    let j = i + (named ? (named[0] ?? '').length : 0);
    let value: string;
    if (q[j] === '"') {
      const close = q.indexOf('"', j + 1);
      if (close < 0) return undefined;
      value = q.slice(j + 1, close);
      j = close + 1;
    } else {
      let end = j;
      while (end < q.length && q[end] !== ' ' && q[end] !== '\t') end++;
      value = q.slice(j, end);
      j = end;
    }
    out.push(field ? { field, value } : { value });
    i = j;
  }
  return out;
}

function parseStatuses(value: string): ProblemStatusFilter[] | string {
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => (s.toLowerCase() === 'stuck' ? 'stuck' : s.toUpperCase().replace(/\(RETRIED\)$/, '')));
  const bad = items.filter((s) => !STATUSES.includes(s));
  if (items.length === 0 || bad.length > 0) {
    return `status:${value}: expected a comma-separated list of ${STATUSES.join(', ')}`;
  }
  return items as ProblemStatusFilter[];
}

function parseSince(value: string, now: number): number | undefined {
  const relative = /^(\d+(?:\.\d+)?)(s|m|h|d)$/i.exec(value);
  if (relative) {
    const ms = Number(relative[1]) * (UNITS[(relative[2] ?? 's').toLowerCase()] ?? 1000);
    return ms > 0 ? Math.round(now - ms) : undefined;
  }
  // A time, not a bare number (Date.parse reads "2024" as a year).
  if (!/^\d{4}-\d{2}-\d{2}/.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isFinite(at) && at >= 0 ? at : undefined;
}

/** The box's text for a filter (the results page shows what it searched for). */
export function searchText(filter: FindFilter): string {
  const quote = (v: string) => (/[\s"]/.test(v) || v === '' ? `"${v.replace(/"/g, '')}"` : v);
  return [
    filter.type === undefined ? '' : `type:${quote(filter.type)}`,
    filter.status && filter.status.length > 0 ? `status:${filter.status.join(',')}` : '',
    filter.reason === undefined ? '' : `reason:${quote(filter.reason)}`,
    filter.error === undefined ? '' : `error:${quote(filter.error)}`,
    filter.since === undefined ? '' : `since:${new Date(filter.since).toISOString()}`,
  ]
    .filter((s) => s !== '')
    .join(' ');
}
