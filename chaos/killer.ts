import type { WorkerPool } from '../shared/runner/worker-pool.ts';
import { repeatRandomly } from './timing.ts';

/** One worker process that died during the run. */
export interface Death {
  readonly worker: string;
  readonly at: number;
  /**
   * `kill`: the harness SIGKILLed it; `crash`: it SIGKILLed itself (a crashing test job); `exit`: it
   * exited on its own with an error (e.g. its start-up call to the queue failed under a fault).
   */
  readonly cause: 'kill' | 'crash' | 'exit';
  readonly signal: string;
}

/**
 * SIGKILLs a random live worker after every random gap. The pool's exit handler (in run.ts) starts the
 * replacement; this only records who was killed when.
 */
export class Killer {
  readonly deaths: Death[] = [];
  readonly #pool: WorkerPool;
  readonly #killed = new Set<string>();

  constructor(pool: WorkerPool) {
    this.#pool = pool;
  }

  get kills(): number {
    return this.deaths.filter((d) => d.cause === 'kill').length;
  }

  get crashes(): number {
    return this.deaths.filter((d) => d.cause === 'crash').length;
  }

  get exits(): number {
    return this.deaths.filter((d) => d.cause === 'exit').length;
  }

  /** Records a worker's exit (called from the pool's exit event). */
  exited(worker: string, signal: string): void {
    const cause = this.#killed.has(worker) ? 'kill' : signal === 'SIGKILL' ? 'crash' : 'exit';
    this.deaths.push({ worker, at: Date.now(), cause, signal });
  }

  async run(
    signal: AbortSignal,
    random: () => number,
    idleMs: readonly [number, number],
    log: (line: string) => void,
  ): Promise<void> {
    await repeatRandomly(
      signal,
      random,
      idleMs,
      async () => {
        const live = [...this.#pool.workers.values()].filter((w) => w.alive && w.ready);
        const victim = live[Math.floor(random() * live.length)];
        if (!victim) return;
        this.#killed.add(victim.id);
        this.#pool.kill(victim.id);
        log(`killed worker ${victim.id} (pid ${victim.pid}) with SIGKILL`);
      },
      (error) => log(`kill failed: ${String(error)}`),
    );
  }
}
