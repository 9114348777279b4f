import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EffectSample, KillMarker } from './probe.ts';
import {
  type RunAssignment,
  WORKER_ID_ENV,
  type WorkerCommand,
  type WorkerReport,
  type WorkerState,
} from './protocol.ts';

const ENTRY = fileURLToPath(new URL('./worker.ts', import.meta.url));
/** Unplanned worker exits a run tolerates before it stops restarting them. */
const MAX_UNPLANNED_DEATHS = 3;

/** A worker process that ended during a run. */
export interface Death {
  readonly worker: string;
  readonly at: number;
  readonly signal: string;
  /** It killed itself at a planned kill key (the kill scenario). */
  readonly planned: boolean;
  readonly key?: string;
}

interface Proc {
  readonly id: string;
  readonly child: ChildProcess;
  ready: boolean;
  run: string | undefined;
}

/** Messages a worker deleted, when, and the job key of each (same order) when the worker knows it. */
export type OnFinished = (
  messageIds: readonly string[],
  at: number,
  keys?: readonly (string | undefined)[],
) => void;

/** One run being served by some of the fleet's processes. */
export class ActiveRun {
  readonly assignment: RunAssignment;
  readonly effects: EffectSample[] = [];
  readonly deaths: Death[] = [];
  /** Why the run gave up restarting workers (they kept dying unplanned). */
  failure: string | undefined;
  readonly participants = new Set<string>();
  readonly started = new Set<string>();
  readonly done = new Set<string>();
  readonly #states = new Map<string, WorkerState>();
  readonly onFinished: OnFinished;
  stopping = false;
  #changed: (() => void) | undefined;

  constructor(assignment: RunAssignment, onFinished: OnFinished) {
    this.assignment = assignment;
    this.onFinished = onFinished;
  }

  /** Every worker's last counters (killed ones from their marker). */
  get states(): readonly WorkerState[] {
    return [...this.#states.values()];
  }

  report(report: WorkerReport): void {
    if (report.type === 'started') this.started.add(report.id);
    if (report.type === 'batch' || report.type === 'done') {
      this.onFinished(report.finished, Date.now(), report.finishedKeys);
      this.effects.push(...report.effects);
      this.#states.set(report.id, report.state);
      if (report.type === 'done') this.done.add(report.id);
    }
    this.#changed?.();
  }

  died(death: Death, marker: KillMarker | undefined): void {
    if (marker) {
      // Effect writes cut off by the kill count at their send time: a lower bound of when the effect
      // landed (if this write did not apply, a retry did later), the same for every consumer.
      this.effects.push(...marker.effects, ...(marker.inFlight ?? []));
      this.#states.set(death.worker, marker.state as WorkerState);
    }
    this.deaths.push(death);
    this.participants.delete(death.worker);
    this.#changed?.();
  }

  /** Resolves when `test` holds (checked on every report and death). */
  async until(test: () => boolean): Promise<void> {
    while (!test()) {
      await new Promise<void>((resolve) => {
        this.#changed = resolve;
        setTimeout(resolve, 500);
      });
    }
  }
}

/**
 * The benchmark's worker processes, started once and kept across runs (starting one costs seconds of
 * module loading). A run takes `count` idle processes; one that dies during the run (a planned SIGKILL,
 * or a crash) is replaced by a fresh process that joins the run. State of a killed worker comes from the
 * marker it wrote just before it died.
 */
export class Fleet {
  readonly #logDir: string;
  readonly #procs = new Map<string, Proc>();
  #next = 1;
  #active: ActiveRun | undefined;
  #closing = false;
  /** Processes started in all. */
  spawned = 0;

  constructor(logDir: string) {
    this.#logDir = logDir;
    mkdirSync(logDir, { recursive: true });
  }

