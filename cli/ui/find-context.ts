/**
 * What the search, payload and fix pages need of the inspector (a part of its route context), and the
 * `leaseq ui` settings only they use: the job module (payload schemas), the redaction hook, the payload
 * bucket of claim-checked payloads.
 */
import type { Context } from 'hono';
import type { PayloadStore } from '../../shared/core/contract/payload-store.ts';
import type { RedactText } from '../../shared/ops/payload-view.ts';
import type { OpsTarget } from '../../shared/ops/target.ts';
import type { CliJobs } from '../job-module.ts';

/** The settings of `leaseq ui` the payload pages use; all optional. */
export interface PayloadSettings {
  /** The job module: an edited payload is checked against its type's schema there (no module: no edit). */
  readonly jobs?: CliJobs;
  /** The deployment's redaction (the job module's `redactError` export), over every payload and result shown. */
  readonly redact?: RedactText;
  /** The bucket of claim-checked payloads (`--payload-bucket`): an offloaded payload is read from it. */
  readonly payloadStore?: PayloadStore;
}

export interface FindUi {
  readonly config: PayloadSettings & { readonly readOnly: boolean };
  readonly target: OpsTarget;
  readonly readMs: number;
  readonly actionMs: number;
  readonly log: (line: string) => void;
  /** Who acts, for the history's redrive event (the inspector's actor, where it has one); else user@host. */
  readonly actor?: string;
  frame(
    title: string,
    body: string,
    extra?: { problems?: string[]; notice?: string; search?: string },
  ): string;
  refuseIfReadOnly(c: Context): Response | Promise<Response> | undefined;
}
