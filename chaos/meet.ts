// `npm run chaos -- --meet`: issue 31's input kinds (where features meet) beside the chaos workload, under
// the same kills, faults and pauses, each with its own check:
//
//   - hot row: a burst of `chaos.hotCredit` jobs on one account (the documented versionedPut pattern):
//     every job completes, each credit once, the balance their sum, and no attempt ends in an optimistic
//     conflict that is not given back (a `failed` OptimisticConflictError history event not refunded);
//   - redrive after a dead-key reset: generation 1 of a `chaos.ttlJob` key dies; past the TTL a fresh send
//     (generation 2) resets the key and fails a few attempts; while it waits for its retry the operator
//     redrives the key's letters (the real shared/ops redrive). The redrive must not send generation 1's
//     letter over generation 2's job: the key ends COMPLETED by generation 2, generation 1's letter left;
//   - stricter schema while a job waits: a `chaos.strictJob` whose payload fails its schema from
//     `strictAfter` on, while it waits for a retry: it ends DEAD with an `invalid-*` letter, never stranded.
//
// A FIFO queue with a slot held for minutes is left to the interleaving model (test/model, kind
// `fifo-limit`): the chaos run's FIFO redrive count (attempts x batch size + margin) takes an hour of
// bounces to reach.
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { AwsClients } from '../shared/aws/clients.ts';
import { DynamoDbJobStore } from '../shared/core/adapters/dynamodb-job-store.ts';
import { makeEnvelope } from '../shared/core/contract/envelope.ts';
import type { JobItem } from '../shared/core/contract/job-item.ts';
import { JobStatus } from '../shared/core/contract/statuses.ts';
import { listDeadLetters } from '../shared/ops/dlq.ts';
import { redrive } from '../shared/ops/dlq-redrive.ts';
import { type OutgoingMessage, sendMessages } from '../shared/producer/send-messages.ts';
import { HOT_CREDIT, MEET_PREFIX, meetTally, STRICT_JOB, TTL_JOB, TTL_SECONDS } from './meet-jobs.ts';
import { sleep } from './timing.ts';

export interface MeetNames {
  readonly queueUrl: string;
  readonly dlqUrl: string;
  readonly jobsTable: string;
  readonly leasesTable: string;
  readonly ledgerTable: string;
}

/** What the variant found: its figures and its violations (each naming the keys behind it). */
export interface MeetResult {
  readonly figures: {
    readonly hotJobs: number;
    readonly hotConflictAttempts: number;
    readonly redrives: number;
    readonly redrivenOverNewer: number;
    readonly strictJobs: number;
  };
  readonly violations: readonly string[];
}

const HOT_JOBS = 120;
const TTL_KEYS = 6;
const STRICT_KEYS = 6;
/** The stricter schema comes this long after the send: the job has claimed and failed by then. */
const STRICT_AFTER_MS = 20_000;

export class MeetVariant {
  readonly #clients: AwsClients;
  readonly #names: MeetNames;
  readonly #say: (line: string) => void;
  readonly #store: DynamoDbJobStore;
  readonly hotKeys: string[];
  readonly ttlKeys: string[];
  readonly strictKeys: string[];
  readonly #hotAccount: string;
  readonly #violations: string[] = [];
  #redrives = 0;
  #overNewer = 0;

  constructor(clients: AwsClients, names: MeetNames, runId: string, say: (line: string) => void) {
    this.#clients = clients;
    this.#names = names;
    this.#say = say;
    this.#store = new DynamoDbJobStore({ client: clients.doc, tableName: names.jobsTable });
    const key = (what: string, i: number) => `${MEET_PREFIX}${runId}-${what}-${i}`;
    this.hotKeys = Array.from({ length: HOT_JOBS }, (_, i) => key('hot', i));
    this.ttlKeys = Array.from({ length: TTL_KEYS }, (_, i) => key('ttl', i));
    this.strictKeys = Array.from({ length: STRICT_KEYS }, (_, i) => key('strict', i));
    this.#hotAccount = `${MEET_PREFIX}${runId}-hot-row`;
  }

