import type { HistoryEvent } from '../core/contract/job-history.ts';
import type { JobItem } from '../core/contract/job-item.ts';
import { JobStatus } from '../core/contract/statuses.ts';

/** One line of a job's timeline, as `leaseq inspect` and the inspector show it. */
export interface TimelineEntry {
  /** Epoch ms. */
  readonly at: number;
  /** The event kind: a stored history event's `e`, or one told by the item's fields. */
  readonly kind:
    | HistoryEvent['e']
    | 'other'
    | 'created'
    | 'claimed'
    | 'checkpoint'
    | 'completed'
    | 'retry-due';
  /** One line saying what happened. */
  readonly title: string;
  readonly owner?: string;
  readonly attempt?: number;
  readonly token?: number;
  /** Error class and message, reason, backoff: what the event carries beyond its title. */
  readonly detail?: string;
}

/**
 * A job's timeline, oldest first: the events its item stored (job-history.ts) merged with those its fields
 * tell (created, the current claim, the last checkpoint, completion, a retry due). A first-time success
 * stores no events and still reads as created, claimed, completed.
 */
export function jobTimeline(job: JobItem): TimelineEntry[] {
  const entries: TimelineEntry[] = [];
  const created = job.createdAt ? Date.parse(job.createdAt) : Number.NaN;
  if (Number.isFinite(created)) entries.push({ at: created, kind: 'created', title: 'sent' });
  // A renewal whose answer was lost and that the SDK sent again appends what it carried twice: an event
  // equal to the one before it (same kind, time and token) is that, and shown once.
  let before: HistoryEvent | undefined;
  for (const event of job.history ?? []) {
    // An event without a time is not one this version can place (the item was edited by hand).
    if (typeof event?.at !== 'number' || !Number.isFinite(event.at)) continue;
    if (!(before && sameEvent(before, event))) entries.push(fromEvent(event));
    before = event;
  }
  const stored = new Set((job.history ?? []).map((e) => `${e.e}:${e.token ?? ''}`));
  // The current claim: stored only when it took a lease over; otherwise told by claimedAt and token.
  if (job.claimedAt !== undefined && !stored.has(`takeover:${job.token}`)) {
    entries.push({
      at: job.claimedAt,
      kind: 'claimed',
      title: `attempt ${job.attempts} claimed`,
      owner: job.owner,
      attempt: job.attempts,
      token: job.token,
    });
  }
  if (job.checkpoint && !(job.history ?? []).some((e) => e.e === 'step' && e.step === job.checkpoint?.step)) {
    entries.push({
      at: job.checkpoint.at,
      kind: 'checkpoint',
      title: `checkpoint after step ${job.checkpoint.step}`,
      detail: `steps done: ${job.checkpoint.done.join(', ')}`,
    });
  }
  if (job.status === JobStatus.Completed && job.completedAt !== undefined) {
    entries.push({
      at: job.completedAt,
      kind: 'completed',
      title: `completed on attempt ${job.attempts}`,
      owner: job.owner,
      attempt: job.attempts,
      token: job.token,
    });
  }
  if (job.status === JobStatus.RetryWait) {
    entries.push({ at: job.leaseUntil, kind: 'retry-due', title: 'retry due' });
  }
  // Stable: events of one millisecond keep the order they were written in.
  return entries
    .map((entry, i) => ({ entry, i }))
    .sort((a, b) => a.entry.at - b.entry.at || a.i - b.i)
    .map((x) => x.entry);
}

