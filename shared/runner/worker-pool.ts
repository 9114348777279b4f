import { type ChildProcess, fork } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { chmodSync, fchmodSync, mkdirSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Summary } from '../core/observe/metrics.ts';
import { JOBS_MODULE_ENV } from '../jobs/job-module.ts';
import { isInstalled } from '../optional-package.ts';
import { WORKER_ENV } from '../resources.ts';
import { siblingModule } from '../sibling-module.ts';
import { INVOCATION_TIMEOUT_ENV, type WorkerMessage } from './worker-ipc.ts';

export interface WorkerPoolOptions {
  /** Worker processes to start. */
  readonly count: number;
  /** Environment for every worker (names of queues and tables, endpoint, settings). */
  readonly env: Readonly<Record<string, string>>;
  /** The job module the workers run (absolute path). */
  readonly jobsModule: string;
  /**
   * How long one local invocation may run, as the Lambda timeout bounds a real one: every lease ends
   * before it (less `LEASEQ_DEADLINE_MARGIN_MS`). @default DEFAULT_WORKER_TIMEOUT_SECONDS (60 s)
   */
  readonly invocationTimeoutMs?: number;
  /** Folder for one log file per worker (`<id>.log`). */
  readonly logDir: string;
  /** Worker ids are `<idPrefix><n>`. @default 'w' */
  readonly idPrefix?: string;
  /**
   * A file the pool keeps its workers' metrics in (every 2 s, removed on stop), for `leaseq status`.
   * @default none
   */
  readonly metricsFile?: string;
}

/** What a pool's metrics file holds. */
export interface PoolMetricsFile {
  readonly pid: number;
  readonly updatedAt: number;
  readonly workers: readonly {
    readonly id: string;
    readonly alive: boolean;
    readonly counters: Record<string, number>;
    readonly observations: Record<string, Summary>;
  }[];
}

export interface WorkerInfo {
  readonly id: string;
  readonly pid: number | undefined;
  readonly logFile: string;
  alive: boolean;
  /** It said it was polling (false for a worker that died while starting). */
  ready: boolean;
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
  counters: Record<string, number>;
  observations: Record<string, Summary>;
}

interface PoolEvents {
  exit: [WorkerInfo];
  error: [string, string];
}

// The TypeScript source in a checkout, the compiled file in an installed package.
const ENTRY = siblingModule(import.meta.url, 'worker-process');
/**
 * Workers load TypeScript (the sources, a `.ts` job module) through tsx when it is installed; without it
 * (an optional peer) they run the compiled package and JavaScript job modules.
 */
const TSX_HOOK = isInstalled('tsx') ? ['--import', import.meta.resolve('tsx')] : [];

/**
 * Local worker processes, each running the Lambda handler under the local event-source loop, with its
 * own id. `stop()` drains them (SIGTERM, then SIGKILL after a grace period); `kill(id)` SIGKILLs one
 * at once, which the protocol must survive (its leases expire and another worker takes over).
 */
export class WorkerPool extends EventEmitter<PoolEvents> {
  readonly #options: WorkerPoolOptions;
  readonly #children = new Map<string, ChildProcess>();
  readonly workers = new Map<string, WorkerInfo>();
  #next = 1;
  #metricsTimer: NodeJS.Timeout | undefined;

  constructor(options: WorkerPoolOptions) {
    super();
    if (!(Number.isInteger(options.count) && options.count >= 1 && options.count <= 64)) {
      throw new RangeError(`worker count must be an integer from 1 to 64, received ${options.count}`);
    }
    this.#options = options;
  }

