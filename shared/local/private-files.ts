/**
 * Files and folders of `.leaseq/` that hold error text (request errors, tracebacks, install output):
 * readable by their owner only, as other local users have no business reading them.
 */
import { fchmodSync, openSync } from 'node:fs';

/**
 * Opens `file` for appending, owner-only (0600). `mode` applies only when the file is created, so one
 * left by an older leaseq (0644) is narrowed too.
 */
export function openPrivateLog(file: string): number {
  const fd = openSync(file, 'a', 0o600);
  fchmodSync(fd, 0o600);
  return fd;
}
