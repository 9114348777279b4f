import type { SQSRecord } from 'aws-lambda';
import type { AwsClients } from '../../shared/aws/clients.ts';
import { deadLetterAttributes } from '../../shared/core/adapters/sqs-job-queue.ts';
import type { JobItem } from '../../shared/core/contract/job-item.ts';
import type { ClaimRequest, ClaimResult, JobStore } from '../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { describe as describeError } from '../../shared/error-text.ts';
import { type RedriveOptions, redrive } from '../../shared/ops/dlq-redrive.ts';
import type { OpsTarget } from '../../shared/ops/target.ts';
import { redriveMaxReceiveCount } from '../../shared/resources.ts';
import type { DeadLetter, InMemoryQueue } from '../../shared/testing/in-memory-queue.ts';
import { FIFO_SUFFIX } from './fifo.ts';
import { forwardJobStore, ModelSqs } from './operator-sqs.ts';
import { Operators } from './operators.ts';
import type { JobSpec, RedriveSpec, Scenario } from './scenario.ts';

/*
 * Issue 31's kinds in the interleaving model (scenario.ts MEET_KINDS, generated in meet-scenario.ts): what
 * the harness needs to run them, and their checks, tagged `[kind/check]`.
 *
 *  - `redrive`: the operator's `leaseq dlq redrive` is the real shared/ops code (redrive()), run against
 *    the model's own queue and store: its SQS client is {@link ModelSqs} (the DLQ as SQS shows it, the
 *    jobs queue for its sends) and the DynamoDB job store it builds forwards every call to the model's
 *    store ({@link forwardJobStore}). The model knows each key's life (0, then one more per dead-key reset
 *    by a fresh send) and the life each letter was sent in. A redrive must never run a letter over
 *    another job: it resets a key only for a letter of the key's current life, and a message it sent is
 *    never claimed by another life's job (`[redrive/over-another-job]`).
 *  - `schema`: the job's payload fails its type's schema from the moment the job first waits for a retry
 *    (a deploy with a stricter schema); it must end DEAD, an `invalid-*` letter saying why, never waiting
 *    with no message (`[schema/ends-dead]`).
 *  - `fifo-limit`: on a FIFO queue, with a slot held for minutes, no message is received more often than
 *    the queue's redrive `maxReceiveCount` (SQS would move it to the DLQ unrun, `[fifo/queue-redrive]`);
 *    bounces use no attempt (issue 21's `[concurrency/bounce-used-attempt]`).
 *  - `hot-row`: a burst of jobs crediting one row; optimistic conflicts use no attempt: every job
 *    completes (`[hot-row/dead]`) at no more attempts than its other failures explain
 *    (`[hot-row/attempt-used]`); effects once each (the model's ledger checks).
 */

/** What the issue 31 kinds need of the harness's World. */
export interface MeetHost {
  readonly scenario: Scenario;
  readonly queue: InMemoryQueue;
  /** The store as the workers see it (its audit included): the operator's calls go there too. */
  readonly workerStore: JobStore;
  readonly violations: string[];
  readonly keyOfMessage: Map<string, string>;
  log(level: string, message: string, extra?: Record<string, unknown>): void;
  /** Runs `event` after `ms` (virtual); the run waits for it. */
  later(ms: number, event: () => void): void;
  /** Holds the run open while an operator action is under way. */
  hold(delta: 1 | -1): void;
  peek(dedupKey: string): JobItem | undefined;
  elapsed(): number;
  /** Sends job `index` (issue 32's fresh sends: `copy` from 2000, a new envelope created now). */
  send(index: number, copy: number): void;
  /** The operator cancels `dedupKey` (the steer kind's bookkeeping and checks; operators.ts runs it). */
  cancel(dedupKey: string, retry: number): Promise<void>;
}

/** A letter as the model's DLQ shows it to an SQS client. */
export interface LetterView {
  readonly id: string;
  readonly letter: DeadLetter;
  readonly sentAt: number;
  readonly attributes: ReturnType<typeof deadLetterAttributes>;
  /** The life of its key when it was sent (or the life whose item came to name its message). */
  life: number;
  visibleAt: number;
  receives: number;
  receipt?: string;
}

const QUEUE_URL = 'http://sqs.model/000000000000/model-jobs';
const DLQ_URL = 'http://sqs.model/000000000000/model-jobs-dlq';

