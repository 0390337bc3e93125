// flamebpf's web page: each target's samples per second, window by window, from /timeline; a
// range chosen by dragging across a target's chart; the flame graph of that range (/svg/, whose
// own script searches and zooms) in a frame; and with a base range set, the differential flame
// graph of the base against the range (/diff/). Names from the server are placed as text only.
"use strict";

(() => {
  // The timeline is fetched again every window, but not more often than this.
  const kRefreshMs = 5000;
  // A pointer that moved less than this between press and release clicked one window.
  const kClickPixels = 3;
  const kChartHeight = 36;

  const state = {
    windows: [], // {start, end}: milliseconds since the epoch, oldest first
    targets: [], // {name, directory (null: no dumps), samples: [[window, count]], total, peak}
    t0: 0,
    t1: 1,
    peak: 0, // the highest samples per second of any target in any window
    selected: null, // the name of the target whose range is selected
    selection: null, // {from, to}
    base: null, // {from, to}: the range a diff compares against
    drag: null, // {name, chart, x0, x}
    rows: [], // {target, row, chart, canvas, sel, base}
    shown: null, // the URL in the frame
  };

  const byId = (id) => document.getElementById(id);

  function element(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function pad(n) {
    return String(n).padStart(2, "0");
  }

  function clock(ms) {
    const d = new Date(ms);
    return `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
  }

  function day(ms) {
    const d = new Date(ms);
    return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
  }

  function duration(ms) {
    const s = Math.round(ms / 1000);
    if (s < 120) return `${s} s`;
    if (s < 7200) return `${Math.round(s / 60)} min`;
    return `${(s / 3600).toFixed(1)} h`;
  }

  function describe(range) {
    return `${clock(range.from)}\u2013${clock(range.to)} UTC (${duration(range.to - range.from)})`;
  }

  function setStatus(text, error = false) {
    const status = byId("status");
    status.textContent = text;
    status.classList.toggle("error", error);
  }

  // The bounds as `flamebpf merge` takes them: whole seconds since the epoch, wide enough to hold
  // every window of the range.
  function rangeQuery(range, prefix = "") {
    return [
      [`${prefix}from`, `@${Math.floor(range.from / 1000)}`],
      [`${prefix}to`, `@${Math.ceil(range.to / 1000)}`],
    ];
  }

  function url(path, directory, pairs) {
    return `/${path}/${encodeURIComponent(directory)}?${new URLSearchParams(pairs)}`;
  }

  // /timeline's answer, checked: anything unexpected is refused rather than half drawn.
  function accept(data) {
    const number = (n) => typeof n === "number" && Number.isFinite(n);
    if (!data || !Array.isArray(data.windows) || !Array.isArray(data.targets)) {
      throw new Error("/timeline answered without windows and targets");
    }
    const windows = data.windows.map((w) => {
      if (!Array.isArray(w) || !number(w[0]) || !number(w[1]) || w[1] < w[0]) {
        throw new Error("/timeline answered a malformed window");
      }
      return { start: w[0], end: w[1] };
    });
    let peak = 0;
    const targets = data.targets.map((t) => {
      if (!t || typeof t.name !== "string" || !Array.isArray(t.samples) ||
          !(t.directory === null || typeof t.directory === "string")) {
        throw new Error("/timeline answered a malformed target");
      }
      let total = 0;
      let own = 0;
      for (const s of t.samples) {
        if (!Array.isArray(s) || !Number.isInteger(s[0]) || !windows[s[0]] || !number(s[1]) || s[1] < 0) {
          throw new Error("/timeline answered malformed samples");
        }
        total += s[1];
        const w = windows[s[0]];
        if (w.end > w.start) own = Math.max(own, (1000 * s[1]) / (w.end - w.start));
      }
      peak = Math.max(peak, own);
      return { name: t.name, directory: t.directory, samples: t.samples, total, peak: own };
    });
    targets.sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : 1));
    state.windows = windows;
    state.targets = targets;
    state.peak = peak;
    state.t0 = windows.length ? windows.reduce((start, w) => Math.min(start, w.start), Infinity) : 0;
    state.t1 = windows.length ? windows.reduce((end, w) => Math.max(end, w.end), 0) : 1;
    if (state.t1 <= state.t0) state.t1 = state.t0 + 1;
    const summary = windows.length
      ? `${targets.length} targets \u00b7 ${windows.length} windows, ${day(state.t0)} ${clock(state.t0)}` +
        `\u2013${clock(state.t1)} UTC \u00b7 peak ${Math.round(peak)} samples/s`
      : "no intervals recorded yet";
    const notes = [];
    if (data.cut) notes.push("older windows left out");
    if (data.skipped_lines > 0) notes.push(`${data.skipped_lines} unreadable stats lines`);
    byId("summary").textContent = summary + (notes.length ? ` (${notes.join(", ")})` : "");
  }

  async function load() {
    let text;
    try {
      const response = await fetch("/timeline", { cache: "no-store" });
      text = await response.text();
      if (!response.ok) {
        setStatus(`/timeline: ${response.status} ${text.trim()}`, true);
        return;
      }
      accept(JSON.parse(text));
    } catch (error) {
      setStatus(`cannot read /timeline: ${error.message}`, true);
      return;
    }
    render();
  }

  function xOf(t, width) {
    return ((t - state.t0) / (state.t1 - state.t0)) * width;
  }

  function timeAt(chart, clientX) {
    const box = chart.getBoundingClientRect();
    const x = Math.min(Math.max(clientX - box.left, 0), box.width);
    return state.t0 + (x / Math.max(box.width, 1)) * (state.t1 - state.t0);
  }

  function render() {
    const rows = byId("rows");
    rows.replaceChildren();
    state.rows = [];
    for (const target of state.targets) {
      const row = element("div", "row");
      row.dataset.total = String(target.total);
      const name = element("div", "name", target.name);
      name.title = target.name;
      const chart = element("div", "chart");
      const canvas = element("canvas");
      const base = element("div", "range base");
      const sel = element("div", "range sel");
      base.hidden = true;
      sel.hidden = true;
      chart.append(canvas, base, sel);
      const peak = element("div", "peak", `${target.total} samples`);
      peak.title = `peak ${Math.round(target.peak)} samples/s`;
      if (target.directory === null) {
        row.classList.add("nodump");
        row.title = "no dumps of this target in the output directory";
      } else {
        chart.addEventListener("pointerdown", (e) => onDown(e, target, chart));
        chart.addEventListener("pointermove", onMove);
        chart.addEventListener("pointerup", onUp);
        chart.addEventListener("pointercancel", onCancel);
      }
      row.append(name, chart, peak);
      rows.append(row);
      state.rows.push({ target, row, chart, canvas, base, sel });
    }
    if (!state.targets.length) rows.append(element("p", "empty", "No target has samples in the stats yet."));
    for (const r of state.rows) draw(r);
    axis();
    overlays();
  }

  function draw(r) {
    const ratio = window.devicePixelRatio || 1;
    const width = Math.max(r.chart.clientWidth, 1);
    r.canvas.width = Math.round(width * ratio);
    r.canvas.height = Math.round(kChartHeight * ratio);
    const g = r.canvas.getContext("2d");
    g.scale(ratio, ratio);
    g.fillStyle = getComputedStyle(r.canvas).color;
    for (const [index, count] of r.target.samples) {
      const w = state.windows[index];
      if (count <= 0 || w.end <= w.start || state.peak <= 0) continue;
      const rate = (1000 * count) / (w.end - w.start);
      const x0 = xOf(w.start, width);
      const x1 = xOf(w.end, width);
      const h = Math.max(1, (rate / state.peak) * (kChartHeight - 2));
      // A gap between windows wide enough to show one.
      const gap = x1 - x0 > 4 ? 1 : 0;
      g.fillRect(x0, kChartHeight - h, Math.max(x1 - x0 - gap, 0.75), h);
    }
  }

  function axis() {
    const ticks = document.querySelector("#axis .ticks");
    ticks.replaceChildren();
    if (!state.windows.length) return;
    const count = 5;
    for (let k = 0; k <= count; k++) {
      const tick = element("span", "tick", clock(state.t0 + (k / count) * (state.t1 - state.t0)));
      tick.style.left = `${(100 * k) / count}%`;
      if (k === 0) tick.classList.add("first");
      if (k === count) tick.classList.add("last");
      ticks.append(tick);
    }
    const timeline = byId("timeline");
    timeline.dataset.t0 = String(state.t0);
    timeline.dataset.t1 = String(state.t1);
  }

  // The windows a drag from time a to time b covers, as one range; a click takes the window
  // under the pointer. null if there is none.
  function snap(a, b, click) {
    const lo = Math.min(a, b);
    const hi = Math.max(a, b);
    let from = Infinity;
    let to = -Infinity;
    for (const w of state.windows) {
      const hit = click ? w.start <= lo && lo < w.end : w.start < hi && w.end > lo;
      if (hit) {
        from = Math.min(from, w.start);
        to = Math.max(to, w.end);
      }
    }
    return from < to ? { from, to } : null;
  }

  function place(div, range, width) {
    if (!range) {
      div.hidden = true;
      return;
    }
    const x0 = xOf(range.from, width);
    const x1 = xOf(range.to, width);
    div.style.left = `${x0}px`;
    div.style.width = `${Math.max(x1 - x0, 2)}px`;
    div.hidden = false;
  }

  function dragRange() {
    const d = state.drag;
    return d ? snap(timeAt(d.chart, d.x0), timeAt(d.chart, d.x), Math.abs(d.x - d.x0) < kClickPixels) : null;
  }

  function overlays() {
    const preview = dragRange();
    for (const r of state.rows) {
      const width = r.chart.clientWidth;
      const dragging = state.drag && state.drag.name === r.target.name;
      const selected = !state.drag && state.selected === r.target.name;
      r.row.classList.toggle("selected", state.selected === r.target.name);
      place(r.sel, dragging ? preview : selected ? state.selection : null, width);
      place(r.base, dragging || selected ? state.base : null, width);
    }
  }

  function onDown(event, target, chart) {
    if (event.button !== 0) return;
    event.preventDefault();
    chart.setPointerCapture(event.pointerId);
    state.drag = { name: target.name, chart, x0: event.clientX, x: event.clientX };
    overlays();
  }

  function onMove(event) {
    if (!state.drag) return;
    state.drag.x = event.clientX;
    overlays();
  }

  function onUp(event) {
    if (!state.drag) return;
    state.drag.x = event.clientX;
    const range = dragRange();
    const name = state.drag.name;
    state.drag = null;
    if (range) {
      state.selected = name;
      state.selection = range;
      show();
    }
    overlays();
  }

  function onCancel() {
    state.drag = null;
    overlays();
  }

  function selectedTarget() {
    return state.targets.find((t) => t.name === state.selected) || null;
  }

  // Shows what is selected: the range's flame graph, or with a base, the diff of the two.
  function show() {
    const target = selectedTarget();
    const setBase = byId("set-base");
    const clearBase = byId("clear-base");
    const open = byId("open");
    const pprof = byId("pprof");
    setBase.disabled = !state.selection || state.base !== null;
    clearBase.hidden = state.base === null;
    const parts = [];
    if (target) parts.push(target.name);
    if (state.base) parts.push(`base ${describe(state.base)}`);
    if (state.selection) parts.push(`${state.base ? "against " : ""}${describe(state.selection)}`);
    byId("selection").textContent = parts.join(" \u00b7 ");
    byId("hint").textContent = state.base
      ? "Drag a second range to compare it with the base (blue): red grew, blue shrank."
      : "Drag across a target's samples to see the flame graph of that range; click for one window.";
    if (!target || !target.directory || !state.selection) {
      open.hidden = true;
      pprof.hidden = true;
      return;
    }
    const range = rangeQuery(state.selection);
    const address = state.base
      ? url("diff", target.directory, [...rangeQuery(state.base, "base_"), ...range])
      : url("svg", target.directory, range);
    open.href = address;
    open.hidden = false;
    pprof.href = url("pprof", target.directory, range);
    pprof.hidden = false;
    if (address !== state.shown) {
      state.shown = address;
      setStatus("Loading\u2026");
      byId("graph").src = address;
    }
  }

  // The frame loaded the flame graph, or the server's refusal: that is shown as text here.
  function onFrameLoad() {
    const frame = byId("graph");
    if (!frame.getAttribute("src")) return;
    let doc = null;
    try {
      doc = frame.contentDocument;
    } catch {
      doc = null;
    }
    delete frame.dataset.shown;
    if (!doc || !doc.documentElement) {
      frame.hidden = true;
      setStatus("the flame graph could not be loaded", true);
      return;
    }
    if (doc.contentType !== "image/svg+xml") {
      const text = (doc.body || doc.documentElement).textContent.trim();
      frame.hidden = true;
      setStatus(text ? `flamebpf answered: ${text}` : "flamebpf answered with no flame graph", true);
      return;
    }
    const svg = doc.documentElement;
    const width = Number(svg.getAttribute("width"));
    const height = Number(svg.getAttribute("height"));
    if (width > 0) frame.style.width = `${Math.ceil(width)}px`;
    if (height > 0) frame.style.height = `${Math.ceil(height)}px`;
    frame.hidden = false;
    frame.dataset.shown = state.shown || "";
    setStatus("");
  }

  function init() {
    byId("graph").addEventListener("load", onFrameLoad);
    byId("refresh").addEventListener("click", load);
    byId("set-base").addEventListener("click", () => {
      if (!state.selection) return;
      state.base = state.selection;
      state.selection = null;
      show();
      overlays();
    });
    byId("clear-base").addEventListener("click", () => {
      state.base = null;
      show();
      overlays();
    });
    let resizing = 0;
    window.addEventListener("resize", () => {
      clearTimeout(resizing);
      resizing = setTimeout(render, 100);
    });
    const follow = async (first) => {
      if (first || (byId("follow").checked && !state.drag && !document.hidden)) await load();
      const last = state.windows[state.windows.length - 1];
      setTimeout(follow, Math.max(kRefreshMs, last ? last.end - last.start : 0), false);
    };
    follow(true);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
