/**
 * The inspector's bulk actions while they run (routes/bulk-cancel.ts, routes/bulk-redrive.ts): a preview
 * kept under a random id until its confirmation (so the action takes exactly the jobs the page showed),
 * and each confirmed run in the background with its progress, its stop and its result, read by a page
 * that refreshes itself. In memory: a restart of `leaseq ui` forgets them (a run in flight stops with it).
 */
import { randomBytes } from 'node:crypto';

/** How long a preview can be confirmed: past it, the page asks for a fresh one. @default 15 minutes */
export const PREVIEW_TTL_MS = 15 * 60_000;
/** Previews and runs kept at most (the oldest finished go first). */
const KEEP = 20;

/** One confirmed run: what it did so far, and its end. */
export interface BulkRun<R> {
  readonly id: string;
  /** What it acts on, as its page titles it (`cancel of 10 jobs`). */
  readonly title: string;
  /** Who started it (the inspector's actor). */
  readonly by: string;
  readonly startedAt: number;
  /** Items the preview found (the run's expected total). */
  readonly total: number;
  done: number;
  /** Last item's line, for the progress. */
  last?: string;
  result?: R;
  error?: string;
  readonly stop: AbortController;
}

/** Previews waiting for their confirmation and runs, of one kind of action. */
export class BulkRuns<P, R> {
  readonly #previews = new Map<string, { readonly preview: P; readonly at: number }>();
  readonly #runs = new Map<string, BulkRun<R>>();

  /** Keeps a preview; returns the id its confirmation names. */
  keepPreview(preview: P, now = Date.now()): string {
    for (const [id, kept] of this.#previews) {
      if (now - kept.at > PREVIEW_TTL_MS || this.#previews.size >= KEEP) this.#previews.delete(id);
    }
    const id = randomBytes(12).toString('base64url');
    this.#previews.set(id, { preview, at: now });
    return id;
  }

  /** The preview of `id`, taken (a confirmation is used once), or undefined when unknown or too old. */
  takePreview(id: string, now = Date.now()): P | undefined {
    const kept = this.#previews.get(id);
    this.#previews.delete(id);
    return kept && now - kept.at <= PREVIEW_TTL_MS ? kept.preview : undefined;
  }

  /** Starts `work` in the background; its progress and result are read with `run(id)`. */
  start(
    fields: { readonly title: string; readonly by: string; readonly total: number },
    work: (signal: AbortSignal, progress: (line: string) => void) => Promise<R>,
  ): BulkRun<R> {
    const finished = [...this.#runs.values()].filter((r) => r.result !== undefined || r.error !== undefined);
    for (const old of finished.slice(0, Math.max(0, this.#runs.size - KEEP + 1))) this.#runs.delete(old.id);
    const run: BulkRun<R> = {
      id: randomBytes(12).toString('base64url'),
      ...fields,
      startedAt: Date.now(),
      done: 0,
      stop: new AbortController(),
    };
    this.#runs.set(run.id, run);
    work(run.stop.signal, (line) => {
      run.done += 1;
      run.last = line;
    }).then(
      (result) => {
        run.result = result;
      },
      (error: unknown) => {
        run.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      },
    );
    return run;
  }

  run(id: string): BulkRun<R> | undefined {
    return this.#runs.get(id);
  }
}

/** The script of a run's page while it runs: load the page again in a second. */
export const REFRESH_SCRIPT = 'setTimeout(function(){location.reload()},1000);';
