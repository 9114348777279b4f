import { LeaseqError } from '../errors.ts';

/** `Name: message` of an Error, else the value as a string: the detail an operator's report gives. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/**
 * Base of the errors the operator library throws: a problem the operator fixes (bad input, unknown key),
 * never retryable by waiting. The CLI prints `message` as one line.
 */
export class OpsError extends LeaseqError {
  constructor(message: string, cause?: unknown) {
    super(message, { retryable: false, cause });
    this.name = 'OpsError';
  }
}

/** One entry of a jobs file is not a valid job; nothing from the file was sent. */
export class JobFileError extends OpsError {
  /** 1-based line (NDJSON) or array entry (JSON) of the bad job; undefined for the file as a whole. */
  readonly position: number | undefined;

  constructor(detail: string, at?: { where: 'line' | 'entry'; position: number }, cause?: unknown) {
    super(at ? `${at.where} ${at.position}: ${detail}` : detail, cause);
    this.name = 'JobFileError';
    this.position = at?.position;
  }
}

/** A dead letter the operator named is not (or no longer) in the DLQ. */
export class DeadLetterNotFoundError extends OpsError {
  readonly id: string;

  /** @param unseen what the search missed (see `shortfall` in dlq-browse.ts), when it saw less than all. */
  constructor(id: string, unseen?: string) {
    super(`no message ${id} in the DLQ (${unseen ? `${unseen}; ` : ''}see \`leaseq dlq list\`)`);
    this.name = 'DeadLetterNotFoundError';
    this.id = id;
  }
}

/** A filter the operator gave can match nothing (e.g. a reason no dead letter has). */
export class InvalidFilterError extends OpsError {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidFilterError';
  }
}

/** An edited payload (edit and retry) its job type's schema refuses; the redrive changed nothing. */
export class PayloadRefusedError extends OpsError {
  readonly type: string;
  /** What the schema says: `payload.<field>: <why>`. */
  readonly problem: string;

  constructor(type: string, problem: string) {
    super(`the corrected payload does not fit job type ${type}: ${problem}; nothing was changed`);
    this.name = 'PayloadRefusedError';
    this.type = type;
    this.problem = problem;
  }
}
