import { note } from './format.ts';

/**
 * Runs a bulk action that Ctrl-C stops between two items: the first SIGINT aborts the signal `run` is
 * given (it finishes the item in hand and reports what it did); a second one ends the process as usual.
 */
export async function stoppable<T>(run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const stop = new AbortController();
  const onSigint = () => {
    note('interrupted: stopping after the item in hand (Ctrl-C again to quit at once)');
    stop.abort();
    process.removeListener('SIGINT', onSigint);
  };
  process.on('SIGINT', onSigint);
  try {
    return await run(stop.signal);
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
}

/** Exit code of a bulk action stopped by Ctrl-C (after its report). */
export const EXIT_INTERRUPTED = 130;
