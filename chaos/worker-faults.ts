// Preloaded into every chaos worker process (NODE_OPTIONS --import, after tsx): SDK middleware on every
// AWS client the worker builds, failing requests while the harness's control file says so. The worker's
// own code is unchanged; the harness switches the faults on and off by rewriting the file.
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { FinalizeRequestMiddleware, MiddlewareStack } from '@smithy/types';

/** Environment variable naming the control file. */
export const CONTROL_FILE_ENV = 'CHAOS_FAULT_CONTROL';

/** What the control file holds: the share of requests each fault hits now (0 or absent: off). */
export interface SdkFaultControl {
  /** Requests refused with a throttling error before they reach the store. */
  readonly throttle?: number;
  /** DynamoDB writes applied by the store whose answer is then lost. */
  readonly lostAnswer?: number;
}

const WRITES = new Set(['TransactWriteItems', 'PutItem', 'UpdateItem', 'DeleteItem']);

let control: SdkFaultControl = {};
let seenMtime = 0;

/** Re-reads the control file when it changed; a torn or missing file leaves the last state. */
function refresh(file: string): void {
  try {
    const mtime = statSync(file).mtimeMs;
    if (mtime === seenMtime) return;
    control = JSON.parse(readFileSync(file, 'utf8')) as SdkFaultControl;
    seenMtime = mtime;
  } catch {
    // keep the last state
  }
}

function throttled(service: string): Error {
  const error = new Error(`chaos: ${service} request throttled`);
  error.name = service === 'SQS' ? 'RequestThrottled' : 'ThrottlingException';
  Object.assign(error, {
    $metadata: { httpStatusCode: 400 },
    $fault: 'client',
    $retryable: { throttling: true },
  });
  return error;
}

function lostAnswer(): Error {
  const error = new Error('chaos: the answer was lost after the write');
  error.name = 'TimeoutError';
  Object.assign(error, { $metadata: {}, code: 'ECONNRESET' });
  return error;
}

function middleware<I extends object, O extends object>(): FinalizeRequestMiddleware<I, O> {
  return (next, context) => async (args) => {
    const service = String(context.clientName ?? '').replace(/Client$/, '');
    const command = String(context.commandName ?? '').replace(/Command$/, '');
    if ((control.throttle ?? 0) > Math.random()) throw throttled(service);
    if (service === 'DynamoDB' && WRITES.has(command) && (control.lostAnswer ?? 0) > Math.random()) {
      await next(args);
      throw lostAnswer();
    }
    return next(args);
  };
}

/** Patches `send` of the smithy client class (its CommonJS and ESM copies) to attach the middleware once per stack. */
async function install(file: string): Promise<void> {
  const timer = setInterval(() => refresh(file), 100);
  timer.unref();
  refresh(file);
  const stacks = new WeakSet<object>();
  const require = createRequire(import.meta.url);
  const copies = [require('@smithy/core/client'), await import('@smithy/core/client')] as {
    Client: { prototype: { send: (...args: unknown[]) => unknown } };
  }[];
  for (const { Client } of new Set(copies.map((c) => c))) {
    const send = Client.prototype.send;
    if ((send as { chaos?: boolean }).chaos) continue;
    const patched = function (
      this: { middlewareStack: MiddlewareStack<object, object> },
      ...args: unknown[]
    ) {
      if (!stacks.has(this.middlewareStack)) {
        stacks.add(this.middlewareStack);
        this.middlewareStack.add(middleware(), {
          step: 'finalizeRequest',
          name: 'chaosFaults',
          override: true,
        });
      }
      return send.apply(this, args);
    };
    Object.assign(patched, { chaos: true });
    Client.prototype.send = patched;
  }
}

const file = process.env[CONTROL_FILE_ENV];
if (file) await install(file);
