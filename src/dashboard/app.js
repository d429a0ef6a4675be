// The dashboard page's script: a table of backends and three uPlot charts, fed once a second by
// server-sent events from dashboard/events (see handler.ts for the event's shape).
/* global uPlot, EventSource, document, window */
(function () {
  'use strict';
  const KEEP_S = 300; // seconds of history on the charts
  const MIN_SPAN_S = 60; // the time axis never spans less, so the first seconds don't fill the width
  const COLORS = ['#3366cc', '#dc3912', '#ff9900', '#109618', '#990099', '#0099c6', '#dd4477', '#66aa00'];
  const color = (i) => COLORS[i % COLORS.length];
  const $ = (id) => document.getElementById(id);

  // Chart data, column-wise as uPlot wants it. `live` is sampled from each event; `fleet` per second.
  const live = { t: [], queued: [], inFlight: new Map(), waiting: new Map() };
  const fleet = { t: [], done: [], failed: [], tokens: [], latency: [], ttfb: [] };
  let names = []; // backends on the queue chart, in order

  // ---- formatting -------------------------------------------------------------------------------
  const num = (x, digits = 0) => (x === null || x === undefined ? '–' : Number(x).toFixed(digits));
  const ms = (x) =>
    x === null || x === undefined ? '–' : x < 1000 ? `${x.toFixed(0)} ms` : `${(x / 1000).toFixed(2)} s`;
  const secs = (x) =>
    x === null || x === undefined ? '–' : x < 10 ? `${x.toFixed(2)} s` : `${x.toFixed(0)} s`;
  // Requests whose backend did not report tokens (an OpenAI stream without usage) are not 0 tokens:
  // say they are uncounted rather than show a rate too low.
  const tokens = (perS, uncountedPerS) =>
    uncountedPerS > 0 ? (perS > 0 ? `${num(perS)} + uncounted` : 'uncounted') : num(perS);
  const uncountedTitle = (uncountedPerS) =>
    uncountedPerS > 0
      ? `${num(uncountedPerS, 1)} req/s finished without a token count (the backend reported no usage)`
      : '';
  const ago = (at, now) => {
    const s = Math.max(0, Math.round((now - at) / 1000));
    return s < 90 ? `${s} s ago` : `${Math.round(s / 60)} min ago`;
  };

  // ---- charts -----------------------------------------------------------------------------------
  const width = (el) => Math.max(320, el.clientWidth);
  const timeScale = {
    time: true,
    // Before any data uPlot passes no finite bounds (null, undefined or NaN as versions differ): show
    // the last minute up to now instead of an arbitrary axis (years ahead on the first frame).
    range: (u, min, max) =>
      !Number.isFinite(max) || !Number.isFinite(min)
        ? [Date.now() / 1000 - MIN_SPAN_S, Date.now() / 1000]
        : [Math.min(min, max - MIN_SPAN_S), max],
  };
  const fromZero = (u, min, max) => [0, Math.max(1, max ?? 1) * 1.1];
  const intTicks = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

  function chart(el, height, series, scales, axes, data) {
    return new uPlot(
      {
        width: width(el),
        height,
        // No point markers; lines join across seconds without a value (e.g. no request finished).
        series: [{}, ...series.map((x) => ({ points: { show: false }, spanGaps: true, ...x }))],
        scales: { x: timeScale, ...scales },
        axes,
      },
      data,
      el,
    );
  }

  let queueChart;
  function buildQueueChart() {
    queueChart?.destroy();
    const series = [];
    names.forEach((n, i) => {
      series.push({ label: n, stroke: color(i), width: 2 });
      series.push({ label: `${n} engine queue`, stroke: color(i), width: 1.5, dash: [6, 4] });
    });
    series.push({ label: 'router queue', stroke: '#888', width: 1.5, dash: [2, 3] });
    queueChart = chart(
      $('chart-queues'),
      240,
      series,
      { y: { range: fromZero } },
      [{}, { incrs: intTicks }],
      queueData(),
    );
  }
  function queueData() {
    return [live.t, ...names.flatMap((n) => [live.inFlight.get(n), live.waiting.get(n)]), live.queued];
  }

  const throughputChart = chart(
    $('chart-throughput'),
    220,
    [
      // Tokens first, as a shaded area: drawn under the request lines, which it often parallels.
      { label: 'tokens/s', stroke: color(3), fill: 'rgba(16, 150, 24, 0.12)', width: 1, scale: 'tok' },
      { label: 'completed/s', stroke: color(0), width: 2, scale: 'rps' },
      { label: 'failed/s', stroke: '#d33a3a', width: 1.5, scale: 'rps' },
    ],
    { rps: { range: fromZero }, tok: { range: fromZero } },
    [{}, { scale: 'rps' }, { scale: 'tok', side: 1, grid: { show: false } }],
    [[], [], [], []],
  );
  const legendMs = (u, v) => (v === null || v === undefined ? '--' : ms(v));
  const latencyChart = chart(
    $('chart-latency'),
    220,
    [
      { label: 'mean latency', stroke: color(2), width: 2, value: legendMs },
      { label: 'mean time to first byte', stroke: color(5), width: 1.5, value: legendMs },
    ],
    { y: { range: fromZero } },
    [
      {},
      {
        values: (u, ticks) => ticks.map((v) => (v === 0 ? '0' : v < 1000 ? `${v} ms` : `${v / 1000} s`)),
        size: 60,
      },
    ],
    [[], [], []],
  );

  window.addEventListener('resize', () => {
    for (const [c, id] of [
      [queueChart, 'chart-queues'],
      [throughputChart, 'chart-throughput'],
      [latencyChart, 'chart-latency'],
    ])
      c?.setSize({ width: width($(id)), height: c.height });
  });

  // Drop what is older than KEEP_S from the front of every column of a data set.
  function trim(cols, t) {
    let n = 0;
    while (n < t.length && t[n] < t[t.length - 1] - KEEP_S) n++;
    if (n > 0) for (const c of cols) c.splice(0, n);
  }

  function addFleetSecond(f) {
    const t = f.t / 1000;
    if (fleet.t.length > 0 && t <= fleet.t[fleet.t.length - 1]) return;
    fleet.t.push(t);
    fleet.done.push(f.completed);
    fleet.failed.push(f.failed);
    fleet.tokens.push(f.tokens);
    fleet.latency.push(f.meanLatencyMs);
    fleet.ttfb.push(f.meanTtfbMs);
  }

  function updateCharts(e) {
    live.t.push(e.t / 1000);
    live.queued.push(e.queued);
    for (const b of e.backends) {
      if (live.inFlight.has(b.name)) continue;
      // A backend new to the page has no values for the times before it (this one is pushed below).
      live.inFlight.set(b.name, new Array(live.t.length - 1).fill(null));
      live.waiting.set(b.name, new Array(live.t.length - 1).fill(null));
    }
    for (const [n, col] of live.inFlight) {
      const b = e.backends.find((x) => x.name === n);
      col.push(b ? b.inFlight : null);
      live.waiting.get(n).push(b ? b.engineWaiting : null);
    }
    trim([live.t, live.queued, ...live.inFlight.values(), ...live.waiting.values()], live.t);
    const known = [...live.inFlight.keys()];
    if (known.join('\n') !== names.join('\n')) {
      names = known;
      buildQueueChart();
    } else queueChart.setData(queueData());

    if (e.history) {
      for (const col of Object.values(fleet)) col.length = 0;
      e.history.forEach(addFleetSecond);
    }
    const f = e.fleet;
    addFleetSecond({
      t: f.t,
      completed: f.completedPerS,
      failed: f.failedPerS,
      tokens: f.tokensPerS,
      meanLatencyMs: f.meanLatencyMs,
      meanTtfbMs: f.meanTtfbMs,
    });
    trim(Object.values(fleet), fleet.t);
    throughputChart.setData([fleet.t, fleet.tokens, fleet.done, fleet.failed]);
    latencyChart.setData([fleet.t, fleet.latency, fleet.ttfb]);
  }

  // ---- table ------------------------------------------------------------------------------------
  // Built with DOM calls, never innerHTML: names and error messages come from configs and upstreams.
  function cell(tr, text, cls) {
    const td = tr.insertCell();
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  function row(b, now) {
    const tr = document.createElement('tr');
    tr.dataset.backend = b.name;
    const state = !b.healthy ? 'down' : b.draining ? 'drain' : 'up';
    const name = cell(tr, '', 'l');
    const dot = document.createElement('span');
    dot.className = `dot ${state}`;
    dot.title = { up: 'healthy', down: 'unhealthy (ejected)', drain: 'draining' }[state];
    name.append(dot, b.name);
    if (state !== 'up') {
      const tag = document.createElement('span');
      tag.className = 'tag';
      tag.textContent = state === 'down' ? 'down' : 'draining';
      name.append(tag);
    }
    cell(tr, `${b.inFlight} / ${b.maxConcurrency ?? '∞'}`);
    cell(tr, num(b.engineRunning));
    cell(tr, num(b.engineWaiting));
    cell(tr, b.kvUsage === null ? '–' : `${num(b.kvUsage * 100)} %`);
    cell(tr, num(b.requestsPerS, 1));
    cell(tr, tokens(b.tokensPerS, b.uncountedPerS)).title = uncountedTitle(b.uncountedPerS);
    cell(tr, `${ms(b.p50LatencyMs)} / ${ms(b.p95LatencyMs)}`);
    const est = cell(tr, b.estimate ? `${secs(b.estimate.seconds)} ${b.estimate.kind}` : '–');
    est.title =
      Object.entries(b.estimates)
        .map(([k, v]) => `${k}: ${+v.toPrecision(4)}`)
        .join('\n') || 'this policy keeps no estimates';
    const last = b.recentErrors[b.recentErrors.length - 1];
    const err = cell(tr, last ? `${last.message} (${ago(last.at, now)})` : '', 'l err');
    err.title = b.recentErrors.map((x) => `${new Date(x.at).toLocaleTimeString()}  ${x.message}`).join('\n');
    return tr;
  }

  function render(e) {
    $('policy').textContent = e.policy;
    $('queued').textContent = String(e.queued);
    // The backends' rates (averaged over seconds), steadier than the last second's count.
    const sum = (k) => e.backends.reduce((a, b) => a + b[k], 0);
    $('fleet-rps').textContent = num(sum('requestsPerS'), 1);
    $('fleet-tps').textContent = tokens(sum('tokensPerS'), sum('uncountedPerS'));
    $('fleet-tps').title = uncountedTitle(sum('uncountedPerS'));
    $('backends').replaceChildren(...e.backends.map((b) => row(b, e.t)));
    updateCharts(e);
  }

  // ---- feed -------------------------------------------------------------------------------------
  let lastEvent;
  const status = (text, cls) => {
    $('status').textContent = text;
    $('status').className = cls;
  };
  // With admin.token set the stream needs it; EventSource can't send headers, so the page passes
  // on the token it was opened with (/dashboard?token=…).
  const token = new URLSearchParams(window.location.search).get('token');
  const events = new EventSource(
    token ? `dashboard/events?token=${encodeURIComponent(token)}` : 'dashboard/events',
  );
  events.onopen = () => status('live', 'live');
  events.onerror = () => status('reconnecting…', 'down');
  events.onmessage = (m) => {
    lastEvent = JSON.parse(m.data);
    render(lastEvent);
  };

  // For tests and curious operators (try it in the browser console).
  window.__llmlbDashboard = {
    points: () => live.t.length,
    fleetPoints: () => fleet.t.length,
    backends: () => names.slice(),
    last: () => lastEvent,
  };
})();
