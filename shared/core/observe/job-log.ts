import type { Logger } from '@aws-lambda-powertools/logger';

/** Log lines of one job, each carrying the job's keys (never its payload). */
export class JobLog {
  readonly #logger: Logger;
  #keys: Record<string, unknown>;

  constructor(logger: Logger, keys: Record<string, unknown>) {
    this.#logger = logger;
    this.#keys = keys;
  }
  setKeys(keys: Record<string, unknown>): void {
    this.#keys = { ...this.#keys, ...keys };
  }
  debug(message: string, extra: Record<string, unknown> = {}): void {
    this.#logger.debug(message, { ...this.#keys, ...extra });
  }
  info(message: string, extra: Record<string, unknown> = {}): void {
    this.#logger.info(message, { ...this.#keys, ...extra });
  }
  warn(message: string, extra: Record<string, unknown> = {}): void {
    this.#logger.warn(message, { ...this.#keys, ...extra });
  }
  error(message: string, extra: Record<string, unknown> = {}): void {
    this.#logger.error(message, { ...this.#keys, ...extra });
  }
}