/** The run's issue 31 state: lives of keys, the DLQ's letters as SQS shows them, the checks' books. */
export class Meet {
  readonly #host: MeetHost;
  /** Dead-key resets by a fresh send, per key. */
  readonly lives = new Map<string, number>();
  /** Handler runs in the key's current life (JobSpec.resetFails). */
  readonly lifeRuns = new Map<string, number>();
  readonly #letters: LetterView[] = [];
  #nextLetter = 0;
  /** Messages a redrive sent to the jobs queue: the life of the letter they came from. */
  readonly redriven = new Map<string, number>();
  /** Resets a redrive made, per key. */
  readonly redriveResets = new Map<string, number>();
  /** Keys whose payload the stricter schema refuses (kind `schema`), and since when (ms into the run). */
  readonly invalid = new Map<string, number>();
  /** Releases per key by error class (kind `hot-row`). */
  readonly conflicts = new Map<string, number>();
  readonly otherFailures = new Map<string, number>();
  readonly #fired = new Set<RedriveSpec>();
  readonly #purged = new Set<DeadLetter>();
  /** Redriven messages already reported for claiming another life's job. */
  readonly #overClaimed = new Set<string>();
  /** Messages already reported past maxReceiveCount. */
  readonly #overReceived = new Set<string>();
  readonly maxReceiveCount: number;
  redrives = 0;
  /** Issue 32's operator actions (operators.ts). */
  readonly ops: Operators;
  #operatorStoreOf: JobStore | undefined;

  constructor(host: MeetHost) {
    this.#host = host;
    const s = host.scenario;
    this.maxReceiveCount = redriveMaxReceiveCount({
      maxAttempts: s.maxAttempts,
      batchSize: s.batchSize,
      fifo: s.fifo === true,
    });
    this.ops = new Operators(this, host);
  }

  lifeOf(dedupKey: string): number {
    return this.lives.get(dedupKey) ?? 0;
  }

  start(): void {
    for (const spec of this.#host.scenario.redrives ?? []) {
      if (spec.on === 'at') this.#fire(spec);
    }
    this.ops.start();
  }

