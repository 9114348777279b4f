/**
 * `leaseq ui`: the local inspector's app. Pages are rendered on the server; every store call is bounded
 * (data.ts), every request passes the gate (guard.ts, session.ts), and the actions (redrive, purge,
 * cancel) ask for a confirmation first and are absent in read-only mode. The pages are in routes/, one
 * file each (routes/index.ts lists them); the frame is layout.ts.
 */
import { Hono } from 'hono';
import { type UiConfig, uiContext } from './context.ts';
import { esc } from './html.ts';
import { page } from './layout.ts';
import { ROUTES } from './routes/index.ts';
import { sessionGate, UiSessions } from './session.ts';

export type { UiConfig } from './context.ts';

/** Security headers of every answer: no framing, no referrer, nothing cached, scripts only inline ones. */
const HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  // Not no-referrer: with it Chromium sends `Origin: null` on the pages' own form posts, which the gate
  // refuses; same-origin still sends no URL (with its query) to another site.
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

/** The inspector: headers, the session gate, the error page, then every route of routes/index.ts. */
export function createUiApp(config: UiConfig): Hono {
  const app = new Hono();
  const ui = uiContext(config);

  app.use('*', async (c, next) => {
    for (const [k, v] of Object.entries(HEADERS)) c.header(k, v);
    await next();
  });
  app.use(
    '*',
    sessionGate({
      sessions: new UiSessions(config.token),
      host: config.host,
      port: config.port,
      traceToken: config.traceToken,
      refuse: (c, why, status) =>
        c.html(
          page(`<h1>${status} ${status === 401 ? 'Unauthorized' : 'Forbidden'}</h1><p>${esc(why)}</p>`, {
            title: 'Refused',
            target: '',
          }),
          status,
        ),
      onNewLink: (url) => ui.log(`the link was used; for another browser: ${url}`),
    }),
  );

  app.onError((error, c) => {
    // One line, no stack and no request body: the terminal and the page say what failed.
    ui.log(`error on ${c.req.method} ${c.req.path}: ${error.name}: ${error.message}`.slice(0, 300));
    return c.html(
      ui.frame(
        'Error',
        `<h1>Something failed</h1><div class="banner" role="alert">${esc(`${error.name}: ${error.message}`)}</div>`,
      ),
      500,
    );
  });

  for (const route of ROUTES) route(app, ui);
  return app;
}
