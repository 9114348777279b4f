import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createUiApp, type UiConfig } from './app.ts';
import { newUiHost } from './guard.ts';

/** The only address the inspector listens on: the machine's loopback, never a network interface. */
export const UI_HOST = '127.0.0.1';

export interface RunningUi {
  /** `http://<random>.leaseq.localhost:<port>/`: the pages answer on this host name only. */
  readonly origin: string;
  /** `<random>.leaseq.localhost`, new each start. */
  readonly host: string;
  readonly port: number;
  /** The URL to open: the origin with `?token=` (used once: session.ts). */
  readonly url: string;
  /** Where workers send spans: `http://127.0.0.1:<port>` (their resolver may not know `*.localhost`). */
  readonly tracesEndpoint: string;
  /** The address the socket is bound to (127.0.0.1). */
  readonly address: string;
  close(): Promise<void>;
}

/**
 * Starts the inspector on 127.0.0.1:`port` (0: any free port), answering pages on a host name of its
 * own (`config.host`, else a new random one).
 */
export async function startUi(
  config: Omit<UiConfig, 'port' | 'host'> & { readonly host?: string },
  port: number,
): Promise<RunningUi> {
  let bound = port;
  const host = config.host ?? newUiHost();
  const app = createUiApp({ ...config, host, port: () => bound });
  const server = serve({ fetch: app.fetch, port, hostname: UI_HOST });
  const info = await new Promise<AddressInfo>((resolve, reject) => {
    server.once('error', reject);
    server.once('listening', () => resolve(server.address() as AddressInfo));
  });
  bound = info.port;
  const origin = `http://${host}:${bound}/`;
  return {
    origin,
    host,
    port: bound,
    url: `${origin}?token=${config.token}`,
    tracesEndpoint: `http://${UI_HOST}:${bound}`,
    address: info.address,
    close: () =>
      new Promise<void>((resolve) => {
        // Open keep-alive connections (a browser tab) would hold close() until they time out.
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