  /** Every key the variant sent: the run waits for them too. */
  get keys(): string[] {
    return [...this.hotKeys, ...this.ttlKeys, ...this.strictKeys];
  }

  /** Sends the burst, the waiting jobs and the first generations; then redrives each reset key in turn. */
  async run(signal: AbortSignal): Promise<void> {
    const now = Date.now();
    const message = (dedupKey: string, type: string, payload: unknown, id = dedupKey): OutgoingMessage => ({
      body: JSON.stringify(makeEnvelope({ id, dedupKey, type, payload })),
      dedupKey,
    });
    await this.#send([
      ...this.strictKeys.map((k) => message(k, STRICT_JOB, { strictAfter: now + STRICT_AFTER_MS })),
      ...this.ttlKeys.map((k) => message(k, TTL_JOB, { gen: 1, poison: true }, `${k}-gen1`)),
      ...this.hotKeys.map((k, i) =>
        message(k, HOT_CREDIT, { account: this.#hotAccount, amount: 1 + (i % 7) }),
      ),
    ]);
    this.#say(`meet: sent ${HOT_JOBS} hot-row credits, ${STRICT_KEYS} strict jobs, ${TTL_KEYS} ttl jobs`);
    await Promise.all(this.ttlKeys.map((k) => this.#resetThenRedrive(k, signal, message)));
  }

  async #send(messages: readonly OutgoingMessage[]): Promise<void> {
    const report = await sendMessages(this.#clients.sqs, this.#names.queueUrl, messages);
    if (report.failed > 0) throw new Error(`meet: SQS refused ${report.failed} messages`);
  }

  /** One ttl key: wait for its death and TTL, send generation 2, and redrive while it waits. */
  async #resetThenRedrive(
    key: string,
    signal: AbortSignal,
    message: (k: string, type: string, payload: unknown, id?: string) => OutgoingMessage,
  ): Promise<void> {
    const dead = await this.#until(key, signal, (i) => i?.status === JobStatus.Dead);
    if (!dead) return;
    await sleep(Math.max(0, (dead.deadKeyUntil ?? Date.now()) - Date.now()) + TTL_SECONDS * 1000);
    await this.#send([message(key, TTL_JOB, { gen: 2, failTimes: 3 }, `${key}-gen2`)]);
    const waiting = await this.#until(
      key,
      signal,
      (i) => i?.status === JobStatus.RetryWait && (i.history ?? []).some((e) => e.e === 'reset'),
    );
    if (!waiting) return;
    this.#redrives += 1;
    const report = await redrive(
      { clients: this.#clients, names: this.#names },
      { filter: { dedupKey: key }, by: 'chaos-meet' },
    ).catch((error: unknown) => {
      this.#say(`meet: redrive of ${key} failed: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    });
    // Every letter of the key is generation 1's (a poison; generation 2 never dies): none may be sent
    // while generation 2's job waits.
    for (const item of report?.items ?? []) {
      this.#say(
        `meet: redrive of ${key}: letter ${item.messageId} ${item.outcome}${item.detail ? ` (${item.detail})` : ''}`,
      );
      if (item.outcome !== 'redriven') continue;
      this.#overNewer += 1;
      this.#violations.push(
        `a redrive ran a letter over another job: ${key}'s generation-1 letter ${item.messageId} was sent back ` +
          "while generation 2 (a fresh send after the dead key's TTL) waited for its retry",
      );
    }
  }

  /**
   * Polls the key's item until `ready` or the signal (the run's end: a loaded run takes minutes to reach
   * a message sent behind the workload).
   */
  async #until(
    key: string,
    signal: AbortSignal,
    ready: (item: JobItem | undefined) => boolean,
  ): Promise<JobItem | undefined> {
    while (!signal.aborted) {
      const item = await this.#store.get(key).catch(() => undefined);
      if (ready(item)) return item;
      await sleep(200);
    }
    this.#say(`meet: ${key} never got where the variant waited for it`);
    return undefined;
  }

