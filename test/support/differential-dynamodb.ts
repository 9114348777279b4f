import { isDeepStrictEqual } from 'node:util';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { InMemoryDynamoDb } from '../../shared/testing/in-memory-dynamodb/client.ts';
import type { TableSchema } from '../../shared/testing/in-memory-dynamodb/tables.ts';

// A differential check of InMemoryDynamoDb against the emulator: a document client whose every request is
// sent to the emulator and, with the same command and input, to an in-memory DynamoDB holding the same
// tables; both answers (or refusals) are compared. Requests run one at a time, so both apply them in the
// same order (concurrent calls of a test still race, one of their orders taken). Normalised away: the
// response metadata (request ids, attempts), and consumed capacity when the emulator reports none.

/** An answer or a refusal, without what no two services share. */
export type Outcome =
  | { readonly ok: Record<string, unknown> }
  | {
      readonly refused: string;
      readonly status: number | undefined;
      readonly Item?: unknown;
      readonly CancellationReasons?: unknown;
    };

export interface Disagreement {
  readonly command: string;
  readonly input: unknown;
  readonly emulator: Outcome;
  readonly memory: Outcome;
}

export class DifferentialDynamoDb {
  /** Send through this client: the emulator answers, the in-memory DynamoDB is asked the same. */
  readonly client: DynamoDBDocumentClient;
  readonly memory: InMemoryDynamoDb;
  /** Requests compared so far. */
  compared = 0;
  readonly #disagreements: Disagreement[] = [];
  #last: Promise<unknown> = Promise.resolve();

  constructor(emulator: DynamoDBDocumentClient, tables: readonly TableSchema[]) {
    this.memory = new InMemoryDynamoDb({ tables });
    const send = (command: { input: unknown }, options?: unknown) => {
      const turn = this.#last.then(() => this.#both(emulator, command, options));
      this.#last = turn.catch(() => undefined);
      return turn;
    };
    // A proxy, not a wrapper object: lib-dynamodb's paginators check `instanceof DynamoDBDocumentClient`.
    this.client = new Proxy(emulator, {
      get: (target, name) => (name === 'send' ? send : Reflect.get(target, name, target)),
    });
  }

  /** The disagreements since the last call (and forgets them). */
  take(): Disagreement[] {
    return this.#disagreements.splice(0);
  }

  async #both(emulator: DynamoDBDocumentClient, command: { input: unknown }, options: unknown) {
    const mem = await settle(() => this.memory.send(command as never, options as never));
    const real = await settle(() => emulator.send(command as never, options as never));
    this.compared += 1;
    const emulatorOutcome = outcome(real, undefined);
    const memoryOutcome = outcome(mem, real);
    if (!isDeepStrictEqual(emulatorOutcome, memoryOutcome)) {
      this.#disagreements.push({
        command: (command as object).constructor.name,
        input: command.input,
        emulator: emulatorOutcome,
        memory: memoryOutcome,
      });
    }
    if (!real.ok) throw real.error;
    return real.value;
  }
}

type Settled =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: unknown };

async function settle(send: () => Promise<unknown>): Promise<Settled> {
  try {
    return { ok: true, value: await send() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** `answer` normalised; `emulator`: the emulator's answer to the same request, when this is memory's. */
function outcome(answer: Settled, emulator: Settled | undefined): Outcome {
  if (answer.ok) {
    const { $metadata: _m, ...rest } = answer.value as Record<string, unknown>;
    const emulatorReports =
      emulator?.ok === true && (emulator.value as Record<string, unknown>).ConsumedCapacity !== undefined;
    if (emulator !== undefined && !emulatorReports) delete rest.ConsumedCapacity;
    return { ok: rest };
  }
  const e = answer.error as Error & Record<string, unknown>;
  return {
    refused: e.name,
    status: (e.$metadata as { httpStatusCode?: number } | undefined)?.httpStatusCode,
    ...(e.Item ? { Item: e.Item } : {}),
    ...(e.CancellationReasons ? { CancellationReasons: e.CancellationReasons } : {}),
  };
}
