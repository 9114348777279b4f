import { randomUUID } from 'node:crypto';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { makeEnvelope } from '../../shared/core/contract/envelope.ts';
import { BENCH_JOB_TYPE } from './jobs.ts';
import { CHUNK, type PlannedMessage, type Workload } from './workload.ts';

/** Options of a {@link Producer}. */
export interface ProducerOptions {
  /** An uncounted client: the producer's requests are not the consumer's. */
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  readonly workload: Workload;
  /** Most messages sent and not yet done at any time (the queue's backlog). */
  readonly backlog: number;
  /**
   * The job type and payload fields (beside `sentAt`) of a key's messages; the benchmark job with no
   * other field when absent.
   */
  /**
   * Workers may re-send a message as a new one (a limit's bounce): a message id the producer never sent
   * stands for the original of its job's key. Only for workloads without duplicates, where a key has one
   * message of ours.
   */
  readonly resends?: boolean;
  readonly describe?: (key: string) => { readonly type: string; readonly fields: Record<string, unknown> };
}

/**
 * Sends a run's messages as leaseq envelopes, each stamped with its send time, keeping at most
 * `backlog` of them outstanding so the queue never runs dry and never piles up: latency then measures
 * the consumer, not how deep a preloaded queue was. Duplicates planned "after" go out once their
 * original's message is done; racing ones go in their planned waves.
 */
export class Producer {
  readonly #options: ProducerOptions;
  /** First send time of every key (epoch ms). */
  readonly firstSent = new Map<string, number>();
  /** When each key's original message was reported done (epoch ms). */
  readonly doneAt = new Map<string, number>();
  readonly #byMessage = new Map<string, PlannedMessage>();
  /** The id of each key's original message (copy 0). */
  readonly #originalId = new Map<string, string>();
  readonly #done = new Set<string>();
  readonly #early = new Set<string>();
  readonly #ready: PlannedMessage[] = [];
  #sent = 0;
  /** Duplicates released (their original done), sent or not. */
  #released = 0;
  #wake: (() => void) | undefined;
  #lastDoneAt = 0;

  constructor(options: ProducerOptions) {
    this.#options = options;
  }

  /** Messages sent so far. */
  get sent(): number {
    return this.#sent;
  }

  /** Distinct messages done (deleted) so far. */
  get done(): number {
    return this.#done.size;
  }

  /** When the last message was reported done (epoch ms). */
  get lastDoneAt(): number {
    return this.#lastDoneAt;
  }

  /** True once every planned message was sent and reported done. */
  get complete(): boolean {
    return this.#sent === this.#options.workload.messages && this.#done.size === this.#sent;
  }

  /** A worker deleted this message (of job `key`, when the worker read it). */
  finished(messageId: string, at = Date.now(), key?: string): void {
    let planned = this.#byMessage.get(messageId);
    const original = key === undefined ? undefined : this.#originalId.get(key);
    if (!planned && this.#options.resends && original !== undefined) {
      messageId = original;
      planned = this.#byMessage.get(original);
    }
    if (!planned) {
      // Done before SendMessageBatch's answer reached us: counted when it does.
      this.#early.add(messageId);
      return;
    }
    if (this.#done.has(messageId)) return;
    this.#done.add(messageId);
    this.#lastDoneAt = at;
    if (planned.copy === 0) {
      this.doneAt.set(planned.key, at);
      const copies = this.#options.workload.afterDone.get(planned.key) ?? 0;
      for (let copy = 1; copy <= copies; copy++) this.#ready.push({ key: planned.key, copy });
      this.#released += copies;
    }
    this.#wake?.();
  }

  /** Sends everything; resolves once the last message is sent (or `signal` aborts). */
  async run(signal: AbortSignal): Promise<void> {
    const { workload, backlog } = this.#options;
    const afterTotal = [...workload.afterDone.values()].reduce((n, c) => n + c, 0);
    let wave = 0;
    while (!signal.aborted && this.#sent < workload.messages) {
      const outstanding = this.#sent - this.#done.size;
      let next: PlannedMessage[][] | undefined;
      if (outstanding + 2 * CHUNK <= backlog) {
        if (this.#ready.length > 0) {
          const take = this.#ready.splice(0, 2 * CHUNK);
          next = [take.slice(0, CHUNK), take.slice(CHUNK)].filter((c) => c.length > 0);
        } else if (wave < workload.waves.length) {
          next = (workload.waves[wave++] ?? []).map((chunk) => [...chunk]);
        }
      }
      if (!next) {
        if (this.#released >= afterTotal && wave >= workload.waves.length && this.#ready.length === 0) break;
        await this.#waitForDone(signal);
        continue;
      }
      await Promise.all(next.map((chunk) => this.#send(chunk)));
    }
  }

  #waitForDone(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(finish, 1000);
      function finish() {
        clearTimeout(timer);
        signal.removeEventListener('abort', finish);
        resolve();
      }
      signal.addEventListener('abort', finish, { once: true });
      this.#wake = finish;
    });
  }

  async #send(chunk: readonly PlannedMessage[]): Promise<void> {
    let entries = chunk.map((planned, i) => {
      const sentAt = Date.now();
      if (!this.firstSent.has(planned.key)) this.firstSent.set(planned.key, sentAt);
      const described = this.#options.describe?.(planned.key);
      const body = makeEnvelope({
        id: randomUUID(),
        dedupKey: planned.key,
        type: described?.type ?? BENCH_JOB_TYPE,
        payload: { ...described?.fields, sentAt },
      });
      return { Id: String(i), MessageBody: JSON.stringify(body), planned };
    });
    for (let tryNumber = 1; entries.length > 0; tryNumber++) {
      const out = await this.#options.sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: this.#options.queueUrl,
          Entries: entries.map(({ Id, MessageBody }) => ({ Id, MessageBody })),
        }),
      );
      for (const ok of out.Successful ?? []) {
        const entry = entries.find((e) => e.Id === ok.Id);
        if (!entry || !ok.MessageId) continue;
        this.#byMessage.set(ok.MessageId, entry.planned);
        if (entry.planned.copy === 0) this.#originalId.set(entry.planned.key, ok.MessageId);
        this.#sent += 1;
        if (this.#early.delete(ok.MessageId)) this.finished(ok.MessageId);
      }
      const failed = new Set((out.Failed ?? []).map((f) => f.Id));
      entries = entries.filter((e) => failed.has(e.Id));
      if (entries.length > 0 && tryNumber >= 5) {
        throw new Error(`SQS refused ${entries.length} messages 5 times: ${out.Failed?.[0]?.Message ?? '?'}`);
      }
    }
  }
}
