import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createUiApp, type UiConfig } from './app.ts';

/** The only address the inspector listens on: the machine's loopback, never a network interface. */
export const UI_HOST = '127.0.0.1';

export interface RunningUi {
  /** `http://127.0.0.1:<port>/` */
  readonly origin: string;
  readonly port: number;
  /** The URL to open: the origin with `?token=`. */
  readonly url: string;
  /** The address the socket is bound to (127.0.0.1). */
  readonly address: string;
  close(): Promise<void>;
}

/** Starts the inspector on 127.0.0.1:`port` (0: any free port). */
export async function startUi(config: Omit<UiConfig, 'port'>, port: number): Promise<RunningUi> {
  let bound = port;
  const app = createUiApp({ ...config, port: () => bound });
  const server = serve({ fetch: app.fetch, port, hostname: UI_HOST });
  const info = await new Promise<AddressInfo>((resolve, reject) => {
    server.once('error', reject);
    server.once('listening', () => resolve(server.address() as AddressInfo));
  });
  bound = info.port;
  const origin = `http://${UI_HOST}:${bound}/`;
  return {
    origin,
    port: bound,
    url: `${origin}?token=${config.token}`,
    address: info.address,
    close: () =>
      new Promise<void>((resolve) => {
        // Open keep-alive connections (a browser tab) would hold close() until they time out.
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
