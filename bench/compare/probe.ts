import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { InitializeMiddleware } from '@smithy/types';
import type { AwsClients } from '../../shared/aws/clients.ts';
import { addInitializeMiddleware } from './capacity.ts';

/** One applied effect: the job key and when the write carrying it returned (epoch ms). */
export type EffectSample = readonly [key: string, at: number];

/** Options of an {@link EffectProbe}. */
export interface EffectProbeOptions {
  /** Physical name of the counter table. */
  readonly countersTable: string;
  /** Keys whose first applied effect kills this process (SIGKILL). */
  readonly killKeys: readonly string[];
  /** Folder of the kill markers (shared by every worker of the run: one kill per key, ever). */
  readonly markerDir: string;
  /** This worker process's id (the marker names it). */
  readonly worker: string;
  /** What the marker records (this worker's counters at the moment of the kill). */
  readonly lastWords: () => unknown;
}

/** The kill marker of a key: the worker wrote it, synchronously, just before it SIGKILLed itself. */
export interface KillMarker {
  readonly key: string;
  readonly worker: string;
  readonly at: number;
  readonly effects: readonly EffectSample[];
  /**
   * Other effect writes of this worker still in flight when it died, stamped with their send time: the
   * store may have applied them, but no answer came back to stamp.
   */
  readonly inFlight: readonly EffectSample[];
  readonly state: unknown;
}

function keyOf(key: unknown): string | undefined {
  const id = (key as { id?: unknown } | undefined)?.id;
  if (typeof id === 'string') return id;
  const s = (id as { S?: unknown } | undefined)?.S;
  return typeof s === 'string' ? s : undefined;
}

/** Counter keys a DynamoDB request writes: an UpdateItem of the table, or Updates inside a transaction. */
export function counterKeys(command: string, input: Record<string, unknown>, table: string): string[] {
  if (command === 'UpdateItem' && input.TableName === table) {
    const key = keyOf(input.Key);
    return key ? [key] : [];
  }
  if (command === 'TransactWriteItems') {
    const items =
      (input.TransactItems as { Update?: { TableName?: string; Key?: unknown } }[] | undefined) ?? [];
    return items.flatMap((item) => {
      const key = item.Update?.TableName === table ? keyOf(item.Update.Key) : undefined;
      return key ? [key] : [];
    });
  }
  return [];
}

/** The marker file of a key. */
export function markerPath(dir: string, key: string): string {
  return join(dir, `${key.replace(/[^A-Za-z0-9_.-]/g, '_')}.json`);
}

/**
 * SDK middleware on a worker's DynamoDB client that sees every write that applies a job's effect (the
 * counter update, alone or inside leaseq's commit transaction). It stamps when that write returned, and
 * for a planned kill key it SIGKILLs the process right there: after the effect, before the consumer
 * records completion (Powertools' COMPLETED save, leaseq's message delete, the bare consumer's delete).
 * The marker file written just before makes the kill happen once per key, across worker restarts.
 */
export class EffectProbe {
  readonly #options: EffectProbeOptions;
  readonly #kill: Set<string>;
  #pending: EffectSample[] = [];
  readonly #inFlight = new Set<EffectSample>();

  constructor(options: EffectProbeOptions) {
    this.#options = options;
    this.#kill = new Set(options.killKeys);
    if (this.#kill.size > 0) mkdirSync(options.markerDir, { recursive: true });
  }

  attach(clients: AwsClients): this {
    const middleware =
      <I extends object, O extends object>(): InitializeMiddleware<I, O> =>
      (next, context) =>
      async (args) => {
        const command = String(context.commandName ?? '').replace(/Command$/, '');
        const keys = counterKeys(command, args.input as Record<string, unknown>, this.#options.countersTable);
        if (keys.length === 0) return next(args);
        const sent = keys.map((key): EffectSample => [key, Date.now()]);
        for (const sample of sent) this.#inFlight.add(sample);
        let out: Awaited<ReturnType<typeof next>>;
        try {
          out = await next(args);
        } finally {
          for (const sample of sent) this.#inFlight.delete(sample);
        }
        const at = Date.now();
        for (const key of keys) this.#pending.push([key, at]);
        for (const key of keys) {
          if (!this.#kill.has(key)) continue;
          const marker = markerPath(this.#options.markerDir, key);
          if (existsSync(marker)) continue;
          const content: KillMarker = {
            key,
            worker: this.#options.worker,
            at,
            effects: this.#pending,
            inFlight: [...this.#inFlight],
            state: this.#options.lastWords(),
          };
          writeFileSync(marker, JSON.stringify(content));
          process.kill(process.pid, 'SIGKILL');
          await new Promise(() => {}); // never returns: the signal ends the process
        }
        return out;
      };
    // High priority: outside the capacity meter, so a kill happens after that write's capacity is counted.
    addInitializeMiddleware(clients.ddb.middlewareStack, middleware, {
      priority: 'high',
      name: 'benchEffectProbe',
    });
    return this;
  }

  /** The samples since the last call. */
  drain(): EffectSample[] {
    const out = this.#pending;
    this.#pending = [];
    return out;
  }
}
