/** The overview's live chart: polls /api/overview and redraws the SVG (no library). */
export const CHART_SCRIPT = `
(() => {
  const svg = document.getElementById('chart'); const note = document.getElementById('chart-note');
  const W = 720, H = 180, keep = 180; const pts = []; let prev;
  const series = [['visible','#0b57d0'],['inFlight','#7a3fb0'],['delayed','#8a6100'],['dlq','#b3261e'],['rate','#1e7d3a']];
  const set = (id, v) => { const el = document.getElementById(id); if (el) el.textContent = v == null ? '–' : String(v); };
  function draw() {
    const max = Math.max(1, ...pts.flatMap(p => series.map(([k]) => p[k] ?? 0)));
    const x = i => 40 + (W - 50) * (pts.length < 2 ? 0 : i / (pts.length - 1));
    const y = v => H - 20 - (H - 30) * (v / max);
    let out = '<line x1="40" y1="' + (H - 20) + '" x2="' + W + '" y2="' + (H - 20) + '" stroke="#8a939e"/>' +
      '<text x="2" y="14">' + max.toFixed(max < 10 ? 1 : 0) + '</text><text x="2" y="' + (H - 20) + '">0</text>';
    for (const [k, c] of series) {
      const line = pts.map((p, i) => p[k] == null ? null : x(i).toFixed(1) + ',' + y(p[k]).toFixed(1)).filter(Boolean).join(' ');
      if (line) out += '<polyline fill="none" stroke-width="2" stroke="' + c + '" points="' + line + '"/>';
    }
    svg.innerHTML = out;
  }
  async function tick() {
    try {
      const r = await fetch('/api/overview', { cache: 'no-store', credentials: 'same-origin' });
      const d = await r.json();
      const done = d.jobs ? d.jobs.byStatus.COMPLETED : null;
      const rate = prev && done != null && prev.done != null ? Math.max(0, (done - prev.done) / ((d.at - prev.at) / 1000)) : null;
      prev = { at: d.at, done };
      pts.push({ visible: d.queue?.visible, inFlight: d.queue?.inFlight, delayed: d.queue?.delayed, dlq: d.dlq?.depth, rate });
      if (pts.length > keep) pts.shift();
      set('c-visible', d.queue?.visible); set('c-inflight', d.queue?.inFlight); set('c-delayed', d.queue?.delayed);
      set('c-dlq', d.dlq?.depth); set('c-live', d.jobs?.live); set('c-stuck', d.jobs?.stuck);
      set('c-rate', rate == null ? null : rate.toFixed(2));
      note.textContent = d.problems.length ? d.problems.join(' · ') : 'Polling every 2 s; ' + pts.length + ' samples.';
      draw();
    } catch (e) { note.textContent = 'The inspector is not answering (was leaseq ui stopped?).'; }
  }
  tick(); setInterval(tick, 2000);
})();
`;
