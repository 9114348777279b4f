import type { WorkerPool } from '../shared/runner/worker-pool.ts';
import { repeatRandomly } from './timing.ts';

/** One worker process that died during the run. */
export interface Death {
  readonly worker: string;
  readonly at: number;
  /** `kill`: the harness SIGKILLed it; `crash`: it died on its own (a crashing test job, an error). */
  readonly cause: 'kill' | 'crash';
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

  /** Records a worker's exit (called from the pool's exit event). */
  exited(worker: string, signal: string): void {
    this.deaths.push({ worker, at: Date.now(), cause: this.#killed.has(worker) ? 'kill' : 'crash', signal });
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