  /** A claim answered (or not) on `before`: a DEAD key claimed again was reset by a fresh send. */
  claimed(request: ClaimRequest, before: JobItem | undefined, answer: ClaimResult | undefined): void {
    const after = this.#host.peek(request.dedupKey);
    const key = request.dedupKey;
    // Answered, the claim says so; its answer lost, the item tells (unless a later write moved it on).
    const answered = answer?.claimed === true && answer.wasDeadAt !== undefined;
    const reset =
      answered ||
      (before?.status === JobStatus.Dead &&
        after?.status === JobStatus.InProgress &&
        after.token !== before.token &&
        after.messageId === request.messageId &&
        after.owner === request.owner);
    if (answer?.claimed) this.ops.trigger('running', key);
    if (reset) {
      this.lives.set(key, this.lifeOf(key) + 1);
      this.lifeRuns.set(key, 0);
      // A message that resets the key (a redriven one included, after its job died again past the TTL)
      // is the new life's own.
      if (this.redriven.has(request.messageId)) this.redriven.set(request.messageId, this.lifeOf(key));
      return;
    }
    const life = this.redriven.get(request.messageId);
    if (
      life !== undefined &&
      answer?.claimed &&
      life !== this.lifeOf(key) &&
      !this.#overClaimed.has(request.messageId)
    ) {
      this.#overClaimed.add(request.messageId);
      this.#host.violations.push(
        `[redrive/over-another-job] ${key}: message ${request.messageId}, sent by a redrive from a letter of ` +
          `the key's life ${life}, claimed the job of life ${this.lifeOf(key)} at t=${this.#host.elapsed()} ms`,
      );
    }
  }

  /** A letter reached the DLQ: the first on the queue's list `all` the books do not know yet. */
  letteredAny(all: readonly DeadLetter[]): void {
    const known = new Set(this.#letters.map((l) => l.letter));
    const letter = all.find((l) => !known.has(l));
    if (letter) this.lettered(letter);
  }

  /** A letter reached the DLQ (`letter`, just pushed onto the queue's list). */
  lettered(letter: DeadLetter): void {
    const key = letter.reason.dedupKey ?? '?';
    const life = this.lifeOf(key);
    this.#nextLetter += 1;
    this.#letters.push({
      id: `dl-${this.#nextLetter}`,
      letter,
      sentAt: Date.now(),
      attributes: deadLetterAttributes(letter.reason),
      life,
      visibleAt: Date.now(),
      receives: 0,
    });
    if (life > 0) this.#trigger('second-death');
    this.ops.lettered(letter);
    this.ops.trigger('dead', key);
  }

  /** A job was released for a retry (answered): a reset key's wait, a stricter schema's deploy. */
  released(dedupKey: string, spec: JobSpec | undefined, errorClass: string): void {
    if (errorClass === 'OptimisticConflictError') {
      this.conflicts.set(dedupKey, (this.conflicts.get(dedupKey) ?? 0) + 1);
    } else this.otherFailures.set(dedupKey, (this.otherFailures.get(dedupKey) ?? 0) + 1);
    if (this.#host.peek(dedupKey)?.status !== JobStatus.RetryWait) return;
    this.ops.trigger('wait', dedupKey);
    if (this.lifeOf(dedupKey) > 0) this.#trigger('wait-after-reset');
    if (spec?.stricterSchema === true && !this.invalid.has(dedupKey)) {
      this.invalid.set(dedupKey, this.#host.elapsed());
      this.#host.log('info', 'a stricter schema is deployed: this payload fails it from now on', {
        dedupKey,
      });
    }
  }

  /** The issue 31 checks of one job (`where` names it), once the run has ended. */
  jobProblems(
    key: string,
    spec: JobSpec,
    item: JobItem | undefined,
    letters: readonly DeadLetter[],
    where: string,
  ): string[] {
    const problems: string[] = [];
    const status = item?.status ?? 'absent';
    const said = letters.map(
      (l) => `${l.reason.reason}/${l.reason.errorClass} at attempts ${l.reason.attempts}`,
    );
    const since = this.invalid.get(key);
    if (spec.stricterSchema && since !== undefined) {
      // A copy already past the payload check when the schema changed may still use the last attempt.
      const told = letters.some(
        (l) => l.reason.reason.startsWith('invalid-') || l.reason.reason === 'max-attempts',
      );
      if (status !== JobStatus.Dead || !told) {
        problems.push(
          `[schema/ends-dead] ${where}: its payload fails the schema deployed at t=${since} ms while it waited, ` +
            `and it ends ${status} (messageId ${item?.messageId ?? '-'}, attempts ${item?.attempts ?? '-'}) with ` +
            `letters [${said.join(', ')}]: expected DEAD with an invalid-* letter`,
        );
      }
    }
    if (spec.hot && quiet(this.#host.scenario)) {
      const conflicts = this.conflicts.get(key) ?? 0;
      const other = this.otherFailures.get(key) ?? 0;
      if (status === JobStatus.Dead) {
        problems.push(
          `[hot-row/dead] ${where} ended DEAD (${said.join(', ')}) after ${conflicts} optimistic conflict(s) and ` +
            `${other} other failure(s): every job of a burst on one row completes`,
        );
      } else if (status === JobStatus.Completed && (item?.attempts ?? 0) > 1 + other) {
        problems.push(
          `[hot-row/attempt-used] ${where} COMPLETED at attempt ${item?.attempts} of ` +
            `${this.#host.scenario.maxAttempts} after ${conflicts} optimistic conflict(s) and ${other} other ` +
            'failure(s): a conflict must not use an attempt',
        );
      }
    }
    problems.push(...this.ops.jobProblems(key, item, where));
    return problems;
  }

  /** Kind `fifo-limit`: no receive past the queue's maxReceiveCount (SQS would move the message). */
  received(records: readonly SQSRecord[]): void {
    this.ops.received(records);
    if (!this.#host.scenario.fifo) return;
    for (const record of records) {
      const n = Number(record.attributes.ApproximateReceiveCount);
      if (n <= this.maxReceiveCount || this.#overReceived.has(record.messageId)) continue;
      this.#overReceived.add(record.messageId);
      const key = this.#host.keyOfMessage.get(record.messageId) ?? '?';
      this.#host.violations.push(
        `[fifo-limit/queue-redrive] ${key}: message ${record.messageId} received ${n} times at t=${this.#host.elapsed()} ms, ` +
          `past the queue's maxReceiveCount ${this.maxReceiveCount}: SQS would have moved it to the DLQ unrun, with no reason`,
      );
    }
  }

  #trigger(on: RedriveSpec['on']): void {
    for (const spec of this.#host.scenario.redrives ?? []) {
      if (spec.on === on) this.#fire(spec);
    }
  }

  #fire(spec: RedriveSpec): void {
    if (this.#fired.has(spec)) return;
    this.#fired.add(spec);
    this.#host.later(spec.atMs, () => void this.redrive(0));
  }

  /**
   * The operator's `leaseq dlq redrive` (every letter; issue 32: `--dedup-key`, `--payload-file`, as
   * `options` say): the real code, on the model's queue and store.
   */
  async redrive(retry: number, options: RedriveOptions = {}): Promise<void> {
    const host = this.#host;
    host.hold(1);
    this.redrives += 1;
    const restore = forwardJobStore(this.operatorStore());
    try {
      const report = await redrive(this.target(), { ...options, by: 'model-operator' });
      for (const item of report.items) {
        host.log('info', `redrive ${item.outcome}`, {
          dedupKey: item.dedupKey,
          letter: item.messageId,
          ...(item.reset ? { reset: true } : {}),
          ...(item.newMessageId ? { sent: item.newMessageId } : {}),
          ...(item.detail ? { detail: item.detail } : {}),
        });
      }
    } catch (error) {
      host.log('info', 'redrive failed', { error: describeError(error) });
      if (retry === 0) host.later(1000, () => void this.redrive(1, options));
    } finally {
      restore();
      host.hold(-1);
    }
  }

  /**
   * The store the operator's DynamoDB stores forward to: the workers' (audited), its resets checked. One
   * per run: forwardJobStore forwards every DynamoDbJobStore to the last one given while any is under way.
   */
  operatorStore(): JobStore {
    this.#operatorStoreOf ??= this.#checkedStore();
    return this.#operatorStoreOf;
  }

  #checkedStore(): JobStore {
    const host = this.#host;
    const inner = host.workerStore;
    return new Proxy(inner, {
      get: (target, name, receiver) => {
        if (name !== 'resetForRedrive') {
          const value: unknown = Reflect.get(target, name, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        }
        return async (...args: Parameters<JobStore['resetForRedrive']>) => {
          const [dedupKey, , , by] = args;
          const before = host.peek(dedupKey);
          this.ops.resetting(dedupKey, 1);
          let reset: boolean;
          try {
            reset = await target.resetForRedrive(...args);
          } finally {
            this.ops.resetting(dedupKey, -1);
          }
          const view = this.#letters.find((l) => l.id === by?.letter);
          if (reset) this.redriveResets.set(dedupKey, (this.redriveResets.get(dedupKey) ?? 0) + 1);
          // The known gap (docs/protocol.md): the message a job died under, its dead marking's answer lost,
          // kept and back later, may take over the key's next life; the item then names it, and a redrive
          // of its letter follows the item.
          if (view && before?.messageId === view.letter.reason.messageId) view.life = this.lifeOf(dedupKey);
          if (reset && view && view.life !== this.lifeOf(dedupKey)) {
            host.violations.push(
              `[redrive/over-another-job] ${dedupKey}: a redrive reset the job of life ${this.lifeOf(dedupKey)} ` +
                `for letter ${view.id} (message ${view.letter.reason.messageId}, ${view.letter.reason.reason}) of ` +
                `life ${view.life}, at t=${host.elapsed()} ms: its old body now runs over another job`,
            );
          }
          return reset;
        };
      },
    });
  }

  /** The operator's target: the model's queues (its SQS client) and tables (the forwarded job store). */
  target(): OpsTarget {
    const fifo = this.#host.scenario.fifo === true;
    const clients = { sqs: new ModelSqs(this, this.#host) } as unknown as AwsClients;
    return {
      clients,
      names: {
        queueUrl: fifo ? `${QUEUE_URL}${FIFO_SUFFIX}` : QUEUE_URL,
        dlqUrl: fifo ? `${DLQ_URL}${FIFO_SUFFIX}` : DLQ_URL,
        jobsTable: 'model-jobs',
        leasesTable: 'model-leases',
      },
    };
  }

  /**
   * The DLQ's letters as SQS holds them (the queue's list is the truth: a deleted one is gone from it; a
   * purged one stays on it for the checks, but not in the DLQ).
   */
  letters(): LetterView[] {
    const held = new Set(this.#host.queue.deadLetters);
    return this.#letters.filter((l) => held.has(l.letter) && !this.#purged.has(l.letter));
  }

  /** Issue 32: a purge deleted a letter: gone from the DLQ, still on the queue's list of what was lettered. */
  purgeLetter(view: LetterView): void {
    this.#purged.add(view.letter);
  }

  /** A redrive deleted a letter: off the queue's list. */
  deleteLetter(view: LetterView): void {
    const list = this.#host.queue.deadLetters;
    const at = list.indexOf(view.letter);
    if (at >= 0) list.splice(at, 1);
  }

  /**
   * The life of the letters being redriven with this body (the letter a redrive's send came from): of the
   * same envelope (an edited payload keeps its id and dedup key).
   */
  lifeOfBody(body: string): number | undefined {
    const now = Date.now();
    const same = envelopeOf(body);
    const lives = new Set(
      this.letters()
        .filter((l) => (l.letter.body === body || envelopeOf(l.letter.body) === same) && l.visibleAt > now)
        .map((l) => l.life),
    );
    return lives.size === 1 ? [...lives][0] : undefined;
  }
}

/** A body's envelope id and dedup key (`id dedupKey`), or the body itself when it is no envelope. */
function envelopeOf(body: string): string {
  try {
    const parsed = JSON.parse(body) as { id?: unknown; dedupKey?: unknown };
    return `${String(parsed.id)} ${String(parsed.dedupKey)}`;
  } catch {
    return body;
  }
}

/** A schedule with no fault, crash, stall, duplicate or cancel: a job's failures are its own doing. */
function quiet(s: Scenario): boolean {
  return (
    s.faults.length === 0 &&
    s.crashes.length === 0 &&
    s.pauses.length === 0 &&
    s.duplicates.length === 0 &&
    (s.cancels?.length ?? 0) === 0
  );
}
