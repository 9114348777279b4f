import { between, repeatRandomly, sleep, type Window } from './timing.ts';

/**
 * Freezes the emulator with SIGSTOP (its whole process group) for a few seconds, then SIGCONT, after
 * every random gap. Every client, workers and harness alike, then sees a store that does not answer.
 */
export class EmulatorPauser {
  readonly windows: Window[] = [];
  readonly #pid: number;
  #stopped = false;

  constructor(pid: number) {
    this.#pid = pid;
    // Never leave the emulator frozen, whatever ends this process.
    process.once('exit', () => this.resume());
  }

  async run(
    signal: AbortSignal,
    random: () => number,
    idleMs: readonly [number, number],
    pauseMs: readonly [number, number],
    log: (line: string) => void,
  ): Promise<void> {
    await repeatRandomly(
      signal,
      random,
      idleMs,
      async () => {
        const ms = between(random, pauseMs[0], pauseMs[1]);
        const window: Window = { kind: 'pause', start: Date.now() };
        this.windows.push(window);
        this.#signal('SIGSTOP');
        this.#stopped = true;
        log(`emulator paused (SIGSTOP pid ${this.#pid}) for ${(ms / 1000).toFixed(1)} s`);
        try {
          await sleep(ms);
        } finally {
          this.resume();
          window.end = Date.now();
          log('emulator resumed (SIGCONT)');
        }
      },
      (error) => log(`pause failed: ${String(error)}`),
    );
  }

  resume(): void {
    if (!this.#stopped) return;
    this.#signal('SIGCONT');
    this.#stopped = false;
  }

  #signal(signal: NodeJS.Signals): void {
    // The emulator leads its own process group (shared/local/state.ts); signal the group, else the pid.
    try {
      process.kill(-this.#pid, signal);
    } catch {
      process.kill(this.#pid, signal);
    }
  }
}
