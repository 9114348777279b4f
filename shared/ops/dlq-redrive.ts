/**
 * Redrive: sends dead letters back to the jobs queue so their jobs run again. Each letter goes through
 * named steps (filter, leave alone, plan from the job item, reset, send back, delete), so the order
 * that makes a crash harmless (see {@link redrive}) reads top to bottom.
 */
import type { Message } from '@aws-sdk/client-sqs';
import { SQS_MAX_VISIBILITY_SECONDS } from '../core/decisions/backoff.ts';
import { browse, KEEP, type Visit } from './dlq-browse.ts';
import { type DeadLetter, HOPELESS_REASONS, matchesFilter, toDeadLetter } from './dlq-letters.ts';
import { editedBody } from './dlq-redrive-edit.ts';
import {
  type EarlierSend,
  isOtherMessage,
  judgeRepeat,
  type LetterFacts,
  letterFacts,
  planRedrive,
  REDRIVE_CLOCK_MARGIN_MS,
  type RedriveSkip,
} from './dlq-redrive-plan.ts';
import {
  letterFields,
  type RedriveOptions,
  type RedriveReport,
  type RedriveRun,
  record,
  reportOf,
  startRun,
} from './dlq-redrive-run.ts';
import { sendBack } from './dlq-redrive-send.ts';
import { messageOf, PayloadRefusedError } from './ops-errors.ts';
import type { OpsTarget } from './target.ts';

export type { RedriveItem, RedriveOptions, RedriveReport } from './dlq-redrive-run.ts';

/**
 * How long redrive holds the letters it browses: a page of 10 must finish (at the rate limit) before
 * the page's messages show up again. Capped at {@link SQS_MAX_VISIBILITY_SECONDS}: below ~0.83 letters/h
 * the uncapped value is refused, and a page that outlasts the cap only shows up again, seen before.
 */
export function redriveVisibilitySeconds(ratePerSecond: number | undefined): number {
  const wanted = 60 + Math.ceil(10 / (ratePerSecond ?? Number.POSITIVE_INFINITY));
  return Math.min(wanted, SQS_MAX_VISIBILITY_SECONDS);
}

/**
 * Sends matching dead letters back to the jobs queue so they run again. For each: read the job item;
 * reset it unless it completed or runs (`resetForRedrive`: attempts 0, RETRY_WAIT); send the original
 * body to the jobs queue;
 * then delete the dead letter. The order makes a crash harmless: a reset item with its letter still in
 * the DLQ is sent by the next redrive; a letter sent but not deleted is a duplicate the workers drop by
 * dedup key. A job that dead-letters again during the same redrive is not sent a second time.
 */
export async function redrive(target: OpsTarget, options: RedriveOptions = {}): Promise<RedriveReport> {
  const run = startRun(target, options);
  const visibilitySeconds = redriveVisibilitySeconds(options.ratePerSecond);
  const browsed = await browse(
    target.clients.sqs,
    target.names.dlqUrl,
    { visibilitySeconds },
    async (message) => {
      // Stopped (Ctrl-C): this letter and the rest stay as they were.
      if (options.signal?.aborted) {
        run.interrupted = true;
        return { stop: true };
      }
      const visit = await redriveLetter(run, message);
      // Letters named by id: the browse ends once each was seen.
      return run.wanted?.size === 0 ? { ...visit, stop: true } : visit;
    },
  );
  return reportOf(run, browsed);
}

