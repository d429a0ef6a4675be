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
    // From the data, not from uPlot's bounds: without data it passes none, and for a single point
    // (every page's first event) it passes that point + one day (in ms: years ahead, in seconds).
    // The axis is the data's span, at least the last MIN_SPAN_S seconds, ending at the last point.
    range: (u) => {
      const xs = u.data[0];
      const last = xs && xs.length > 0 ? xs[xs.length - 1] : Date.now() / 1000;
      const first = xs && xs.length > 0 ? xs[0] : last;
      return [Math.min(first, last - MIN_SPAN_S), last];
    },
  };
  const fromZero = (u, min, max) => [0, Math.max(1, max ?? 1) * 1.1];
  // Counts per second are whole numbers: whole ticks only (no 0.25 req/s on an idle chart), and
  // short labels (12k) so a wide value never spills over the plot.
  const intTicks = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6];
  const short = (v) =>
    v >= 1e6 ? `${+(v / 1e6).toPrecision(3)}M` : v >= 1e3 ? `${+(v / 1e3).toPrecision(3)}k` : String(v);
  const countAxis = (extra) => ({
    incrs: intTicks,
    values: (u, ticks) => ticks.map(short),
    size: 50,
    ...extra,
  });
  const msTicks = [
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 3e4, 6e4, 12e4, 3e5, 6e5, 18e5,
  ];
  // Time labels at least this far apart (px), so ':40 :45' never run into each other on a narrow page.
  const timeAxis = { space: 70 };

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
      [timeAxis, countAxis()],
      queueData(),
    );
  }
  function queueData() {
    return [live.t, ...names.flatMap((n) => [live.inFlight.get(n), live.waiting.get(n)]), live.queued];
  }
  // Drawn at once, empty: the panel has its axes (the last minute) before the first event arrives.
  buildQueueChart();

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
    [timeAxis, countAxis({ scale: 'rps' }), countAxis({ scale: 'tok', side: 1, grid: { show: false } })],
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
      timeAxis,
      {
        incrs: msTicks,
        values: (u, ticks) =>
          ticks.map((v) =>
            v === 0 ? '0' : v < 1000 ? `${v} ms` : v < 6e4 ? `${v / 1000} s` : `${v / 6e4} min`,
          ),
        size: 64,
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
  const eventsUrl = token ? `dashboard/events?token=${encodeURIComponent(token)}` : 'dashboard/events';
  let events;
  function notice(parts) {
    const el = $('notice');
    // Text nodes and <code>, never innerHTML: the token comes from the address bar.
    el.replaceChildren(
      ...parts.map((p) => {
        if (typeof p === 'string') return document.createTextNode(p);
        const c = document.createElement('code');
        c.textContent = p.code;
        return c;
      }),
    );
    el.hidden = false;
  }
  function connect() {
    events = new EventSource(eventsUrl);
    events.onopen = () => {
      status('live', 'live');
      $('notice').hidden = true;
    };
    events.onerror = () => {
      // A network error: EventSource retries by itself. An HTTP error answer closes it for good, and
      // it does not say which: ask the server (HEAD) what the status was.
      if (events.readyState !== EventSource.CLOSED) return status('reconnecting…', 'down');
      fetch(eventsUrl, { method: 'HEAD', cache: 'no-store' })
        .then((r) => r.status)
        .catch(() => 0)
        .then((code) => {
          if (code === 401 || code === 403) {
            status('needs the admin token', 'down');
            const here = `${window.location.origin}${window.location.pathname}`;
            notice(
              token
                ? [
                    'The token in this address is not this router’s admin token (',
                    { code: 'admin.token' },
                    ' in its config). Open ',
                    { code: `${here}?token=<admin.token>` },
                    ' with the right one.',
                  ]
                : [
                    'This dashboard needs the router’s admin token (',
                    { code: 'admin.token' },
                    ' in its config): open ',
                    { code: `${here}?token=<admin.token>` },
                    '.',
                  ],
            );
            return; // retrying cannot help until the address changes
          }
          status('reconnecting…', 'down');
          setTimeout(connect, 2000);
        });
    };
    events.onmessage = (m) => {
      lastEvent = JSON.parse(m.data);
      render(lastEvent);
    };
  }
  connect();

  // For tests and curious operators (try it in the browser console).
  const xRange = (c) => (c ? [c.scales.x.min, c.scales.x.max] : null);
  window.__llmlbDashboard = {
    /** Each chart's time axis, [min, max] in seconds: queues, throughput, latency. */
    xRanges: () => [xRange(queueChart), xRange(throughputChart), xRange(latencyChart)],
    points: () => live.t.length,
    fleetPoints: () => fleet.t.length,
    backends: () => names.slice(),
    last: () => lastEvent,
  };
})();
