// One redrive while it walks the DLQ (dlq-redrive.ts): its options, what it has done so far, and the
// report it ends with. Below the steps that read and write (dlq-redrive.ts, dlq-redrive-send.ts), which
// record each letter's outcome here.
import { isFifoQueue } from '../aws/queue-url.ts';
import { DynamoDbJobStore } from '../core/adapters/dynamodb-job-store.ts';
import { Pacer } from '../producer/pacer.ts';
import { type BrowseResult, shortfall } from './dlq-browse.ts';
import type { DeadLetter, DeadLetterFilter } from './dlq-letters.ts';
import type { EarlierSend, RedriveSkip } from './dlq-redrive-plan.ts';
import type { OpsTarget } from './target.ts';

export interface RedriveOptions {
  readonly filter?: DeadLetterFilter;
  /** Only list what would happen; change nothing. @default false */
  readonly dryRun?: boolean;
  /** Messages sent back per second at most. @default undefined (no limit) */
  readonly ratePerSecond?: number;
  /** Redrive at most this many. @default undefined (all that match) */
  readonly limit?: number;
  /** Called after each matching message. */
  readonly onProgress?: (item: RedriveItem) => void;
  /**
   * Also send letters whose body can only be refused again (not JSON, not an envelope, too large).
   * @default false
   */
  readonly includeHopeless?: boolean;
  /** @default Date.now */
  readonly now?: () => number;
  /** Who redrives, for the job's `redrive` history event (user@host, or the caller's identity). @default 'unknown' */
  readonly by?: string;
  /**
   * Edit and retry: send this payload instead of the letter's, in the letter's envelope (its id, dedup key,
   * type, createdAt and trace kept). Only with `filter.dedupKey` (one job). `check` (the job type's
   * schema) runs before anything changes: a problem it names (`payload.<field>: <why>`) throws
   * PayloadRefusedError.
   */
  readonly payload?: {
    readonly value: unknown;
    readonly check?: (type: string, payload: unknown) => string | undefined;
    /** The corrected payload's hash as the type defines it, stored on the reset job (payload-mismatch.ts). */
    readonly hash?: (type: string, payload: unknown) => string | undefined;
  };
  /** Largest body the jobs queue's workers take. @default DEFAULT_MAX_BODY_BYTES */
  readonly maxBodyBytes?: number;
  /** Stops the redrive between two letters (Ctrl-C); the report says it was interrupted. */
  readonly signal?: AbortSignal;
}

export interface RedriveItem {
  readonly messageId: string;
  readonly dedupKey?: string;
  readonly type?: string;
  readonly reason: string;
  /**
   * `would-redrive` only in a dry run; `dead-again`: a new letter of a job this very redrive sent back
   * (it failed again while the redrive ran), left in the DLQ; `duplicate`: a second letter of the death
   * this redrive sent back (an interrupted dead-lettering sends two), left in the DLQ.
   */
  readonly outcome: 'redriven' | 'would-redrive' | 'skipped' | 'dead-again' | 'duplicate' | 'failed';
  /** Why a `skipped` letter stayed (docs/cli.md, "leaseq dlq redrive"); `detail` says it in words. */
  readonly skip?: RedriveSkip;
  /** Whether the DEAD job item was (or would be) reset. */
  readonly reset: boolean;
  /** Why it was skipped or failed, or a note on how it was sent. */
  readonly detail?: string;
  /** Id of the new message in the jobs queue. */
  readonly newMessageId?: string;
}

export interface RedriveReport {
  readonly dryRun: boolean;
  readonly matched: number;
  readonly redriven: number;
  readonly skipped: number;
  /** Of the redriven jobs, those that were dead-lettered again before the redrive ended. */
  readonly deadAgain: number;
  /** Second letters of deaths this redrive sent back (left in the DLQ). */
  readonly duplicates: number;
  readonly failed: number;
  /** Dead letters seen that the filter left alone. */
  readonly notMatched: number;
  /** Letters the browse received (any filter), next to `dlqDepth`. */
  readonly seen: number;
  /** Letters the DLQ held when the redrive began (visible + in flight; SQS's approximate count). */
  readonly dlqDepth: number;
  /** Set when `seen` is below `dlqDepth`: how many were not seen, and why. */
  readonly unseen?: string;
  /** The signal stopped it: letters not reached stay in the DLQ as they were. */
  readonly interrupted?: true;
  readonly items: readonly RedriveItem[];
}