/** Decides what to do with one browsed letter and does it; a dry run stops at the decision. */
async function redriveLetter(run: RedriveRun, message: Message): Promise<Visit> {
  const letter = toDeadLetter(message);
  if (!matchesFilter(letter, run.filter)) {
    run.notMatched += 1;
    return KEEP;
  }
  run.wanted?.delete(letter.messageId);
  const fields = letterFields(letter);
  const facts = letterFacts(letter);
  const stays = await leftInDlq(run, letter, facts);
  if (stays) {
    record(run, { ...fields, ...stays, reset: false });
    return KEEP;
  }
  const item = letter.dedupKey ? await run.store.get(letter.dedupKey) : undefined;
  const plan = planRedrive(item, run.now(), facts);
  if (plan.action === 'skip') {
    record(run, { ...fields, outcome: 'skipped', skip: plan.skip, reset: false, detail: plan.why });
    return KEEP;
  }
  const reset = plan.action === 'reset-and-send';
  const note = plan.why ? { detail: plan.why } : {};
  const letterMessageId = facts.recorded ? { letterMessageId: facts.messageId } : {};
  let body = letter.body;
  if (run.options.payload) {
    // The schema's refusal ends the redrive before anything changed: the operator fixes the file.
    const problem = run.options.payload.check?.(letter.type ?? '', run.options.payload.value);
    if (problem) throw new PayloadRefusedError(letter.type ?? '(no type)', problem);
    try {
      body = editedBody(letter.body, run.options.payload.value, run.options.maxBodyBytes, {
        ...(letter.dedupKey ? { dedupKey: letter.dedupKey } : {}),
        ...(letter.type ? { type: letter.type } : {}),
        ...(letter.originalMessageId ? { messageId: letter.originalMessageId } : {}),
      });
    } catch (error) {
      record(run, { ...fields, outcome: 'failed', reset: false, detail: messageOf(error) });
      return KEEP;
    }
  }
  if (run.options.dryRun) {
    record(run, { ...fields, outcome: 'would-redrive', reset, ...note });
    // Nothing is written: a later letter of this job finds the item as it is now.
    if (reset && letter.dedupKey && item)
      run.sentJobs.set(letter.dedupKey, { versionAfter: item.version, at: run.now(), ...letterMessageId });
    run.taken += 1;
    return { stop: run.taken >= run.limit };
  }
  const now = run.now();
  const edit = run.options.payload;
  const editedHash = edit?.hash?.(letter.type ?? '', edit.value);
  const by = {
    by: run.options.by ?? 'unknown',
    letter: letter.messageId,
    ...(edit ? { edited: true } : {}),
    // The edit's hash on the item: its message is the job's payload now, not a mismatch.
    ...(editedHash === undefined ? {} : { payloadHash: editedHash }),
  };
  // The store checks the lease again, with the same margin, and that the item is still the version the
  // plan read: a worker may have claimed it since (a fresh send resetting a dead key makes it another job).
  if (
    reset &&
    letter.dedupKey &&
    !(await run.store.resetForRedrive(letter.dedupKey, now, now - REDRIVE_CLOCK_MARGIN_MS, by, item?.version))
  ) {
    record(run, {
      ...fields,
      outcome: 'skipped',
      skip: 'changed',
      reset: false,
      detail: 'job item changed while redriving (completed, or claimed by a live worker); run redrive again',
    });
    return KEEP;
  }
  // The reset moves the version by one; if the item moved between the read and the reset, this
  // guess is off and a later letter is judged by its age alone (it stays in the DLQ either way).
  const earlier: EarlierSend =
    reset && item
      ? { versionAfter: item.version + 1, at: now, ...letterMessageId }
      : { at: now, ...letterMessageId };
  return sendBack(
    run,
    message,
    { ...letter, body },
    { reset, note, earlier, ...(reset && item ? { item } : {}) },
  );
}

/**
 * Letters left in the DLQ before their job is planned: a later letter of a job this very redrive sent
 * back (sending it again would only repeat the failure, or send a second copy of one death), and,
 * unless asked for, a body the workers can only refuse again. A later letter of another message than
 * the one sent is planned on its own: it is not the item's job (an older death), and the plan says so.
 */
async function leftInDlq(
  run: RedriveRun,
  letter: DeadLetter,
  facts: LetterFacts,
): Promise<
  | {
      readonly outcome: 'dead-again' | 'duplicate' | 'skipped';
      readonly skip?: RedriveSkip;
      readonly detail: string;
    }
  | undefined
> {
  const sent = letter.dedupKey ? run.sentJobs.get(letter.dedupKey) : undefined;
  const ownMessage = letter.originalMessageId !== undefined && run.sentIds.has(letter.originalMessageId);
  const earlier = sent && !ownMessage && isOtherMessage(facts, sent) ? undefined : sent;
  if (earlier || ownMessage) {
    // Only a second letter of a reset job needs the item (one read, for this rare letter only).
    const needsItem = !ownMessage && earlier?.versionAfter !== undefined && letter.dedupKey;
    const item = needsItem ? await run.store.get(letter.dedupKey ?? '') : undefined;
    return judgeRepeat(letter, run.sentIds, earlier, item) === 'duplicate'
      ? {
          outcome: 'duplicate',
          detail:
            'a second letter of the death this redrive sent back (an interrupted dead-lettering sends two); it stays: a later redrive skips it once the job completed, and purge removes it',
        }
      : {
          outcome: 'dead-again',
          detail: 'sent back by this redrive and dead-lettered again; this new letter stays',
        };
  }
  if (!run.options.includeHopeless && HOPELESS_REASONS.includes(letter.reason)) {
    return {
      outcome: 'skipped',
      skip: 'hopeless',
      detail: `${letter.reason}: the same body would only be refused again (--include-invalid sends it)`,
    };
  }
  return undefined;
}