  /** Starts processes until `count` are alive; resolves once they are loaded. */
  async ensure(count: number): Promise<void> {
    const missing = count - this.#procs.size;
    await Promise.all(Array.from({ length: Math.max(0, missing) }, () => this.#spawn()));
  }

  /** Hands the run to `count` idle processes; resolves once they poll. */
  async begin(assignment: RunAssignment, count: number, onFinished: OnFinished): Promise<ActiveRun> {
    if (this.#active) throw new Error('a run is already active');
    await this.ensure(count);
    const run = new ActiveRun(assignment, onFinished);
    this.#active = run;
    const idle = [...this.#procs.values()].filter((p) => p.ready && p.run === undefined).slice(0, count);
    for (const proc of idle) this.#assign(proc, run);
    await run.until(
      () => [...run.participants].every((id) => run.started.has(id)) || run.failure !== undefined,
    );
    return run;
  }

  /** Stops the run: every participant finishes its batch in flight and reports `done`. */
  async end(run: ActiveRun, graceMs = 30_000): Promise<void> {
    run.stopping = true;
    for (const id of run.participants) this.#command(id, { type: 'stop', run: run.assignment.run });
    const deadline = Date.now() + graceMs;
    await run.until(() => [...run.participants].every((id) => run.done.has(id)) || Date.now() > deadline);
    for (const id of run.participants) {
      const proc = this.#procs.get(id);
      if (!proc) continue;
      if (run.done.has(id)) proc.run = undefined;
      else proc.child.kill('SIGKILL'); // never finished its batch: not reusable
    }
    this.#active = undefined;
  }

  /** Stops every process. */
  async close(): Promise<void> {
    this.#closing = true;
    const closed = [...this.#procs.values()].map(
      (p) => new Promise<void>((resolve) => p.child.once('close', () => resolve())),
    );
    for (const p of this.#procs.values()) p.child.kill('SIGTERM');
    const timer = setTimeout(() => {
      for (const p of this.#procs.values()) p.child.kill('SIGKILL');
    }, 10_000);
    await Promise.all(closed);
    clearTimeout(timer);
  }

  #assign(proc: Proc, run: ActiveRun): void {
    proc.run = run.assignment.run;
    run.participants.add(proc.id);
    this.#command(proc.id, { type: 'run', assignment: run.assignment });
  }

  #command(id: string, command: WorkerCommand): void {
    const child = this.#procs.get(id)?.child;
    if (child?.connected) child.send(command);
  }

  #spawn(): Promise<Proc> {
    const id = `w${this.#next++}`;
    this.spawned += 1;
    const fd = openSync(join(this.#logDir, `${id}.log`), 'a');
    const child = fork(ENTRY, [], {
      env: { ...process.env, [WORKER_ID_ENV]: id },
      execArgv: ['--import', import.meta.resolve('tsx')],
      stdio: ['ignore', fd, fd, 'ipc'],
      // Its own process group: a Ctrl-C reaches the parent only, which stops the runs cleanly. The worker
      // still ends with the parent (its IPC channel closes).
      detached: true,
    });
    const proc: Proc = { id, child, ready: false, run: undefined };
    this.#procs.set(id, proc);
    return new Promise((resolve) => {
      child.on('message', (report: WorkerReport) => {
        if (report.type === 'ready') {
          proc.ready = true;
          resolve(proc);
          return;
        }
        const run = this.#active;
        if (run && 'run' in report && report.run === run.assignment.run) run.report(report);
      });
      child.on('close', (code, signal) => {
        this.#procs.delete(id);
        resolve(proc);
        const run = this.#active;
        if (this.#closing || !run || proc.run !== run.assignment.run) return;
        const marker = markerOf(run.assignment.markerDir, id);
        run.died(
          {
            worker: id,
            at: Date.now(),
            signal: signal ?? `exit ${code}`,
            planned: marker !== undefined,
            ...(marker ? { key: marker.key } : {}),
          },
          marker,
        );
        if (run.stopping) return;
        const unplanned = run.deaths.filter((d) => !d.planned).length;
        if (unplanned > MAX_UNPLANNED_DEATHS) {
          run.failure = `worker processes keep dying (${unplanned} unplanned exits; logs in ${this.#logDir})`;
          return;
        }
        // The replacement joins the run as soon as it is loaded (a new Lambda instance, cold).
        void this.#spawn().then((fresh) => {
          if (this.#active === run && !run.stopping && this.#procs.has(fresh.id)) this.#assign(fresh, run);
        });
      });
    });
  }
}

/** The kill marker a dead worker process left in a run's marker folder, if any. */
function markerOf(dir: string, worker: string): KillMarker | undefined {
  if (!existsSync(dir)) return undefined;
  for (const file of readdirSync(dir)) {
    try {
      const marker = JSON.parse(readFileSync(join(dir, file), 'utf8')) as KillMarker;
      if (marker.worker === worker) return marker;
    } catch {
      // A marker half written when the process died: the kill still happened.
    }
  }
  return undefined;
}
