/**
 * The overview's live script (no library): refreshes the tiles, lists and chart from `/api/overview`.
 * One refresh at a time (the next is asked for 2 s after the last answered, never on a timer that piles
 * up), none while the tab is hidden, each given up after 15 s (the fetch is aborted: the server then
 * aborts its reads). A part whose read failed keeps its last figure, greyed with the time it was read.
 * The chart has a time axis (UTC) and two value axes: messages (left), jobs per second (right).
 */
export const CHART_SCRIPT = `
(() => {
  const $ = (id) => document.getElementById(id);
  const svg = $('chart'), note = $('chart-note');
  const W = 760, H = 220, L = 56, R = 56, T = 26, B = 38, KEEP_MS = 600000, EVERY = 2000;
  const series = [['visible', '#0b57d0', 'l'], ['inFlight', '#7a3fb0', 'l'], ['delayed', '#8a6100', 'l'], ['dlq', '#b3261e', 'l'], ['rate', '#1e7d3a', 'r']];
  const pts = []; let prev; let busy = false; let timer; let lastOk;
  const hhmmss = (ms) => new Date(ms).toISOString().slice(11, 19);
  const nice = (v) => { if (!(v > 0)) return 1; const p = 10 ** Math.floor(Math.log10(v)); const m = v / p; return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p; };
  const fmt = (v) => (v >= 10 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(v < 1 ? 2 : 1));
  const txt = (x, y, s, a) => '<text x="' + x.toFixed(1) + '" y="' + y.toFixed(1) + '"' + (a ? ' text-anchor="' + a + '"' : '') + '>' + s + '</text>';
  const line = (x1, y1, x2, y2, c) => '<line x1="' + x1.toFixed(1) + '" y1="' + y1.toFixed(1) + '" x2="' + x2.toFixed(1) + '" y2="' + y2.toFixed(1) + '" stroke="' + c + '"/>';
  function draw() {
    const now = pts.length ? pts[pts.length - 1].at : Date.now();
    const start = Math.max(now - KEEP_MS, Math.min(pts.length ? pts[0].at : now, now - 60000));
    const span = Math.max(1, now - start);
    const maxL = nice(Math.max(1, ...pts.flatMap((p) => series.filter((s) => s[2] === 'l').map(([k]) => p[k] ?? 0))));
    const maxR = nice(Math.max(0.1, ...pts.map((p) => p.rate ?? 0)));
    const x = (t) => L + (W - L - R) * ((t - start) / span);
    const y = (v, max) => H - B - (H - B - T) * (v / max);
    let out = line(L, H - B, W - R, H - B, '#8a939e') + line(L, T, L, H - B, '#8a939e') + line(W - R, T, W - R, H - B, '#8a939e');
    for (const f of [0, 0.5, 1]) {
      out += line(L, y(f * maxL, maxL), W - R, y(f * maxL, maxL), '#e3e7eb');
      out += txt(L - 6, y(f * maxL, maxL) + 4, fmt(f * maxL), 'end') + txt(W - R + 6, y(f * maxR, maxR) + 4, fmt(f * maxR));
    }
    const step = [5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5].find((s) => span / s <= 6) || 3e5;
    for (let t = Math.ceil(start / step) * step; t <= now; t += step) {
      out += line(x(t), H - B, x(t), H - B + 4, '#8a939e') + txt(x(t), H - B + 16, hhmmss(t), 'middle');
    }
    out += txt(L, H - 4, 'time (UTC)') + txt(L, 12, 'messages', 'middle') + txt(W - R, 12, 'jobs/s', 'middle');
    for (const [k, c, axis] of series) {
      let seg = [];
      const flush = () => { if (seg.length) out += '<polyline fill="none" stroke-width="2" stroke="' + c + '" points="' + seg.join(' ') + '"/>'; seg = []; };
      for (const p of pts) {
        if (p[k] == null) { flush(); continue; }
        seg.push(x(p.at).toFixed(1) + ',' + y(p[k], axis === 'l' ? maxL : maxR).toFixed(1));
      }
      flush();
    }
    svg.innerHTML = out;
  }
  function stale(el, why) {
    if (!el.classList.contains('stale')) el.dataset.asOf = lastOk ? hhmmss(lastOk) : 'never';
    el.classList.add('stale'); el.title = why;
  }
  function apply(d) {
    for (const t of d.tiles) {
      const el = $(t.id); if (!el) continue;
      if (t.text == null) stale(el, 'not read this time: the last figure read');
      else { el.textContent = t.text; el.classList.remove('stale'); el.removeAttribute('title'); }
    }
    for (const [id, html] of Object.entries(d.html)) { const el = $(id); if (el && html != null) el.innerHTML = html; }
    const done = d.jobs && d.jobs.summary ? d.jobs.summary.byStatus.COMPLETED : null;
    const rate = prev && done != null && prev.done != null && d.at > prev.at ? Math.max(0, (done - prev.done) / ((d.at - prev.at) / 1000)) : null;
    prev = { at: d.at, done };
    const rateEl = $('c-rate');
    if (rate != null) { rateEl.textContent = rate.toFixed(2); rateEl.classList.remove('stale'); }
    else if (!d.jobs) stale(rateEl, 'not read this time: the last figure read');
    else if (done == null) { rateEl.textContent = '–'; rateEl.title = 'needs the whole jobs table, more than one refresh reads'; }
    pts.push({ at: d.at, visible: d.queue?.visible, inFlight: d.queue?.inFlight, delayed: d.queue?.delayed, dlq: d.dlq?.depth, rate });
    while (pts.length && pts[0].at < d.at - KEEP_MS) pts.shift();
    if (d.problems.length === 0) {
      lastOk = d.at;
      // The page's own banners were of its first read: they go once a refresh reads everything again.
      for (const el of document.querySelectorAll('main > div.banner')) el.remove();
    }
    note.className = d.problems.length ? 'banner' : 'muted';
    note.textContent = d.problems.length
      ? d.problems.map((p) => p.replace(/\\((\\w+): [^)]*\\)$/, '($1)')).join(' · ') + '. Figures not read this time are kept, greyed, with the time they were read.'
      : 'Figures of ' + hhmmss(d.at) + ' UTC, read in ' + d.tookMs + ' ms with ' + (d.reads.sqs + d.reads.dynamodb) + ' requests; refreshing every 2 s.';
    draw();
  }
  async function tick() {
    clearTimeout(timer);
    if (busy) return;
    if (document.hidden) { timer = setTimeout(tick, EVERY); return; }
    busy = true;
    const stop = new AbortController(); const giveUp = setTimeout(() => stop.abort(), 15000);
    try {
      const r = await fetch('/api/overview', { cache: 'no-store', credentials: 'same-origin', signal: stop.signal });
      if (!r.ok) throw new Error('HTTP ' + r.status);
      apply(await r.json());
    } catch (e) {
      for (const el of document.querySelectorAll('.card .n')) stale(el, 'the inspector did not answer');
      note.className = 'banner';
      note.textContent = 'The inspector is not answering (was leaseq ui stopped?): the figures shown are the last read' + (lastOk ? ', at ' + hhmmss(lastOk) + ' UTC.' : '.');
    } finally { clearTimeout(giveUp); busy = false; timer = setTimeout(tick, EVERY); }
  }
  document.addEventListener('visibilitychange', () => { if (!document.hidden && !busy) tick(); });
  tick();
})();
`;
