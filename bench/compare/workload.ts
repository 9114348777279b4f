import type { DuplicateTiming } from './scenarios.ts';

/** One message to send: a job's key and which copy of it (0 is the original). */
export interface PlannedMessage {
  readonly key: string;
  readonly copy: number;
}

/** What one run sends (pure data; bench/compare/producer.ts sends it). */
export interface Workload {
  /** The unique jobs, in send order of their originals. */
  readonly keys: readonly string[];
  /** Messages in all, duplicates included. */
  readonly messages: number;
  /**
   * Waves of one or two chunks of at most 10 messages each (one SendMessageBatch per chunk, the chunks of
   * a wave sent at the same time), in order. A racing duplicate sits in its original's chunk (same batch)
   * or in the other chunk of the wave (parallel batches).
   */
  readonly waves: readonly (readonly (readonly PlannedMessage[])[])[];
  /** Duplicates sent once their original's message is done, by key: how many copies. */
  readonly afterDone: ReadonlyMap<string, number>;
  /** Keys whose first effect kills its worker (the kill scenario). */
  readonly killKeys: readonly string[];
}

/** Inputs of {@link planWorkload}. */
export interface WorkloadSpec {
  /** Prefix of every key, unique per run. */
  readonly tag: string;
  readonly messages: number;
  /** Share of the messages that are duplicates (0-0.5: at most one copy per job). */
  readonly duplicates: number;
  readonly timing: DuplicateTiming;
  /** Planned kills (0 for none). */
  readonly kills: number;
}

/** Messages per SendMessageBatch (the SQS maximum). */
export const CHUNK = 10;

/** Evenly spread indices: `count` of `0..total-1`. */
function spreadIndices(count: number, total: number): number[] {
  return Array.from({ length: count }, (_, j) =>
    Math.min(total - 1, Math.floor(((j + 0.5) * total) / count)),
  );
}

/**
 * Plans a run's messages: `messages x (1 - duplicates)` unique jobs, the rest one duplicate each of
 * evenly spread jobs; racing duplicates alternate between the original's batch and the parallel one.
 * Kill keys are spread evenly over the jobs that have no duplicate.
 */
export function planWorkload(spec: WorkloadSpec): Workload {
  if (!(spec.duplicates >= 0 && spec.duplicates <= 0.5)) {
    throw new RangeError(`duplicates must be from 0 to 0.5, received ${spec.duplicates}`);
  }
  const unique = Math.round(spec.messages * (1 - spec.duplicates));
  const dupCount = spec.messages - unique;
  const keys = Array.from({ length: unique }, (_, i) => `${spec.tag}-${i}`);
  const dupIndices = new Set(spreadIndices(dupCount, unique));
  const afterDone = new Map<string, number>();
  const raceMode = new Map<number, 'same' | 'parallel'>();
  [...dupIndices]
    .sort((a, b) => a - b)
    .forEach((index, j) => {
      if (spec.timing === 'race') raceMode.set(index, j % 2 === 0 ? 'same' : 'parallel');
      else afterDone.set(keys[index] as string, 1);
    });

  const waves: PlannedMessage[][][] = [];
  let a: PlannedMessage[] = [];
  let b: PlannedMessage[] = [];
  const flush = () => {
    const wave = [a, b].filter((chunk) => chunk.length > 0);
    if (wave.length > 0) waves.push(wave);
    a = [];
    b = [];
  };
  keys.forEach((key, index) => {
    const original = { key, copy: 0 };
    const mode = raceMode.get(index);
    if (mode === 'same') {
      if (CHUNK - a.length < 2) {
        if (CHUNK - b.length >= 2) {
          b.push(original, { key, copy: 1 });
          return;
        }
        flush();
      }
      a.push(original, { key, copy: 1 });
    } else if (mode === 'parallel') {
      if (a.length >= CHUNK || b.length >= CHUNK) flush();
      a.push(original);
      b.push({ key, copy: 1 });
    } else {
      if (a.length >= CHUNK && b.length >= CHUNK) flush();
      (a.length < CHUNK ? a : b).push(original);
    }
  });
  flush();

  const plain = keys.filter((_, i) => !dupIndices.has(i));
  const killKeys =
    spec.kills > 0 && plain.length > 0
      ? [
          ...new Set(
            spreadIndices(Math.min(spec.kills, plain.length), plain.length).map((i) => plain[i] as string),
          ),
        ]
      : [];
  return { keys, messages: spec.messages, waves, afterDone, killKeys };
}
