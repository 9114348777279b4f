import { type ChildProcess, fork } from 'node:child_process';
import { EventEmitter } from 'node:events';
import {
  chmodSync,
  closeSync,
  fchmodSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { endpointText } from '../aws/endpoint-text.ts';
import { mergeSummaries, type Summary } from '../core/observe/metrics.ts';
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
  /** The queue the workers work on, written into the metrics file so `leaseq status` of another queue skips it. */
  readonly metricsTarget?: PoolTarget;
  /**
   * Dead workers kept one by one (for the closing table and `leaseq status`); older ones are folded into
   * {@link WorkerPool.retired}, so a long crash loop costs bounded memory. @default 16
   */
  readonly keepDead?: number;
}

/** What the pool keeps of the dead workers it no longer lists: how many, and their summed last reports. */
export interface RetiredWorkers {
  workers: number;
  counters: Record<string, number>;
  observations: Record<string, Summary>;
}

/** The deployment a pool works on: its queue, and the endpoint (`null` for AWS) it was reached at. */
export interface PoolTarget {
  readonly endpoint: string | null;
  readonly queueArn: string;
}

/** What a pool's metrics file holds. */
export interface PoolMetricsFile {
  readonly pid: number;
  readonly updatedAt: number;
  /** Absent in files of pools that did not say (tests, older versions): shown for no target. */
  readonly target?: PoolTarget;
  readonly workers: readonly {
    readonly id: string;
    readonly alive: boolean;
    readonly counters: Record<string, number>;
    readonly observations: Record<string, Summary>;
  }[];
}

export interface WorkerInfo {
  readonly id: string;
  /** Undefined when the process could not be started. */
  pid: number | undefined;
  readonly logFile: string;
  alive: boolean;
  /** It said it was polling (false for a worker that died while starting). */
  ready: boolean;
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
  /** Why the process could not be started (a log it cannot open, EMFILE, EAGAIN); it never ran. */
  startError?: string;
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
  /** Live workers, and the latest dead ones (up to `keepDead`), in start order. */
  readonly workers = new Map<string, WorkerInfo>();
  readonly retired: RetiredWorkers = { workers: 0, counters: {}, observations: {} };
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

  /** Workers started so far (live, dead and retired). */
  get started(): number {
    return this.#next - 1;
  }

  /**
   * Starts one more worker; resolves when it is polling, or once it has died. Never throws: a worker
   * that cannot be started (EMFILE, EAGAIN, an unwritable log) is reported as an `error` and an `exit`
   * with `startError`, as a worker that died at once would be.
   */
  spawn(): Promise<WorkerInfo> {
    const id = `${this.#options.idPrefix ?? 'w'}${this.#next++}`;
    const logFile = join(this.#options.logDir, `${id}.log`);
    const info: WorkerInfo = {
      id,
      pid: undefined,
      logFile,
      alive: true,
      ready: false,
      exitCode: null,
      exitSignal: null,
      counters: {},
      observations: {},
    };
    this.workers.set(id, info);
    let child: ChildProcess;
    let fd: number | undefined;
    try {
      fd = openSync(logFile, 'a', 0o600);
      fchmodSync(fd, 0o600);
      child = fork(ENTRY, [], {
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
    } catch (error) {
      return Promise.resolve(this.#notStarted(info, error));
    } finally {
      // The child has its own copy of the log descriptor; the parent's would stay open for the life of
      // the command, one per worker ever started.
      if (fd !== undefined) closeSync(fd);
    }
    info.pid = child.pid;
    this.#children.set(id, child);
    return new Promise((resolve) => {
      child.on('message', (message: WorkerMessage) => {
        if (message.type === 'metrics') {
          info.counters = message.counters;
          info.observations = message.observations ?? {};
        } else if (message.type === 'ready') {
          info.ready = true;
          resolve(info);
        } else if (message.type === 'error') this.#report(id, message.message);
      });
      // Without a listener, a failed spawn (EMFILE, EAGAIN: no pid, no 'exit') or a failed IPC send
      // is an uncaught exception that ends the command.
      child.on('error', (error) => {
        if (child.pid === undefined && info.alive) {
          this.#children.delete(id);
          resolve(this.#notStarted(info, error));
        } else this.#report(id, error.message);
      });
      child.on('exit', (code, signal) => {
        info.alive = false;
        info.exitCode = code;
        info.exitSignal = signal;
        this.#children.delete(id);
        this.#retireOld();
        this.emit('exit', info);
        resolve(info);
      });
    });
  }

  #notStarted(info: WorkerInfo, error: unknown): WorkerInfo {
    info.alive = false;
    info.startError = error instanceof Error ? error.message : String(error);
    this.#report(info.id, `could not start the worker: ${info.startError}`);
    this.#retireOld();
    // After spawn() has returned, as a real exit comes, so a listener that spawns again does not recurse.
    process.nextTick(() => this.emit('exit', info));
    return info;
  }

  #report(id: string, message: string): void {
    // EventEmitter throws an 'error' nobody listens to.
    if (this.listenerCount('error') > 0) this.emit('error', id, message);
  }

  /** Folds the oldest dead workers beyond `keepDead` into {@link retired}. */
  #retireOld(): void {
    const keep = this.#options.keepDead ?? 16;
    const dead = [...this.workers.values()].filter((w) => !w.alive);
    for (const w of dead.slice(0, Math.max(0, dead.length - keep))) {
      this.workers.delete(w.id);
      this.retired.workers += 1;
      for (const [name, n] of Object.entries(w.counters)) {
        this.retired.counters[name] = (this.retired.counters[name] ?? 0) + n;
      }
      for (const [key, summary] of Object.entries(w.observations)) {
        const had = this.retired.observations[key];
        this.retired.observations[key] = had ? mergeSummaries([had, summary]) : summary;
      }
    }
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
    let n = this.retired.counters[counter] ?? 0;
    for (const w of this.workers.values()) n += w.counters[counter] ?? 0;
    return n;
  }

  /** Observations of one summary (a `metricKey`) over all workers (dead ones keep their last report). */
  observed(key: string): number {
    let n = this.retired.observations[key]?.count ?? 0;
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
    // A user and password in the endpoint stay out of the file (readers compare the origin only).
    const target = this.#options.metricsTarget;
    const content: PoolMetricsFile = {
      pid: process.pid,
      updatedAt: Date.now(),
      ...(target
        ? { target: { ...target, endpoint: target.endpoint && endpointText(target.endpoint) } }
        : {}),
      workers: [
        ...(this.retired.workers > 0
          ? [
              {
                id: `${this.retired.workers} earlier workers`,
                alive: false,
                counters: this.retired.counters,
                observations: this.retired.observations,
              },
            ]
          : []),
        ...[...this.workers.values()].map((w) => ({
          id: w.id,
          alive: w.alive,
          counters: w.counters,
          observations: w.observations,
        })),
      ],
    };
    try {
      writeFileSync(`${file}.tmp`, JSON.stringify(content));
      renameSync(`${file}.tmp`, file);
    } catch {
      // A status reader misses one update; the next one comes in 2 s.
    }
  }
}
