/**
 * What every route of the inspector is given: the configuration of `leaseq ui` and the few helpers all
 * pages share (the page frame with the target line, the read-only refusal). A route file takes a
 * `UiContext` and registers its paths (routes/index.ts lists them).
 */
import type { Context, Hono } from 'hono';
import type { OpsTarget } from '../../shared/ops/target.ts';
import { operatorIdentity } from '../commands/redrive-input.ts';
import type { PayloadSettings } from './find-context.ts';
import { page } from './layout.ts';
import type { SpanBuffer } from './spans.ts';

export interface UiConfig extends PayloadSettings {
  readonly target: OpsTarget;
  /** The CLI's target line, shown in the header. */
  readonly targetLine: string;
  /** The token of the first printed link: traded once for a session (session.ts). */
  readonly token: string;
  /** The inspector's host name, `leaseq-<random>.localhost` (guard.ts `newUiHost`). */
  readonly host: string;
  /** The token the trace intake takes spans with (header `x-leaseq-trace-token`). */
  readonly traceToken: string;
  /** The port the server listens on (known once it listens). */
  readonly port: () => number;
  readonly readOnly: boolean;
  readonly spans: SpanBuffer;
  /** Bound of one read (ms). @default 4000 */
  readonly timeoutMs?: number;
  /** Bound of one action, a redrive or purge (ms). @default 120000 */
  readonly actionTimeoutMs?: number;
  /** Local worker pools' completed-job counts (`leaseq workers`), when any run. */
  readonly localWorkers?: () => Readonly<Record<string, number>> | undefined;
  /** One line per action for the terminal (counts only, no payload). */
  readonly log?: (line: string) => void;
  /** Who acts, for the history events of cancels and redrives (`leaseq ui --actor`, else the STS caller on AWS, else user@host). @default user@host */
  readonly actor?: string;
}

/** Extras of one page's frame: banners of the calls that failed, a notice, the page's script. */
export interface FrameExtras {
  /** The header's search box text (the find page's query). */
  readonly search?: string;
  readonly problems?: string[];
  readonly notice?: string;
  readonly script?: string;
}

/** The inspector as its routes see it: the configuration with its defaults applied, and shared helpers. */
export interface UiContext {
  readonly config: UiConfig;
  readonly target: OpsTarget;
  /** Bound of one read (ms). */
  readonly readMs: number;
  /** Bound of one action (ms). */
  readonly actionMs: number;
  readonly log: (line: string) => void;
  /** Who acts: the `by` of every cancel and redrive event the inspector writes. */
  readonly actor: string;
  /** A whole page: the layout around `body`, titled, with the target line. */
  frame(title: string, body: string, extra?: FrameExtras): string;
  /** The 403 page of an action on a read-only inspector, or undefined when actions are on. */
  refuseIfReadOnly(c: Context): Response | Promise<Response> | undefined;
}

/** A route file's export: registers its paths on the app. */
export type UiRoute = (app: Hono, ui: UiContext) => void;

/** The context of `config`, its defaults applied in this one place. */
export function uiContext(config: UiConfig): UiContext {
  const frame = (title: string, body: string, extra: FrameExtras = {}) =>
    page(body, { title, target: config.targetLine, ...extra });
  return {
    config,
    target: config.target,
    readMs: config.timeoutMs ?? 4000,
    actionMs: config.actionTimeoutMs ?? 120_000,
    log: config.log ?? (() => {}),
    actor: config.actor ?? operatorIdentity(),
    frame,
    refuseIfReadOnly: (c) =>
      config.readOnly
        ? c.html(
            frame('Read-only', '<h1>Read-only</h1><p>Started with --read-only: actions are off.</p>'),
            403,
          )
        : undefined,
  };
}
