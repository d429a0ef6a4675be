// The dashboard page: a table of backends and three uPlot charts fed by /dashboard/events (SSE).
/* global uPlot, EventSource, document, window */
(function () {
  const KEEP = 300; // seconds of history
  const COLORS = ['#3366cc', '#dc3912', '#ff9900', '#109618', '#990099', '#0099c6', '#dd4477', '#66aa00'];
  const times = [];
  const inflight = new Map(); // backend → values
  const fleet = { req: [], tok: [], lat: [] };
  let inflightChart;
  let names = [];

  const width = () => Math.max(480, Math.floor(document.querySelector('.chart').clientWidth - 16));

  function series(label, i) {
    return { label, stroke: COLORS[i % COLORS.length], width: 1.5 };
  }

  const throughputChart = new uPlot(
    {
      width: width(),
      height: 220,
      series: [{}, series('req/s', 0), series('tokens/s', 1)],
      scales: { x: { time: true } },
    },
    [[], [], []],
    document.getElementById('chart-throughput'),
  );
  const latencyChart = new uPlot(
    {
      width: width(),
      height: 220,
      series: [{}, series('mean latency ms', 2)],
      scales: { x: { time: true } },
    },
    [[], []],
    document.getElementById('chart-latency'),
  );

  function buildInflight() {
    if (inflightChart) inflightChart.destroy();
    inflightChart = new uPlot(
      {
        width: width(),
        height: 220,
        series: [{}, ...names.map((n, i) => series(n, i))],
        scales: { x: { time: true } },
      },
      [times, ...names.map((n) => inflight.get(n))],
      document.getElementById('chart-inflight'),
    );
  }

  function fmt(x, digits) {
    return x === null || x === undefined ? '–' : Number(x).toFixed(digits);
  }

  function estimate(e) {
    if (e.pendingWorkS !== undefined) return `${fmt(e.pendingWorkS, 1)} s work`;
    if (e.timePerTokenS !== undefined) return `${fmt(e.timePerTokenS * 1000, 1)} ms/token`;
    return '–';
  }

  function render(s) {
    document.getElementById('policy').textContent = s.policy;
    document.getElementById('queued').textContent = String(s.queued);
    const rows = s.backends.map((b) => {
      const state = !b.healthy ? 'down' : b.draining ? 'drain' : 'up';
      const err = b.recentErrors.length ? b.recentErrors[b.recentErrors.length - 1].message : '';
      return (
        `<tr data-backend="${b.name}"><td><span class="dot ${state}"></span>${b.name}</td>` +
        `<td>${b.inFlight} / ${b.maxConcurrency ?? '∞'}</td><td>${b.engineRunning ?? '–'}</td>` +
        `<td>${b.engineWaiting ?? '–'}</td><td>${b.kvUsage === null ? '–' : fmt(b.kvUsage * 100, 0) + '%'}</td>` +
        `<td>${fmt(b.requestsPerS, 1)}</td><td>${fmt(b.tokensPerS, 0)}</td><td>${fmt(b.meanLatencyMs, 0)} ms</td>` +
        `<td>${estimate(b.estimates)}</td><td class="err" title="${err}">${err}</td></tr>`
      );
    });
    document.getElementById('backends').innerHTML = rows.join('');

    times.push(s.t / 1000);
    const current = s.backends.map((b) => b.name);
    for (const n of current)
      if (!inflight.has(n))
        inflight.set(
          n,
          times.slice(1).map(() => null),
        );
    for (const [n, vals] of inflight) {
      const b = s.backends.find((x) => x.name === n);
      vals.push(b ? b.inFlight : null);
    }
    fleet.req.push(s.fleet.completedPerS);
    fleet.tok.push(s.fleet.tokensPerS);
    fleet.lat.push(s.fleet.meanLatencyMs);
    if (times.length > KEEP) {
      times.shift();
      for (const vals of inflight.values()) vals.shift();
      fleet.req.shift();
      fleet.tok.shift();
      fleet.lat.shift();
    }
    const known = [...inflight.keys()];
    if (known.join() !== names.join()) {
      names = known;
      buildInflight();
    } else inflightChart.setData([times, ...names.map((n) => inflight.get(n))]);
    throughputChart.setData([times, fleet.req, fleet.tok]);
    latencyChart.setData([times, fleet.lat]);
  }

  const events = new EventSource('/dashboard/events');
  events.onopen = () => (document.getElementById('status').textContent = 'live');
  events.onerror = () => (document.getElementById('status').textContent = 'reconnecting…');
  events.onmessage = (m) => render(JSON.parse(m.data));

  // For tests and curious operators: how many points the charts hold.
  window.__llmlbDashboard = { points: () => times.length, backends: () => names.slice() };
})();