  /** Waits (up to `until`) for every key to end COMPLETED, DEAD or CANCELLED. */
  async settle(until: number): Promise<void> {
    for (;;) {
      const items = await Promise.all(this.keys.map((k) => this.#store.get(k).catch(() => undefined)));
      const open = items.filter(
        (i) => i?.status !== JobStatus.Completed && i?.status !== JobStatus.Dead && i !== undefined,
      ).length;
      if (open === 0 || Date.now() > until) return;
      await sleep(1000);
    }
  }

  /** The variant's checks, on the store as it ends. */
  async check(): Promise<MeetResult> {
    const violations = [...this.#violations];
    const get = (k: string) => this.#store.get(k).catch(() => undefined);
    const tallyOf = async (row: string) => {
      const item = await this.#clients.doc
        .send(
          new GetCommand({ TableName: this.#names.ledgerTable, Key: { account: row }, ConsistentRead: true }),
        )
        .catch(() => undefined);
      return item?.Item as Record<string, unknown> | undefined;
    };
    const note = (what: string, keys: readonly string[]) => {
      if (keys.length > 0) violations.push(`${what}: ${keys.length} (${keys.slice(0, 5).join(', ')})`);
    };
    // Hot row.
    const hot = await Promise.all(this.hotKeys.map(async (k) => ({ k, item: await get(k) })));
    note(
      'hot-row jobs not COMPLETED',
      hot.filter((h) => h.item?.status !== JobStatus.Completed).map((h) => `${h.k} (${h.item?.status})`),
    );
    let conflictAttempts = 0;
    const burned: string[] = [];
    for (const { k, item } of hot) {
      const used = (item?.history ?? []).filter(
        (e) => e.e === 'failed' && e.errorClass === 'OptimisticConflictError' && !e.refunded,
      ).length;
      conflictAttempts += used;
      if (used > 0) burned.push(`${k} x${used}`);
    }
    note('hot-row jobs whose optimistic conflicts used attempts', burned);
    const wrongTally: string[] = [];
    for (const { k } of hot) {
      const applied = Number((await tallyOf(meetTally(k, 'final')))?.applied ?? 0);
      if (applied !== 1) wrongTally.push(`${k} x${applied}`);
    }
    note('hot-row credits not applied exactly once', wrongTally);
    const expected = this.hotKeys.reduce((n, _, i) => n + 1 + (i % 7), 0);
    const balance = Number((await tallyOf(this.#hotAccount))?.balance ?? 0);
    if (balance !== expected) violations.push(`hot-row balance ${balance}, credits sum to ${expected}`);
    // Redrive after a dead-key reset.
    const ttl = await Promise.all(this.ttlKeys.map(async (k) => ({ k, item: await get(k) })));
    note(
      'reset keys not COMPLETED by their fresh send',
      ttl.filter((t) => t.item?.status !== JobStatus.Completed).map((t) => `${t.k} (${t.item?.status})`),
    );
    const gen2: string[] = [];
    for (const { k } of ttl) {
      const applied = Number((await tallyOf(meetTally(k, 'gen2')))?.applied ?? 0);
      if (applied !== 1) gen2.push(`${k} x${applied}`);
    }
    note('reset keys whose generation 2 did not commit exactly once', gen2);
    // Stricter schema while waiting.
    const letters = await listDeadLetters(this.#clients.sqs, this.#names.dlqUrl, { limit: 10_000 });
    const strict = await Promise.all(this.strictKeys.map(async (k) => ({ k, item: await get(k) })));
    note(
      'jobs whose payload a stricter schema refused while they waited, not ended DEAD with an invalid-* letter',
      strict
        .filter(
          (s) =>
            s.item?.status !== JobStatus.Dead ||
            !letters.some((l) => l.dedupKey === s.k && l.reason.startsWith('invalid-')),
        )
        .map((s) => `${s.k} (${s.item?.status}, attempts ${s.item?.attempts})`),
    );
    return {
      figures: {
        hotJobs: HOT_JOBS,
        hotConflictAttempts: conflictAttempts,
        redrives: this.#redrives,
        redrivenOverNewer: this.#overNewer,
        strictJobs: STRICT_KEYS,
      },
      violations,
    };
  }
}
