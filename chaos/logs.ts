import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** One protocol event read back from the workers' JSON logs (no payloads are logged). */
export interface LogEvent {
  readonly at: number;
  readonly worker: string;
  readonly dedupKey: string;
  /** For a takeover: the worker whose lease had expired. */
  readonly previousOwner?: string;
}

export interface WorkerLogEvents {
  readonly takeovers: readonly LogEvent[];
  /** A job aborted in a live worker because its lease was lost (renewal refused or too late). */
  readonly leaseLost: readonly LogEvent[];
  /**
   * "Lease lost" reports whose renewal was refused by the worker's own completion (same owner and
   * token, status COMPLETED): a heartbeat racing its own commit, not an abort. Counted apart.
   */
  readonly renewalRacedOwnCommit: readonly LogEvent[];
}

const OWN_COMPLETION = /item now has owner (\S+), token (\d+), status COMPLETED/;

const TAKEOVER = 'took over a job whose lease expired';
const LEASE_LOST = 'lease lost: aborting the job';

/** Reads every `<worker>.log` in `dir` and picks out takeovers and lease-lost aborts. */
export function readWorkerLogs(dir: string): WorkerLogEvents {
  const takeovers: LogEvent[] = [];
  const leaseLost: LogEvent[] = [];
  const renewalRacedOwnCommit: LogEvent[] = [];
  for (const name of readdirSync(dir).filter((f) => f.endsWith('.log'))) {
    const worker = name.slice(0, -'.log'.length);
    for (const line of readFileSync(join(dir, name), 'utf8').split('\n')) {
      if (!line.includes(TAKEOVER) && !line.includes(LEASE_LOST)) continue;
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      const event: LogEvent = {
        at: Date.parse(String(entry.timestamp)),
        worker,
        dedupKey: String(entry.dedupKey ?? ''),
        ...(typeof entry.previousOwner === 'string' ? { previousOwner: entry.previousOwner } : {}),
      };
      const message = String(entry.message ?? '');
      if (message.startsWith(TAKEOVER)) takeovers.push(event);
      else if (message.startsWith(LEASE_LOST)) {
        const own = OWN_COMPLETION.exec(String(entry.error ?? ''));
        if (own && own[1] === worker && String(entry.token) === own[2]) renewalRacedOwnCommit.push(event);
        else leaseLost.push(event);
      }
    }
  }
  return { takeovers, leaseLost, renewalRacedOwnCommit };
}
