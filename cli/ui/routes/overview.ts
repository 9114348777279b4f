/**
 * The overview `/` and its refresh `/api/overview`: one snapshot of bounded reads (overview-data.ts),
 * shared by every tab (overview-flight.ts), drawn as tiles and lists from the same figures.
 */
import { CHART_SCRIPT } from '../chart-script.ts';
import type { UiRoute } from '../context.ts';
import { esc } from '../html.ts';
import { readOverview } from '../overview-data.ts';
import { overviewFigures } from '../overview-figures.ts';
import { OverviewFlight } from '../overview-flight.ts';
import { CHART_HTML, fragments, tiles, tilesHtml } from '../overview-view.ts';

export const overviewRoutes: UiRoute = (app, ui) => {
  const flight = new OverviewFlight((signal) => readOverview(ui.target, ui.readMs, signal));

  app.get('/api/overview', async (c) => {
    let snapshot: Awaited<ReturnType<typeof flight.get>>;
    try {
      snapshot = await flight.get(c.req.raw.signal);
    } catch (error) {
      // The browser went away (tab closed, its fetch given up): no one reads an answer, nor a log line.
      if (c.req.raw.signal.aborted) return new Response(null, { status: 499 });
      throw error;
    }
    const f = overviewFigures(snapshot);
    return c.json({ ...f, tiles: tiles(f), html: fragments(f) });
  });

  app.get('/', async (c) => {
    const f = overviewFigures(await flight.get(c.req.raw.signal));
    const html = fragments(f);
    const local = ui.config.localWorkers?.();
    const localLine = local
      ? `<p class="muted">Local worker pools right now (jobs per live worker): ${
          Object.entries(local)
            .map(([w, k]) => `${esc(w)} ${esc(k)}`)
            .join(', ') || '–'
        }</p>`
      : '';
    const part = (id: string, fallback: string) => `<div id="${id}">${html[id] ?? fallback}</div>`;
    const body = `<h1>Overview</h1>${tilesHtml(f)}${part('o-statuses', '')}${CHART_HTML}<h2>Leases</h2>${part('o-leases', '<p class="muted">Leases unavailable (see above).</p>')}${part('o-named', '')}<h2>Workers</h2>${part('o-workers', '<p class="muted">Workers unavailable (see above).</p>')}${localLine}`;
    return c.html(ui.frame('Overview', body, { problems: f.problems, script: CHART_SCRIPT }));
  });
};