function fromEvent(event: HistoryEvent): TimelineEntry {
  const who = { owner: event.owner, attempt: event.attempt, token: event.token };
  switch (event.e) {
    case 'failed':
      return {
        at: event.at,
        kind: 'failed',
        title: `attempt ${event.attempt ?? '?'} failed${event.refunded ? ' (attempt given back)' : ''}`,
        detail: `${classed(event.errorClass, event.message)}; retry in ${seconds(event.retryAt - event.at)}`,
        ...who,
      };
    case 'takeover':
      return {
        at: event.at,
        kind: 'takeover',
        title: `attempt ${event.attempt ?? '?'} took over the lease of ${event.fromOwner ?? 'a worker'}`,
        detail:
          `its lease (token ${event.fromToken}` +
          (event.fromAttempt === undefined ? '' : `, attempt ${event.fromAttempt}`) +
          (event.fromClaimedAt === undefined ? '' : `, claimed ${isoTime(event.fromClaimedAt)}`) +
          `) ended ${seconds(event.at - event.leaseEndedAt)} before`,
        ...who,
      };
    case 'lease-lost':
      return { at: event.at, kind: 'lease-lost', title: 'lease lost', detail: event.why, ...who };
    case 'step':
      return { at: event.at, kind: 'step', title: `step ${event.step} checkpointed`, ...who };
    case 'dead':
      return {
        at: event.at,
        kind: 'dead',
        title: `dead-lettered: ${event.reason}`,
        detail: classed(event.errorClass, event.message),
        ...who,
      };
    case 'redrive':
      return {
        at: event.at,
        kind: 'redrive',
        title: `redriven by ${event.by}${event.edited ? ' with a corrected payload' : ''}`,
        ...(event.letter ? { detail: `from letter ${event.letter}` } : {}),
      };
    case 'dropped':
      return {
        at: event.at,
        kind: 'dropped',
        title:
          event.life === undefined
            ? `${event.count} cop${event.count === 1 ? 'y' : 'ies'} of the dead job dropped`
            : `${event.count} redriven message${event.count === 1 ? '' : 's'} of the key's life ${event.life} dropped (a fresh send reset the key since)`,
        detail: `last: message ${event.messageId}`,
      };
    case 'reset':
      return {
        at: event.at,
        kind: 'reset',
        title: 'a fresh send ran the dead key again',
        detail: `dead since ${isoTime(event.wasDeadAt)}`,
      };
    case 'mismatch':
      return {
        at: event.at,
        kind: 'mismatch',
        title: event.newJob
          ? 'a message with another payload ran as a new job of the key'
          : 'a message with another payload was dead-lettered (payload-mismatch)',
        detail: `message ${event.messageId}: payload hash ${event.got}, the job's ${event.hash}`,
      };
    case 'cancelled':
      return {
        at: event.at,
        kind: 'cancelled',
        title: `cancelled by ${event.by}`,
        ...(event.reason ? { detail: event.reason } : {}),
      };
    default: {
      // A kind a newer leaseq writes (this one does not know it): shown by its name, never an error.
      const other = event as { e?: unknown; at: number; owner?: unknown; attempt?: unknown; token?: unknown };
      return {
        at: other.at,
        kind: 'other',
        title: String(other.e ?? 'event'),
        ...(typeof other.owner === 'string' ? { owner: other.owner } : {}),
        ...(typeof other.attempt === 'number' ? { attempt: other.attempt } : {}),
        ...(typeof other.token === 'number' ? { token: other.token } : {}),
      };
    }
  }
}

/** `Class: message`; the worker stores `Name: message` already (error-text.ts errorText), so the class once. */
function classed(errorClass: string, message: string): string {
  return !errorClass || message.startsWith(`${errorClass}:`) ? message : `${errorClass}: ${message}`;
}

function seconds(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.max(0, Math.round(ms))} ms`;
}

function sameEvent(a: HistoryEvent, b: HistoryEvent): boolean {
  return a.e === b.e && a.at === b.at && a.token === b.token && a.owner === b.owner;
}

/**
 * An epoch ms as ISO 8601, or `?` for one no Date holds: an item is read as stored, and toISOString
 * throws past ±8.64e15 ms, which failed the whole read of the job (`leaseq inspect`, the inspector).
 */
function isoTime(ms: number): string {
  return Number.isFinite(ms) && Math.abs(ms) <= 8.64e15 ? new Date(ms).toISOString() : '?';
}