  /** Starts the workers; resolves once each has said it is ready (or died trying). */
  async start(): Promise<void> {
    // Worker logs hold error text (failed jobs, stack traces): owner-only, folder 0700 and files 0600.
    // `mode` applies only to what is created now, so an existing folder or file is narrowed too.
    mkdirSync(this.#options.logDir, { recursive: true, mode: 0o700 });
    chmodSync(this.#options.logDir, 0o700);
    if (this.#options.metricsFile) {
      mkdirSync(dirname(this.#options.metricsFile), { recursive: true });
      this.#metricsTimer = setInterval(() => this.#writeMetrics(), 2000);
      this.#metricsTimer.unref();
    }
    await Promise.all(Array.from({ length: this.#options.count }, () => this.spawn()));
  }

  /** Starts one more worker; resolves when it is polling. */
  spawn(): Promise<WorkerInfo> {
    const id = `${this.#options.idPrefix ?? 'w'}${this.#next++}`;
    const logFile = join(this.#options.logDir, `${id}.log`);
    const fd = openSync(logFile, 'a', 0o600);
    fchmodSync(fd, 0o600);
    const child = fork(ENTRY, [], {
      env: {
        ...process.env,
        ...this.#options.env,
        [JOBS_MODULE_ENV]: this.#options.jobsModule,
        ...(this.#options.invocationTimeoutMs
          ? { [INVOCATION_TIMEOUT_ENV]: String(this.#options.invocationTimeoutMs) }
          : {}),
        [WORKER_ENV.workerId]: id,
      },
      execArgv: TSX_HOOK,
      stdio: ['ignore', fd, fd, 'ipc'],
    });
    const info: WorkerInfo = {
      id,
      pid: child.pid,
      logFile,
      alive: true,
      ready: false,
      exitCode: null,
      exitSignal: null,
      counters: {},
      observations: {},
    };
    this.workers.set(id, info);
    this.#children.set(id, child);
    return new Promise((resolve) => {
      child.on('message', (message: WorkerMessage) => {
        if (message.type === 'metrics') {
          info.counters = message.counters;
          info.observations = message.observations ?? {};
        } else if (message.type === 'ready') {
          info.ready = true;
          resolve(info);
        } else if (message.type === 'error') this.emit('error', id, message.message);
      });
      child.on('exit', (code, signal) => {
        info.alive = false;
        info.exitCode = code;
        info.exitSignal = signal;
        this.#children.delete(id);
        this.emit('exit', info);
        resolve(info);
      });
    });
  }

  /** SIGKILLs one worker now (a crash). */
  kill(id: string): void {
    this.#children.get(id)?.kill('SIGKILL');
  }

  /** SIGKILLs every worker now (a second Ctrl-C): a {@link stop} under way then returns at once. */
  killAll(): void {
    for (const child of this.#children.values()) child.kill('SIGKILL');
  }

  /** Sum of one counter over all workers (dead ones keep their last report). */
  total(counter: string): number {
    let n = 0;
    for (const w of this.workers.values()) n += w.counters[counter] ?? 0;
    return n;
  }

  /** Observations of one summary (a `metricKey`) over all workers (dead ones keep their last report). */
  observed(key: string): number {
    let n = 0;
    for (const w of this.workers.values()) n += w.observations[key]?.count ?? 0;
    return n;
  }

  get alive(): number {
    return [...this.workers.values()].filter((w) => w.alive).length;
  }

  /**
   * Drains every worker, also one still starting: SIGTERM, then SIGKILL for any still running after
   * `graceMs`. A worker stops polling at once and its batch in flight ends by the invocation deadline,
   * so a `graceMs` above the invocation timeout lets every job finish or be given back.
   */
  async stop(graceMs = 15_000): Promise<void> {
    const running = [...this.#children.entries()];
    const exited = running.map(
      ([, child]) =>
        new Promise<void>((resolve) =>
          child.exitCode !== null || child.signalCode !== null
            ? resolve()
            : child.once('exit', () => resolve()),
        ),
    );
    for (const [, child] of running) child.kill('SIGTERM');
    const timer = setTimeout(() => {
      for (const [, child] of running) child.kill('SIGKILL');
    }, graceMs);
    timer.unref();
    await Promise.all(exited);
    clearTimeout(timer);
    if (this.#metricsTimer) clearInterval(this.#metricsTimer);
    if (this.#options.metricsFile) rmSync(this.#options.metricsFile, { force: true });
  }

  #writeMetrics(): void {
    const file = this.#options.metricsFile;
    if (!file) return;
    const content: PoolMetricsFile = {
      pid: process.pid,
      updatedAt: Date.now(),
      workers: [...this.workers.values()].map((w) => ({
        id: w.id,
        alive: w.alive,
        counters: w.counters,
        observations: w.observations,
      })),
    };
    try {
      writeFileSync(`${file}.tmp`, JSON.stringify(content));
      renameSync(`${file}.tmp`, file);
    } catch {
      // A status reader misses one update; the next one comes in 2 s.
    }
  }
}
