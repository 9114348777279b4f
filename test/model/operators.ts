import type { SQSRecord } from 'aws-lambda';
import type { JobItem } from '../../shared/core/contract/job-item.ts';
import type { CancelRequest, CancelResult } from '../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import type { RecordOutcome } from '../../shared/core/pipeline/outcome.ts';
import { describe as describeError } from '../../shared/error-text.ts';
import { cancelJob } from '../../shared/ops/cancel.ts';
import { purgeDlq, purgeLetters } from '../../shared/ops/dlq.ts';
import type { DeadLetter } from '../../shared/testing/in-memory-queue.ts';
import type { Meet, MeetHost } from './meet.ts';
import { forwardJobStore, ModelSqs } from './operator-sqs.ts';
import type { JobSpec, OperatorSpec, Scenario } from './scenario.ts';

/*
 * Issue 32's operators in the interleaving model (scenario.ts OPERATOR_KINDS, generated in
 * operators-scenario.ts): the operator's commands are the real shared/ops code, run on the model's queue
 * and store (operator-sqs.ts), each `atMs` after its trigger in a job's life (OperatorSpec). Checks, tagged
 * `[kind/check]`:
 *  - `[redrive/over-another-job]` (meet.ts) covers the redrives by key and with an edited payload too;
 *  - `[refused/own-ends-dead]`: a job whose own message is refused (a stricter schema, an edited payload the
 *    schema refuses) ends DEAD, never waiting with no message;
 *  - `[bounce/queue-redrive]`: no message that bounced for a limit (or was handed back behind its FIFO
 *    head) is received past the queue's redrive `maxReceiveCount`, nor bounced at it, on standard and FIFO
 *    queues alike (SQS would move it to the DLQ unrun);
 *  - `[dead/runs-unasked]`: a DEAD job leaves DEAD (to run again) only by an operator's redrive resetting it
 *    or a fresh send claiming it past its deadKeyUntil;
 *  - `[purge/only-named]`: `dlq purge --message-id` deletes the letters named and no other.
 */

/** Actions done over the whole model run, by act and outcome (interleaving.test.ts prints them). */
export const operatorTotals = new Map<string, number>();

function count(what: string): void {
  operatorTotals.set(what, (operatorTotals.get(what) ?? 0) + 1);
}

/** Whether a letter of `key` may say its payload was refused: a stricter schema, or an edited redrive the schema refuses. */
export function refusable(s: Scenario, key: string): boolean {
  const index = Number(key.replace(/^job-/, ''));
  if (s.jobs[index]?.stricterSchema) return true;
  return (s.operators ?? []).some(
    (o) => o.act === 'redrive' && o.scope === 'edit-bad' && o.job % s.jobs.length === index,
  );
}

/**
 * Whether key `key` may carry two payloads: an operator's redrive with an edited one (issue 34: its job
 * stores the edit's hash, and a later copy of the original is lettered `payload-mismatch`, never run).
 */
export function editable(s: Scenario, key: string): boolean {
  const index = Number(key.replace(/^job-/, ''));
  return (s.operators ?? []).some(
    (o) =>
      o.act === 'redrive' &&
      (o.scope === 'edit' || o.scope === 'edit-bad') &&
      o.job % s.jobs.length === index,
  );
}

/** The run's operator actions (issue 32) and their checks' books. */
export class Operators {
  readonly #host: MeetHost;
  readonly #meet: Meet;
  readonly #fired = new Set<OperatorSpec>();
  /** Per key, the operator's redrive resets under way (a reset they make is an operator asking). */
  readonly #resetting = new Map<string, number>();
  /** How many redrive resets of each key have started (one that began and ended inside a write counts). */
  readonly #resetsStarted = new Map<string, number>();
  /** Keys a deployed schema refuses while they run (no end is expected of them but the usual). */
  readonly refusing = new Set<string>();
  /** Per key, the refusals of its messages (their letters' reasons), and when. */
  readonly #refusals = new Map<string, string[]>();
  /** Per message id, its limit bounces and FIFO hand-backs. */
  readonly #bounced = new Map<string, number>();
  readonly #overBounced = new Set<string>();
  readonly #unasked = new Set<string>();
  /** Keys a worker has marked DEAD (or tried to): only their writes are watched for leaving DEAD. */
  readonly #mayBeDead = new Set<string>();
  #fresh = 0;

