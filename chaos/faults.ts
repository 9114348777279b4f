import { writeFileSync } from 'node:fs';
import { between, repeatRandomly, sleep, type Window } from './timing.ts';
import type { Toxic, ToxiproxyFront } from './toxiproxy.ts';
import type { SdkFaultControl } from './worker-faults.ts';

/** Fault kinds: network faults through Toxiproxy, and SDK middleware faults inside the workers. */
export type FaultKind = 'latency' | 'reset' | 'timeout' | 'cut-answer' | 'throttle' | 'lost-answer';

export interface FaultSchedulerOptions {
  readonly proxy: ToxiproxyFront | undefined;
  /** The control file the workers' SDK middleware reads (chaos/worker-faults.ts). */
  readonly controlFile: string;
  readonly leaseMs: number;
  readonly random: () => number;
  /** Quiet gap between two faults. */
  readonly idleMs: readonly [number, number];
  /** How long one fault stays on. */
  readonly activeMs: readonly [number, number];
  readonly log: (line: string) => void;
}

/**
 * Switches one store fault at a time on and off at random between the workers and the store, logs each
 * switch and keeps the windows (for the report, and to tell aborts caused by a fault from the others).
 */
export class FaultScheduler {
  readonly windows: Window[] = [];
  readonly kinds: readonly FaultKind[];
  readonly #o: FaultSchedulerOptions;
  readonly #deck: FaultKind[] = [];

  constructor(options: FaultSchedulerOptions) {
    this.#o = options;
    const network: FaultKind[] = options.proxy ? ['latency', 'reset', 'timeout', 'cut-answer'] : [];
    this.kinds = [...network, 'throttle', 'lost-answer'];
    this.#control({});
  }

  /** Faults switched on so far, per kind. */
  counts(): Record<string, number> {
    const counts: Record<string, number> = Object.fromEntries(this.kinds.map((k) => [k, 0]));
    for (const w of this.windows) counts[w.kind] = (counts[w.kind] ?? 0) + 1;
    return counts;
  }

  /** Runs until `signal` aborts, then switches everything off. */
  async run(signal: AbortSignal): Promise<void> {
    await repeatRandomly(
      signal,
      this.#o.random,
      this.#o.idleMs,
      async () => {
        const kind = this.#nextKind();
        const window: Window = { kind, start: Date.now() };
        this.windows.push(window);
        const detail = await this.#on(kind);
        this.#o.log(`fault on: ${kind} (${detail})`);
        try {
          await sleep(between(this.#o.random, this.#o.activeMs[0], this.#o.activeMs[1]), signal);
        } finally {
          await this.#off(kind);
          window.end = Date.now();
          this.#o.log(`fault off: ${kind} after ${((window.end - window.start) / 1000).toFixed(1)} s`);
        }
      },
      (error) =>
        this.#o.log(`fault switch failed: ${error instanceof Error ? error.message : String(error)}`),
    );
    await this.clear();
  }

  /** The next kind from a shuffled deck of every kind, so a short run still sees each one. */
  #nextKind(): FaultKind {
    if (this.#deck.length === 0) {
      this.#deck.push(...this.kinds);
      for (let i = this.#deck.length - 1; i > 0; i--) {
        const j = Math.floor(this.#o.random() * (i + 1));
        [this.#deck[i], this.#deck[j]] = [this.#deck[j] as FaultKind, this.#deck[i] as FaultKind];
      }
    }
    return this.#deck.pop() as FaultKind;
  }

  /** Switches every fault off (also after an error). */
  async clear(): Promise<void> {
    this.#control({});
    await this.#o.proxy?.clear().catch(() => undefined);
  }

  async #on(kind: FaultKind): Promise<string> {
    const toxic = this.#toxic(kind);
    if (toxic) {
      await this.#o.proxy?.add(toxic);
      return `toxiproxy ${toxic.type} ${toxic.stream} ${JSON.stringify(toxic.attributes)}`;
    }
    const control: SdkFaultControl = kind === 'throttle' ? { throttle: 0.5 } : { lostAnswer: 0.3 };
    this.#control(control);
    return `sdk middleware ${JSON.stringify(control)}`;
  }

  async #off(kind: FaultKind): Promise<void> {
    if (this.#toxic(kind)) await this.#o.proxy?.remove(kind);
    else this.#control({});
  }

  /** The Toxiproxy toxic of a network fault kind; undefined for the SDK kinds. */
  #toxic(kind: FaultKind): Toxic | undefined {
    switch (kind) {
      case 'latency':
        // Past the lease: renewals arrive late, so another worker takes the job over.
        return {
          name: kind,
          type: 'latency',
          stream: 'downstream',
          attributes: { latency: this.#o.leaseMs + 1000, jitter: 500 },
        };
      case 'reset':
        return { name: kind, type: 'reset_peer', stream: 'upstream', attributes: { timeout: 0 } };
      case 'timeout':
        return { name: kind, type: 'timeout', stream: 'upstream', attributes: { timeout: 1000 } };
      case 'cut-answer':
        // The request reaches the store whole; its answer is cut off (a write applied, its answer lost).
        return { name: kind, type: 'limit_data', stream: 'downstream', attributes: { bytes: 64 } };
      default:
        return undefined;
    }
  }

  #control(control: SdkFaultControl): void {
    writeFileSync(this.#o.controlFile, JSON.stringify(control));
  }
}
