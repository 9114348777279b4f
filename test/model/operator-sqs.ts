import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { DynamoDbJobStore } from '../../shared/core/adapters/dynamodb-job-store.ts';
import type { JobStore } from '../../shared/core/contract/job-store.ts';
import type { LetterView, Meet, MeetHost } from './meet.ts';

// What the operator's redrive, purge and cancel (shared/ops, run by meet.ts and operators.ts) talk to in the
// interleaving model: an SQS client over the model's queues, and the DynamoDB job store they build,
// forwarding to the model's store (itself a DynamoDbJobStore on the schedule's in-memory DynamoDB, behind
// the model's audit).

/**
 * Just what shared/ops's redrive asks of SQS, over the model's queues: the DLQ's depth, receives that hide
 * letters for the browse, releases, deletes, and sends to the jobs queue (the model's queue, so workers
 * receive them). Anything else is refused, so a redrive that starts asking more shows here first.
 */
export class ModelSqs {
  readonly #meet: Meet;
  readonly #host: MeetHost;
  /** The letters this client deleted (a purge's are checked against the ids it named). */
  readonly deleted: LetterView[] = [];

  readonly #purging: boolean;

  /** `purging`: its deletes are a purge's (the letters leave the DLQ, not the model's record of letters). */
  constructor(meet: Meet, host: MeetHost, purging = false) {
    this.#meet = meet;
    this.#host = host;
    this.#purging = purging;
  }

  #delete(l: LetterView): void {
    if (this.#purging) this.#meet.purgeLetter(l);
    else this.#meet.deleteLetter(l);
    this.deleted.push(l);
  }

  async send(command: unknown): Promise<unknown> {
    const now = Date.now();
    const meet = this.#meet;
    if (command instanceof GetQueueAttributesCommand) {
      const letters = meet.letters();
      const visible = letters.filter((l) => l.visibleAt <= now).length;
      return {
        Attributes: {
          ApproximateNumberOfMessages: String(visible),
          ApproximateNumberOfMessagesNotVisible: String(letters.length - visible),
          ApproximateNumberOfMessagesDelayed: '0',
        },
      };
    }
    if (command instanceof ReceiveMessageCommand) {
      const max = command.input.MaxNumberOfMessages ?? 1;
      const page = meet
        .letters()
        .filter((l) => l.visibleAt <= now)
        .slice(0, max);
      const messages: Message[] = page.map((l) => {
        l.receives += 1;
        l.visibleAt = now + (command.input.VisibilityTimeout ?? 30) * 1000;
        l.receipt = `${l.id}#${l.receives}`;
        return {
          MessageId: l.id,
          ReceiptHandle: l.receipt,
          Body: l.letter.body,
          MessageAttributes: l.attributes,
          Attributes: {
            SentTimestamp: String(l.sentAt),
            ApproximateReceiveCount: String(l.receives),
            ...(l.letter.groupId === undefined ? {} : { MessageGroupId: l.letter.groupId }),
          },
        };
      });
      return { Messages: messages };
    }
    if (command instanceof ChangeMessageVisibilityBatchCommand) {
      for (const entry of command.input.Entries ?? []) {
        const l = meet.letters().find((x) => x.receipt === entry.ReceiptHandle);
        if (l) l.visibleAt = now + (entry.VisibilityTimeout ?? 0) * 1000;
      }
      return { Successful: (command.input.Entries ?? []).map((e) => ({ Id: e.Id })), Failed: [] };
    }
    if (command instanceof DeleteMessageCommand) {
      const handle = command.input.ReceiptHandle ?? '';
      const l = meet.letters().find((x) => x.id === handle.split('#')[0]);
      if (l) this.#delete(l);
      return {};
    }
    if (command instanceof DeleteMessageBatchCommand) {
      const done: { Id: string }[] = [];
      for (const entry of command.input.Entries ?? []) {
        const l = meet.letters().find((x) => x.id === (entry.ReceiptHandle ?? '').split('#')[0]);
        if (!l) continue;
        this.#delete(l);
        done.push({ Id: entry.Id ?? '' });
      }
      return { Successful: done, Failed: [] };
    }
    if (command instanceof SendMessageCommand) {
      const body = command.input.MessageBody ?? '';
      const life = meet.lifeOfBody(body);
      const groupId = command.input.MessageGroupId;
      // Its attributes as a record carries them (a redrive may name the letter's message in one).
      const attributes = Object.fromEntries(
        Object.entries(command.input.MessageAttributes ?? {}).map(([name, a]) => [
          name,
          {
            dataType: a.DataType ?? 'String',
            ...(a.StringValue === undefined ? {} : { stringValue: a.StringValue }),
          },
        ]),
      ) as NonNullable<SQSRecord['messageAttributes']>;
      const id = this.#host.queue.send(body, {
        ...(groupId === undefined ? {} : { groupId }),
        ...(Object.keys(attributes).length > 0 ? { attributes } : {}),
      });
      if (life !== undefined) meet.redriven.set(id, life);
      this.#host.log('info', 'redrive sent a letter back', {
        dedupKey: this.#host.keyOfMessage.get(id),
        messageId: id,
        life,
      });
      return { MessageId: id };
    }
    throw new Error(`the model's SQS has no ${(command as object).constructor.name}`);
  }
}

/** The store the DynamoDbJobStores forward to while an operator action runs, and how many run. */
let forwardTo: JobStore | undefined;
let forwarding = 0;
const savedMethods = new Map<string, unknown>();
/** The model's own job stores (the workers', on the schedule's DynamoDB): never forwarded. */
const modelStores = new WeakSet<object>();

/** `store` is the model's own: its calls are never forwarded (see {@link forwardJobStore}). */
export function modelJobStore(store: object): void {
  modelStores.add(store);
}

/**
 * Makes every other DynamoDbJobStore (the redrive and the cancel build their own from the target's
 * clients) forward its calls to `store` until the returned function is called (the last of the operator
 * actions under way restores them): the operator's writes pass the model's audit and its checks, which
 * sit at the store.
 */
export function forwardJobStore(store: JobStore): () => void {
  forwardTo = store;
  const proto = DynamoDbJobStore.prototype as unknown as Record<string, unknown>;
  if (forwarding++ === 0) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      const original = proto[name];
      if (name === 'constructor' || typeof original !== 'function') continue;
      savedMethods.set(name, original);
      proto[name] = function (this: object, ...args: unknown[]) {
        if (modelStores.has(this)) return (original as (...a: unknown[]) => unknown).apply(this, args);
        const method = (forwardTo as unknown as Record<string, unknown> | undefined)?.[name];
        if (typeof method !== 'function') throw new Error(`the model's job store has no ${name}`);
        return (method as (...a: unknown[]) => unknown).apply(forwardTo, args);
      };
    }
  }
  return () => {
    if (--forwarding > 0) return;
    for (const [name, fn] of savedMethods) proto[name] = fn;
    savedMethods.clear();
    forwardTo = undefined;
  };
}