/** One redrive while it walks the DLQ: its settings, and what it has done so far. */
export interface RedriveRun {
  readonly target: OpsTarget;
  readonly options: RedriveOptions;
  readonly store: DynamoDbJobStore;
  readonly pacer: Pacer;
  readonly now: () => number;
  readonly filter: DeadLetterFilter;
  readonly limit: number;
  readonly fifo: boolean;
  /** The letters `filter.messageIds` names that the browse has not reached yet. */
  readonly wanted?: Set<string>;
  /**
   * Ids of the jobs-queue messages this redrive sent, and the jobs it sent (by dedup key): a later
   * letter of one of them is not sent a second time (see {@link judgeRepeat}).
   */
  readonly sentIds: Set<string>;
  readonly sentJobs: Map<string, EarlierSend>;
  readonly items: RedriveItem[];
  /** Dead letters seen that the filter left alone. */
  notMatched: number;
  /** Letters sent back (or, in a dry run, that would be), counted against `limit`. */
  taken: number;
  /** The signal stopped the browse. */
  interrupted: boolean;
}

export function startRun(target: OpsTarget, options: RedriveOptions): RedriveRun {
  const { clients, names } = target;
  return {
    target,
    options,
    store: new DynamoDbJobStore({ client: clients.doc, tableName: names.jobsTable }),
    pacer: new Pacer({ perSecond: options.dryRun ? undefined : options.ratePerSecond }),
    now: options.now ?? Date.now,
    filter: options.filter ?? {},
    limit: options.limit ?? Number.POSITIVE_INFINITY,
    fifo: isFifoQueue(names.queueUrl),
    ...(options.filter?.messageIds ? { wanted: new Set(options.filter.messageIds) } : {}),
    sentIds: new Set<string>(),
    sentJobs: new Map<string, EarlierSend>(),
    items: [],
    notMatched: 0,
    taken: 0,
    interrupted: false,
  };
}

export function record(run: RedriveRun, item: RedriveItem): void {
  run.items.push(item);
  run.options.onProgress?.(item);
}

/** The fields of a {@link RedriveItem} that name its letter. */
type LetterFields = Pick<RedriveItem, 'messageId' | 'dedupKey' | 'type' | 'reason'>;

export function letterFields(letter: DeadLetter): LetterFields {
  return {
    messageId: letter.messageId,
    ...(letter.dedupKey ? { dedupKey: letter.dedupKey } : {}),
    ...(letter.type ? { type: letter.type } : {}),
    reason: letter.reason,
  };
}

export function reportOf(run: RedriveRun, browsed: BrowseResult): RedriveReport {
  const { items, options } = run;
  // A redrive that stopped at its --limit saw fewer letters on purpose: no shortfall to explain.
  const unseen = run.taken >= run.limit || run.interrupted ? undefined : shortfall(browsed);
  const count = (outcome: RedriveItem['outcome']) => items.filter((i) => i.outcome === outcome).length;
  return {
    dryRun: options.dryRun ?? false,
    matched: items.length,
    redriven: count(options.dryRun ? 'would-redrive' : 'redriven'),
    skipped: count('skipped'),
    deadAgain: count('dead-again'),
    duplicates: count('duplicate'),
    failed: count('failed'),
    notMatched: run.notMatched,
    seen: browsed.seen,
    dlqDepth: browsed.depth,
    ...(unseen ? { unseen } : {}),
    ...(run.interrupted ? { interrupted: true as const } : {}),
    items,
  };
}