  constructor(meet: Meet, host: MeetHost) {
    this.#meet = meet;
    this.#host = host;
  }

  start(): void {
    for (const spec of this.#host.scenario.operators ?? []) if (spec.on === 'at') this.#fire(spec);
  }

  /** Job `dedupKey` reached `on` (meet.ts calls it): the actions waiting for it start. */
  trigger(on: OperatorSpec['on'], dedupKey: string): void {
    const s = this.#host.scenario;
    for (const spec of s.operators ?? []) {
      if (spec.on === on && keyOf(s, spec) === dedupKey) this.#fire(spec);
    }
  }

  #fire(spec: OperatorSpec): void {
    if (this.#fired.has(spec)) return;
    this.#fired.add(spec);
    this.#host.later(spec.atMs, () => void this.#act(spec));
  }

  async #act(spec: OperatorSpec): Promise<void> {
    const host = this.#host;
    const s = host.scenario;
    const key = keyOf(s, spec);
    const index = spec.job % s.jobs.length;
    count(`${spec.act}${spec.scope ? ` ${spec.scope}` : ''}`);
    switch (spec.act) {
      case 'redrive': {
        const edited =
          spec.scope === 'edit'
            ? { payload: { value: { job: index, edited: true } } }
            : spec.scope === 'edit-bad'
              ? { payload: { value: { job: index, bad: true } } }
              : {};
        return this.#meet.redrive(0, { filter: { dedupKey: key }, ...edited });
      }
      case 'cancel':
        return host.cancel(key, 0);
      case 'purge':
        return this.#purge(spec.scope === 'named' ? key : undefined);
      case 'fresh':
        this.#fresh += 1;
        host.log('info', 'the operator sends the job anew', { dedupKey: key });
        return host.send(index, 2000 + this.#fresh);
      case 'deploy':
        return this.#deploy();
    }
  }

  /** The operator's cancel (`leaseq cancel`): shared/ops/cancel.ts, on the model's store. */
  async cancel(dedupKey: string, request: CancelRequest): Promise<CancelResult> {
    const restore = forwardJobStore(this.#meet.operatorStore());
    try {
      return await cancelJob(this.#meet.target(), dedupKey, {
        now: request.now,
        ...(request.by === undefined ? {} : { by: request.by }),
        ...(request.reason === undefined ? {} : { reason: request.reason }),
      });
    } finally {
      restore();
    }
  }

  /** `leaseq dlq purge` (every letter), or with `--message-id` the letters of `dedupKey` the DLQ holds now. */
  async #purge(dedupKey: string | undefined): Promise<void> {
    const host = this.#host;
    const sqs = new ModelSqs(this.#meet, host, true);
    const dlqUrl = this.#meet.target().names.dlqUrl;
    const named = this.#meet
      .letters()
      .filter((l) => dedupKey !== undefined && l.letter.reason.dedupKey === dedupKey)
      .map((l) => l.id);
    if (dedupKey !== undefined && named.length === 0) {
      host.log('info', 'purge: no letter of this job in the DLQ', { dedupKey });
      return;
    }
    host.hold(1);
    try {
      const client = sqs as unknown as Parameters<typeof purgeDlq>[0];
      const report =
        dedupKey === undefined ? await purgeDlq(client, dlqUrl) : await purgeLetters(client, dlqUrl, named);
      host.log('info', `purge deleted ${report.deleted}`, {
        ...(dedupKey === undefined ? {} : { dedupKey, named }),
        letters: sqs.deleted.map((l) => l.id),
      });
      const strays = sqs.deleted.filter((l) => dedupKey !== undefined && !named.includes(l.id));
      if (strays.length > 0 || report.deleted !== sqs.deleted.length) {
        host.violations.push(
          `[purge/only-named] a purge of ${dedupKey ?? 'the DLQ'} (letters ${named.join(', ') || 'all'}) at ` +
            `t=${host.elapsed()} ms deleted ${sqs.deleted.map((l) => l.id).join(', ') || 'none'} and said ${report.deleted}`,
        );
      }
    } catch (error) {
      host.log('info', 'purge failed', { error: describeError(error) });
    } finally {
      host.hold(-1);
    }
  }

  /** A stricter schema deployed: every `deploy` job with an item refuses its payload from now on. */
  #deploy(): void {
    const host = this.#host;
    host.scenario.jobs.forEach((spec: JobSpec, index) => {
      const key = `job-${index}`;
      const item = host.peek(key);
      if (spec.stricterSchema !== 'deploy' || !item) return;
      if (item.status === JobStatus.RetryWait) {
        // Waiting, its next receive is its own message refused: it must end DEAD ([schema/ends-dead]).
        if (!this.#meet.invalid.has(key)) this.#meet.invalid.set(key, host.elapsed());
      } else if (item.status === JobStatus.InProgress) this.refusing.add(key);
    });
    host.log('info', 'a stricter schema is deployed', {
      waiting: [...this.#meet.invalid.keys()],
      running: [...this.refusing],
    });
  }

  /** Whether the deployed schemas refuse `payload` (the model's schema asks). */
  refuses(payload: { job: number; bad?: boolean }): boolean {
    const key = `job-${payload.job}`;
    return payload.bad === true || this.#meet.invalid.has(key) || this.refusing.has(key);
  }

  /** The operator's redrive is resetting `dedupKey` (+1), or is done with it (-1). */
  resetting(dedupKey: string, delta: 1 | -1): void {
    this.#resetting.set(dedupKey, (this.#resetting.get(dedupKey) ?? 0) + delta);
    if (delta > 0) this.#resetsStarted.set(dedupKey, (this.#resetsStarted.get(dedupKey) ?? 0) + 1);
  }

  /** A worker is marking `dedupKey` DEAD (harness.ts markingDead). */
  markingDead(dedupKey: string): void {
    this.#mayBeDead.add(dedupKey);
  }

  /**
   * The item before a protocol write on `dedupKey`, when it may be DEAD (a read costs a copy), with the
   * count of the key's redrive resets started so far.
   */
  beforeWrite(dedupKey: string): { item: JobItem | undefined; resets: number } | undefined {
    if (!this.#mayBeDead.has(dedupKey)) return undefined;
    return { item: this.#host.peek(dedupKey), resets: this.#resetsStarted.get(dedupKey) ?? 0 };
  }

  /**
   * A protocol write on `dedupKey` ended (harness.ts protocolWrite), the item `before` it as the write
   * started: a DEAD job that is no longer DEAD (nor CANCELLED) was reset by an operator's redrive or
   * claimed by a fresh send past its deadKeyUntil, or it runs again unasked.
   */
  wrote(dedupKey: string, start: { item: JobItem | undefined; resets: number } | undefined): void {
    const before = start?.item;
    if (before?.status !== JobStatus.Dead) return;
    const host = this.#host;
    const after = host.peek(dedupKey);
    if (!after || after.status === JobStatus.Dead || after.status === JobStatus.Cancelled) return;
    // A redrive's reset under way, or one that began (and maybe ended) while this write was in flight.
    if ((this.#resetting.get(dedupKey) ?? 0) > 0) return;
    if ((this.#resetsStarted.get(dedupKey) ?? 0) > (start?.resets ?? 0)) return;
    const fresh =
      before.deadKeyUntil !== undefined &&
      before.deadKeyUntil < Date.now() &&
      after.messageId !== before.messageId;
    if (fresh || this.#unasked.has(dedupKey)) return;
    this.#unasked.add(dedupKey);
    const until =
      before.deadKeyUntil === undefined
        ? 'none'
        : `t=${before.deadKeyUntil - (Date.now() - host.elapsed())} ms`;
    host.violations.push(
      `[dead/runs-unasked] ${dedupKey}: DEAD (message ${before.messageId}, deadKeyUntil ${until}) became ` +
        `${after.status} at t=${host.elapsed()} ms (message ${after.messageId}, owner ${after.owner ?? '-'}, ` +
        `attempts ${after.attempts}), though no operator's redrive reset it and no fresh send past its ` +
        'deadKeyUntil claimed it',
    );
  }

  /** A letter reached the DLQ: a refusal of one of its job's messages is noted. */
  lettered(letter: DeadLetter): void {
    const key = letter.reason.dedupKey ?? '?';
    if (!letter.reason.reason.startsWith('invalid-')) return;
    const all = this.#refusals.get(key) ?? [];
    all.push(`${letter.reason.reason} of ${letter.reason.messageId} at t=${this.#host.elapsed()} ms`);
    this.#refusals.set(key, all);
  }

  /** A record's outcome: bounces and hand-backs counted per message, none at the redrive count. */
  outcome(record: SQSRecord, outcome: RecordOutcome): void {
    if (outcome.action !== 'limited' && outcome.action !== 'deferred') return;
    const id = record.messageId;
    this.#bounced.set(id, (this.#bounced.get(id) ?? 0) + 1);
    const n = Number(record.attributes.ApproximateReceiveCount);
    if (n >= this.#meet.maxReceiveCount) this.#overBounce(id, `${outcome.action} at receive ${n}`);
  }

  /**
   * A batch was received: no message is received past the redrive count because it bounced, i.e. with
   * no more receives besides its bounces than its attempts (receives lost to outages, crashes and stalls,
   * which use no attempt either, are SQS's backstop, not a bounce's doing).
   */
  received(records: readonly SQSRecord[]): void {
    for (const record of records) {
      const n = Number(record.attributes.ApproximateReceiveCount);
      const bounced = this.#bounced.get(record.messageId) ?? 0;
      if (n > this.#meet.maxReceiveCount && bounced > 0 && n - bounced <= this.#host.scenario.maxAttempts) {
        this.#overBounce(record.messageId, `received ${n} times`);
      }
    }
  }

  #overBounce(messageId: string, what: string): void {
    if (this.#overBounced.has(messageId)) return;
    this.#overBounced.add(messageId);
    const host = this.#host;
    const key = host.keyOfMessage.get(messageId) ?? '?';
    host.violations.push(
      `[bounce/queue-redrive] ${key}: message ${messageId}, after ${this.#bounced.get(messageId) ?? 0} ` +
        `bounce(s) or hand-back(s), ${what} at t=${host.elapsed()} ms on a ${host.scenario.fifo ? 'FIFO' : 'standard'} ` +
        `queue whose maxReceiveCount is ${this.#meet.maxReceiveCount}: SQS would move it to the DLQ unrun`,
    );
  }

  /** The issue 32 checks of one job once the run has ended. */
  jobProblems(key: string, item: JobItem | undefined, where: string): string[] {
    const refusals = this.#refusals.get(key);
    const status = item?.status ?? 'absent';
    if (!refusals || !item) return [];
    if (status === JobStatus.Dead || status === JobStatus.Completed || status === JobStatus.Cancelled)
      return [];
    return [
      `[refused/own-ends-dead] ${where}: its message was refused (${refusals.join('; ')}) and the job ends ` +
        `${status} (messageId ${item.messageId}, attempts ${item.attempts}) with no message to bring it back: expected DEAD`,
    ];
  }
}

function keyOf(s: Scenario, spec: OperatorSpec): string {
  return `job-${spec.job % s.jobs.length}`;
}
