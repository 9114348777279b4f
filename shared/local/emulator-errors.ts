import { endpointText } from '../aws/endpoint-text.ts';
import { LeaseqError } from '../errors.ts';

/**
 * Errors of the local emulator manager. Every message is one line that says what is wrong and what to
 * do, so the CLI can print it as is. Classify with `instanceof`, never by message text.
 */
export class EmulatorError extends LeaseqError {
  /** `retryable`: running the same command again may succeed without the user changing anything. */
  constructor(message: string, options?: { cause?: unknown; retryable?: boolean }) {
    super(message, { retryable: options?.retryable ?? false, cause: options?.cause });
    this.name = 'EmulatorError';
  }
}

/** A port value that is not an integer in 1..65535. */
export class InvalidPortError extends EmulatorError {
  readonly received: string;

  constructor(received: string, source: string) {
    super(`invalid port ${JSON.stringify(received)} from ${source}: expected an integer from 1 to 65535`);
    this.name = 'InvalidPortError';
    this.received = received;
  }
}

/** Something that is not our emulator listens on the port we were asked to use. */
export class PortInUseError extends EmulatorError {
  readonly port: number;

  constructor(port: number) {
    super(`port ${port} is in use by another program; stop it or set LEASEQ_EMULATOR_PORT`);
    this.name = 'PortInUseError';
    this.port = port;
  }
}

/** No usable Python interpreter (needed once, to create the emulator's virtualenv). */
export class PythonMissingError extends EmulatorError {
  readonly python: string;

  constructor(python: string, detail: string, cause?: unknown) {
    super(
      `${python} ${detail}; install Python 3.10+ with venv and pip (Debian/Ubuntu: apt-get install python3 python3-venv) or set LEASEQ_PYTHON`,
      { cause },
    );
    this.name = 'PythonMissingError';
    this.python = python;
  }
}

/** Creating the virtualenv or pip-installing the emulator into it failed. */
export class EmulatorInstallError extends EmulatorError {
  readonly logFile: string;

  constructor(what: string, logFile: string, cause?: unknown) {
    super(`${what}; see ${logFile}`, { cause, retryable: true });
    this.name = 'EmulatorInstallError';
    this.logFile = logFile;
  }
}

/** The emulator process exited, or did not answer, while starting. */
export class EmulatorStartError extends EmulatorError {
  readonly logFile: string;

  constructor(what: string, logFile: string, cause?: unknown) {
    super(`${what}; see ${logFile}`, { cause, retryable: true });
    this.name = 'EmulatorStartError';
    this.logFile = logFile;
  }
}

/** `AWS_ENDPOINT_URL` (or another explicit endpoint) does not answer. */
export class EndpointUnreachableError extends EmulatorError {
  readonly endpoint: string;

  constructor(endpoint: string, reason: string, cause?: unknown) {
    super(
      `AWS_ENDPOINT_URL ${endpointText(endpoint)} is not reachable (${reason}); start it (e.g. docker compose up -d) or unset AWS_ENDPOINT_URL to use the embedded emulator`,
      { cause, retryable: true },
    );
    this.name = 'EndpointUnreachableError';
    this.endpoint = endpoint;
  }
}

/** Another leaseq process holds the emulator lock for too long. */
export class EmulatorBusyError extends EmulatorError {
  constructor(lockFile: string, holderPid: number) {
    super(
      `another leaseq process (pid ${holderPid}) is still installing or starting the emulator; wait for it, or remove ${lockFile} if that process is gone`,
      { retryable: true },
    );
    this.name = 'EmulatorBusyError';
  }
}

/**
 * Error of local provisioning; the one-line message says what is wrong and what to do. An
 * {@link EmulatorError}, so the CLI reports it like the emulator manager's own errors.
 */
export class LocalProvisionError extends EmulatorError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { cause: options?.cause, retryable: false });
    this.name = 'LocalProvisionError';
  }
}

/** A step of a local deploy or destroy that failed, with the one line that says why. */
export class DeployError extends LeaseqError {
  override readonly name = 'DeployError';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { retryable: false, cause: options?.cause });
  }
}
