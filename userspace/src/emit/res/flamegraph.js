// flamebpf flame graph: hover, zoom and search for the SVG that emit/svg.cpp writes.
//
// This file is embedded verbatim in a CDATA section of every SVG, so it must never contain the
// three characters that end one (svg.cpp refuses to build an SVG if it does).
//
// Frame names are hostile input: they only ever reach the document through textContent and
// attribute values, never as markup.
//
// A frame in the document is its samples (data-w), its name (data-n), its rectangle and its label;
// in a differential graph also its samples before and after (data-b, data-a). Frames come parents
// first, each frame's children left to right right after it, so the script works out each
// frame's depth (from its rectangle's y) and its first sample (the samples of the siblings left
// of it); its tooltip it makes on the first hover.
//
// Speed with 50,000 frames: everything the script needs is read once from the document into
// typed arrays; a zoom is one pass over those arrays that only writes (attributes, classes,
// text), and only where something changes, so the browser lays out once per zoom. Nothing reads
// layout (getBBox, getComputedStyle).
(function () {
  "use strict";

  const SVG_NS = "http://www.w3.org/2000/svg";
  const XHTML_NS = "http://www.w3.org/1999/xhtml";
  // Average glyph width of the 12 px frame font, and the gap between a label and its frame's
  // edges: the same numbers svg.cpp fits its labels with.
  const CHAR_WIDTH = 0.59 * 12;
  const LABEL_PAD = 3;
  // Per-frame state bits.
  const HIDDEN = 1;
  const ANCESTOR = 2;

  // The <svg> this script belongs to: the document's root when the SVG is opened on its own, or
  // the enclosing element when it is inlined in an HTML page.
  const script = document.currentScript;
  let svg = null;
  let total = 0;
  let diff = false;
  let width = 0;
  let padLeft = 0;
  let plotWidth = 0;

  // Frames, in document order: element, samples to the left (x), samples (w), depth, name, and
  // whether it has its tooltip yet.
  let count = 0;
  const frames = [];
  let fx = new Float64Array(0);
  let fw = new Float64Array(0);
  let fd = new Int32Array(0);
  const names = [];
  let titled = new Uint8Array(0);
  const indexOf = new Map();
  let root = -1;

  // What is drawn now: state bits, and for frames the script has moved, the geometry and label
  // it wrote and what the renderer had drawn (restored on reset).
  let state = new Uint8Array(0);
  let drawnX = new Float64Array(0);
  let drawnW = new Float64Array(0);
  const moved = new Map();
  let zoomed = -1;

  // The search: its pattern, its regular expression, and which frames match.
  let pattern = "";
  let regex = null;
  let matches = new Uint8Array(0);
  let searchBox = null;
  let searchInput = null;
  let typingTimer = 0;

  let unzoomButton = null;
  let searchButton = null;
  let matchedText = null;
  let detailsText = null;

  function number(value, fallback) {
    const parsed = parseFloat(value);
    return Number.isFinite(parsed) ? parsed : fallback;
  }

  // Two decimals are finer than any screen and keep attribute strings short.
  function round(value) {
    return Math.round(value * 100) / 100;
  }

  function setText(element, text) {
    if (element && element.textContent !== text) element.textContent = text;
  }

  function childByName(element, localName) {
    for (let child = element.firstElementChild; child; child = child.nextElementSibling) {
      if (child.localName === localName) return child;
    }
    return null;
  }

  // name, cut to `chars` characters (code points, as svg.cpp counts them) with "..".
  function cut(name, chars) {
    if (chars < 3) return "";
    if (name.length <= chars) return name;
    let end = 0;
    let seen = 0;
    for (let i = 0; i < name.length; seen++) {
      if (seen === chars - 2) end = i;
      if (seen === chars) return name.slice(0, end) + "..";
      const unit = name.charCodeAt(i);
      const pair = unit >= 0xd800 && unit <= 0xdbff && i + 1 < name.length;
      i += pair ? 2 : 1;
    }
    return name;
  }

  function labelFor(name, pixels) {
    return cut(name, Math.floor((pixels - 2 * LABEL_PAD) / CHAR_WIDTH));
  }

  function init() {
    const started = performance.now();
    svg = script && script.closest ? script.closest("svg") : document.documentElement;
    if (!svg || svg.namespaceURI !== SVG_NS) return;
    total = Math.max(0, number(svg.getAttribute("data-total"), 0));
    diff = svg.getAttribute("data-mode") === "diff";
    const inverted = svg.getAttribute("data-inverted") === "1";
    const frameHeight = number(svg.getAttribute("data-frame-height"), 16) || 16;
    const viewBox = (svg.getAttribute("viewBox") || "").trim().split(/[\s,]+/);
    width = number(svg.getAttribute("width"), number(viewBox[2], 0));
    padLeft = number(svg.getAttribute("data-pad-left"), 10);
    plotWidth = Math.max(0, width - 2 * padLeft);
    unzoomButton = svg.querySelector("#unzoom");
    searchButton = svg.querySelector("#search");
    matchedText = svg.querySelector("#matched");
    detailsText = svg.querySelector("#details");

    const container = svg.querySelector("#frames");
    if (container) {
      for (let g = container.firstElementChild; g; g = g.nextElementSibling) {
        if (g.localName === "g" && g.classList.contains("f")) frames.push(g);
      }
    }
    count = frames.length;
    fx = new Float64Array(count);
    fw = new Float64Array(count);
    fd = new Int32Array(count);
    titled = new Uint8Array(count);
    state = new Uint8Array(count);
    matches = new Uint8Array(count);
    drawnX = new Float64Array(count);
    drawnW = new Float64Array(count);
    const scale = total > 0 ? plotWidth / total : 0;
    // next[d]: the first sample of the next frame at depth d, right of its latest sibling.
    const next = [0];
    let rootY = 0;
    for (let i = 0; i < count; i++) {
      const g = frames[i];
      const rect = childByName(g, "rect");
      const y = rect ? number(rect.getAttribute("y"), 0) : 0;
      if (i === 0) rootY = y;
      const d = Math.max(0, Math.round((inverted ? y - rootY : rootY - y) / frameHeight));
      fw[i] = number(g.getAttribute("data-w"), 0);
      fd[i] = d;
      fx[i] = d === 0 ? 0 : next[d] || 0;
      next[d] = fx[i] + fw[i];
      next[d + 1] = fx[i];
      names.push(g.getAttribute("data-n") || "");
      indexOf.set(g, i);
      if (d === 0 && root < 0) root = i;
      drawnX[i] = round(padLeft + fx[i] * scale);
      drawnW[i] = round(fw[i] * scale);
    }
    if (root >= 0 && total === 0) drawnW[root] = round(plotWidth);

    if (container) {
      container.addEventListener("mouseover", onOver);
      container.addEventListener("mouseout", onOut);
      container.addEventListener("click", onClick);
    }
    if (unzoomButton) unzoomButton.addEventListener("click", () => zoom(-1));
    if (searchButton) searchButton.addEventListener("click", onSearchButton);
    document.addEventListener("keydown", onKey);

    let initial = null;
    try {
      initial = new URLSearchParams(window.location.search).get("s");
    } catch {
      // No usable location (an embedding that hides it): no search from the URL.
    }
    if (initial) search(initial);

    window.flamebpf = Object.freeze({
      frames: count,
      initMs: performance.now() - started,
    });
  }

  function frameOf(target) {
    const g = target && target.closest ? target.closest("g.f") : null;
    const i = g ? indexOf.get(g) : undefined;
    return i === undefined ? -1 : i;
  }

  // value as text, with its sign also when positive.
  const signed = (value, text = String(value)) => (value < 0 ? text : "+" + text);

  // What a frame's tooltip says after its name: " (SAMPLES samples, P%)", or in a differential
  // graph " (before B, after A, +DELTA, +P%)" ("new" where there was nothing before).
  function counts(i) {
    const g = frames[i];
    if (diff) {
      const before = number(g.getAttribute("data-b"), 0);
      const after = number(g.getAttribute("data-a"), 0);
      const delta = after - before;
      const percent = (100 * delta) / before;
      const change = before === 0 ? "new" : signed(percent, percent.toFixed(1)) + "%";
      return ` (before ${before}, after ${after}, ${signed(delta)}, ${change})`;
    }
    const share = total > 0 ? (100 * fw[i]) / total : 0;
    return ` (${fw[i]} samples, ${share.toFixed(2)}%)`;
  }

  // The frame's tooltip (its <title>, made on the first hover), and "Function: NAME (counts)" in
  // the details line, where an overlong name is cut so that the counts at the end still show.
  function onOver(event) {
    const i = frameOf(event.target);
    if (i < 0) return;
    const name = names[i];
    const tail = counts(i);
    if (!titled[i]) {
      const title = document.createElementNS(SVG_NS, "title");
      title.textContent = name + tail;
      frames[i].insertBefore(title, frames[i].firstChild);
      titled[i] = 1;
    }
    const prefix = "Function: ";
    const room = Math.floor((width - 130) / CHAR_WIDTH) - prefix.length - tail.length;
    setText(detailsText, prefix + cut(name, Math.max(room, 12)) + tail);
  }

  function onOut(event) {
    const i = frameOf(event.target);
    if (i >= 0 && frameOf(event.relatedTarget) !== i) setText(detailsText, " ");
  }

  function onClick(event) {
    const i = frameOf(event.target);
    if (i >= 0) zoom(i);
  }

  function setState(i, bits) {
    const was = state[i];
    if (was === bits) return;
    const classes = frames[i].classList;
    if ((was ^ bits) & HIDDEN) classes.toggle("hide", (bits & HIDDEN) !== 0);
    if ((was ^ bits) & ANCESTOR) classes.toggle("ancestor", (bits & ANCESTOR) !== 0);
    state[i] = bits;
  }

  // Draws frame i at pixel x and width, with the label that fits.
  function place(i, x, w) {
    x = round(x);
    w = round(w);
    if (drawnX[i] === x && drawnW[i] === w) return;
    const g = frames[i];
    let m = moved.get(i);
    if (!m) {
      const rect = childByName(g, "rect");
      if (!rect) return;
      const text = childByName(g, "text");
      m = {
        rect: rect,
        text: text,
        x: rect.getAttribute("x"),
        width: rect.getAttribute("width"),
        textX: text ? text.getAttribute("x") : null,
        label: text ? text.textContent : "",
      };
      moved.set(i, m);
    }
    m.rect.setAttribute("x", String(x));
    m.rect.setAttribute("width", String(w));
    const label = labelFor(names[i], w);
    if (label && !m.text) {
      m.text = document.createElementNS(SVG_NS, "text");
      const y = number(m.rect.getAttribute("y"), 0) + 10.5;
      m.text.setAttribute("y", String(round(y)));
      g.appendChild(m.text);
    }
    if (m.text) {
      if (label) m.text.setAttribute("x", String(round(x + LABEL_PAD)));
      setText(m.text, label);
    }
    drawnX[i] = x;
    drawnW[i] = w;
  }

  // Puts back what the renderer drew for every frame the script has moved.
  function restoreAll() {
    const scale = total > 0 ? plotWidth / total : 0;
    for (const [i, m] of moved) {
      m.rect.setAttribute("x", m.x);
      m.rect.setAttribute("width", m.width);
      if (m.text && m.textX === null) {
        m.text.remove();
      } else if (m.text) {
        m.text.setAttribute("x", m.textX);
        setText(m.text, m.label);
      }
      drawnX[i] = round(padLeft + fx[i] * scale);
      drawnW[i] = round(i === root && total === 0 ? plotWidth : fw[i] * scale);
    }
    moved.clear();
  }

  // Zooms to frame i (-1 or the root: everything): i spans the full width, its descendants
  // scale with it, its ancestors stay full-width and dimmed, every other frame hides.
  function zoom(i) {
    if (i === root) i = -1;
    if (i >= 0 && !(fw[i] > 0)) return;
    if (i === zoomed) return;
    zoomed = i;
    if (i < 0) {
      for (let k = 0; k < count; k++) setState(k, 0);
      restoreAll();
    } else {
      const left = fx[i];
      const right = left + fw[i];
      const depth = fd[i];
      const scale = plotWidth / fw[i];
      for (let k = 0; k < count; k++) {
        const d = fd[k];
        const x = fx[k];
        let bits;
        if (k === i) {
          bits = 0;
        } else if (d < depth) {
          bits = x <= left && x + fw[k] >= right ? ANCESTOR : HIDDEN;
        } else {
          bits = d > depth && x >= left && x + fw[k] <= right ? 0 : HIDDEN;
        }
        setState(k, bits);
        if (bits & HIDDEN) continue;
        if (bits & ANCESTOR || k === i) {
          place(k, padLeft, plotWidth);
        } else {
          place(k, padLeft + (x - left) * scale, fw[k] * scale);
        }
      }
    }
    if (unzoomButton) unzoomButton.classList.toggle("hide", zoomed < 0);
    showMatched();
  }

  // Matched share of the zoomed frame (of everything when not zoomed): the union of the matching
  // frames' sample ranges, so that a match below a match counts once.
  function showMatched() {
    if (!regex) {
      setText(matchedText, " ");
      return;
    }
    const left = zoomed >= 0 ? fx[zoomed] : 0;
    const right = zoomed >= 0 ? fx[zoomed] + fw[zoomed] : total;
    const ranges = [];
    for (let k = 0; k < count; k++) {
      if (!matches[k]) continue;
      const from = Math.max(fx[k], left);
      const to = Math.min(fx[k] + fw[k], right);
      if (to > from) ranges.push([from, to]);
    }
    ranges.sort((a, b) => a[0] - b[0]);
    let covered = 0;
    let end = -Infinity;
    for (const [from, to] of ranges) {
      if (to <= end) continue;
      covered += to - Math.max(from, end);
      end = to;
    }
    const share = right > left ? (100 * covered) / (right - left) : 0;
    const shown = share === 0 || share >= 1 ? share.toFixed(1) : share.toPrecision(2);
    setText(matchedText, "Matched: " + shown + "%");
  }

  // Highlights the frames whose names match `text`, a regular expression ("(?i)" in front: any
  // case); empty clears. Returns false, changing nothing, if text is no regular expression.
  function search(text) {
    text = String(text || "");
    let compiled = null;
    if (text) {
      const caseless = text.startsWith("(?i)");
      try {
        compiled = new RegExp(caseless ? text.slice(4) : text, caseless ? "iu" : "u");
      } catch {
        try {
          compiled = new RegExp(caseless ? text.slice(4) : text, caseless ? "i" : "");
        } catch {
          setText(matchedText, "Invalid regular expression");
          return false;
        }
      }
    }
    pattern = text;
    regex = compiled;
    for (let k = 0; k < count; k++) {
      const hit = compiled !== null && compiled.test(names[k]) ? 1 : 0;
      if (hit !== matches[k]) {
        matches[k] = hit;
        frames[k].classList.toggle("match", hit === 1);
      }
    }
    setText(searchButton, regex ? "Reset Search" : "Search");
    showMatched();
    return true;
  }

  function onSearchButton() {
    if (regex) {
      closeSearch();
      search("");
    } else if (searchBox && !searchBox.classList.contains("hide")) {
      closeSearch();
    } else {
      openSearch();
    }
  }

  // The search field: an HTML input in a foreignObject, made on first use, left of "Search".
  function openSearch() {
    if (!svg) return;
    if (!searchBox) {
      const boxWidth = 240;
      const right = searchButton ? number(searchButton.getAttribute("x"), width - 110) : width - 110;
      searchBox = document.createElementNS(SVG_NS, "foreignObject");
      searchBox.setAttribute("id", "searchbox");
      searchBox.setAttribute("x", String(Math.max(0, right - boxWidth - 8)));
      searchBox.setAttribute("y", "9");
      searchBox.setAttribute("width", String(boxWidth));
      searchBox.setAttribute("height", "22");
      searchInput = document.createElementNS(XHTML_NS, "input");
      searchInput.setAttribute("type", "text");
      searchInput.setAttribute("placeholder", "regex · Enter · Esc");
      searchInput.setAttribute("aria-label", "Search frames by regular expression");
      searchInput.setAttribute("spellcheck", "false");
      searchInput.setAttribute("autocomplete", "off");
      searchInput.addEventListener("keydown", onSearchKey);
      searchInput.addEventListener("input", onSearchInput);
      searchBox.appendChild(searchInput);
      svg.appendChild(searchBox);
    }
    searchBox.classList.remove("hide");
    searchInput.value = pattern;
    searchInput.classList.remove("invalid");
    searchInput.focus();
    searchInput.select();
  }

  function closeSearch() {
    if (!searchBox) return;
    clearTimeout(typingTimer);
    searchBox.classList.add("hide");
    searchInput.blur();
    showMatched(); // in place of an invalid-regex message
  }

  // Searches as one types, once typing pauses.
  function onSearchInput() {
    clearTimeout(typingTimer);
    typingTimer = setTimeout(() => {
      searchInput.classList.toggle("invalid", !search(searchInput.value));
    }, 150);
  }

  function onSearchKey(event) {
    event.stopPropagation();
    if (event.key === "Enter") {
      event.preventDefault();
      clearTimeout(typingTimer);
      const valid = search(searchInput.value);
      searchInput.classList.toggle("invalid", !valid);
      if (valid) closeSearch();
    } else if (event.key === "Escape") {
      event.preventDefault();
      closeSearch();
    } else if (isFind(event)) {
      event.preventDefault();
      searchInput.select();
    }
  }

  function isFind(event) {
    return (event.ctrlKey || event.metaKey) && !event.altKey && (event.key === "f" || event.key === "F");
  }

  // Ctrl-F (Cmd-F) and "/" open the search instead of the browser's find; Escape undoes the zoom,
  // or when not zoomed, the search.
  function onKey(event) {
    if (event.defaultPrevented) return;
    const plain = !event.ctrlKey && !event.metaKey && !event.altKey;
    if (isFind(event) || (plain && event.key === "/")) {
      event.preventDefault();
      openSearch();
    } else if (plain && event.key === "Escape") {
      if (zoomed >= 0) zoom(-1);
      else if (regex) search("");
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
