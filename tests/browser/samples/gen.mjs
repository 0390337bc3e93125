// Writes flame graph SVGs by hand, following the document contract of emit/svg.cpp, with the
// current userspace/src/emit/res/flamegraph.{js,css} embedded: samples for developing and testing
// the script without the C++ renderer.
//
// Usage: node samples/gen.mjs OUTDIR             small.svg diff.svg inverted.svg empty.svg
//        node samples/gen.mjs OUTDIR --large [N]  large.svg: a random profile of about N drawn
//                                                 frames (default 50000), the same for every run
//        node samples/gen.mjs OUTDIR --folded     small.folded, before.folded, after.folded: the
//                                                 stacks of small.svg and diff.svg, for drawing
//                                                 them with the real renderer (flamebpf render/diff)
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const resDir = join(here, "../../../userspace/src/emit/res");

// The renderer's geometry (svg.cpp).
const kFrameHeight = 16;
const kRectHeight = 15;
const kPadLeft = 10;
const kPadTop = 60;
const kPadBottom = 26;
const kCharWidth = 0.59 * 12;
const kMaxNameBytes = 2048;
const kMinFrameWidth = 0.1;

// XML-safe text: markup escaped, characters XML cannot carry replaced, cut at maxBytes of UTF-8.
function xmlText(text, maxBytes = kMaxNameBytes) {
  let out = "";
  let bytes = 0;
  for (const ch of text) {
    if (bytes >= maxBytes) return out + "\u2026";
    const cp = ch.codePointAt(0);
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    const bad = (cp < 0x20 && cp !== 9) || (cp >= 0xd800 && cp <= 0xdfff) || cp === 0xfffe || cp === 0xffff;
    if (bad) out += "\ufffd";
    else if (ch === "&") out += "&amp;";
    else if (ch === "<") out += "&lt;";
    else if (ch === ">") out += "&gt;";
    else if (ch === '"') out += "&quot;";
    else if (ch === "'") out += "&apos;";
    else if (ch === "\t") out += " ";
    else out += ch;
  }
  return out;
}

function frameLabel(name, widthPx) {
  const fits = Math.floor(Math.max(0, (widthPx - 6) / kCharWidth));
  if (fits < 3) return "";
  // 2 * fits + 2 code units hold more than `fits` characters whenever the name has that many.
  const head = Array.from(name.slice(0, 2 * fits + 2));
  if (head.length <= fits) return name;
  return head.slice(0, fits - 2).join("") + "..";
}

// Pixels to a tenth, without a trailing ".0".
const pixels = (v) => String(Math.round(v * 10) / 10);
const hex = (r, g, b) => "#" + [r, g, b].map((c) => c.toString(16).padStart(2, "0")).join("");

function hash(text) {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0;
  return h;
}

function hotColour(name) {
  const h = hash(name);
  return hex(205 + (h % 50), (h >>> 8) % 230, (h >>> 16) % 55);
}

function diffColour(delta, maxDelta) {
  if (delta === 0 || maxDelta === 0) return hex(250, 250, 250);
  const shade = Math.round(210 * (1 - Math.abs(delta) / maxDelta));
  return delta > 0 ? hex(255, shade, shade) : hex(shade, shade, 255);
}

class Node {
  constructor(name, depth) {
    this.name = name;
    this.depth = depth;
    this.samples = [0, 0]; // before, after
    this.children = new Map();
  }
}

// A tree from [frames, after, before] stacks.
function buildTree(stacks) {
  const root = new Node("all", 0);
  for (const [frames, after, before = 0] of stacks) {
    let node = root;
    node.samples[0] += before;
    node.samples[1] += after;
    for (const name of frames) {
      let child = node.children.get(name);
      if (!child) node.children.set(name, (child = new Node(name, node.depth + 1)));
      child.samples[0] += before;
      child.samples[1] += after;
      node = child;
    }
  }
  return root;
}

function svgDocument(root, { title, subtitle, inverted = false, diff = false, width = 1200 }) {
  const total = root.samples[1];
  const drawable = width - 2 * kPadLeft;
  const minSamples = Math.max(1, Math.ceil((total * kMinFrameWidth) / drawable));
  const drawn = [];
  const pending = [[root, 0]];
  let maxDepth = 0;
  let maxDelta = 0;
  while (pending.length) {
    const [node, x] = pending.pop();
    drawn.push([node, x]);
    maxDepth = Math.max(maxDepth, node.depth);
    maxDelta = Math.max(maxDelta, Math.abs(node.samples[1] - node.samples[0]));
    const children = [...node.children.values()]
      .filter((c) => c.samples[1] >= minSamples)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    let cx = x;
    const placed = children.map((c) => {
      const at = [c, cx];
      cx += c.samples[1];
      return at;
    });
    pending.push(...placed.reverse());
  }
  const height = kPadTop + (maxDepth + 1) * kFrameHeight + kPadBottom;
  // Each frame's colour as a palette class, c0, c1, … in order of first use.
  const swatches = new Map();
  const swatchOf = (colour) => {
    if (!swatches.has(colour)) swatches.set(colour, swatches.size);
    return swatches.get(colour);
  };
  const body = [];
  const scale = total > 0 ? drawable / total : 0;
  for (const [node, x] of drawn) {
    const samples = node.samples[1];
    const px = kPadLeft + x * scale;
    const pw = node === root && total === 0 ? drawable : samples * scale;
    const py = inverted
      ? kPadTop + node.depth * kFrameHeight
      : height - kPadBottom - (node.depth + 1) * kFrameHeight;
    const [before, after] = node.samples;
    const colour = diff
      ? diffColour(after - before, maxDelta)
      : node === root
        ? hex(200, 200, 200)
        : hotColour(node.name);
    const counts = diff ? ` data-b="${before}" data-a="${after}"` : "";
    let g =
      `<g class="f c${swatchOf(colour)}" data-w="${samples}"${counts} data-n="${xmlText(node.name)}">` +
      `<rect x="${pixels(px)}" y="${pixels(py)}" width="${pixels(pw)}" height="${kRectHeight}"/>`;
    const label = frameLabel(node.name, pw);
    if (label) g += `<text x="${pixels(px + 3)}" y="${pixels(py + 10.5)}">${xmlText(label)}</text>`;
    body.push(g + "</g>\n");
  }
  const palette = [...swatches].map(([colour, i]) => `.c${i}{fill:${colour}}\n`).join("");
  const script = readFileSync(join(resDir, "flamegraph.js"), "utf8");
  const style = readFileSync(join(resDir, "flamegraph.css"), "utf8");
  if (script.includes("]]>") || style.includes("]]>")) throw new Error("res file contains ]]>");
  const out = [];
  out.push(
    `<?xml version="1.0" standalone="no"?>\n` +
      `<svg version="1.1" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
      `xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" ` +
      `data-total="${total}" data-mode="${diff ? "diff" : "normal"}" data-inverted="${inverted ? 1 : 0}" ` +
      `data-frame-height="${kFrameHeight}" data-pad-left="${kPadLeft}" data-pad-top="${kPadTop}">\n` +
      `<style type="text/css"><![CDATA[\n${style}${palette}]]></style>\n` +
      `<script type="text/ecmascript"><![CDATA[\n${script}]]></script>\n` +
      `<rect class="background" x="0" y="0" width="${width}" height="${height}"/>\n` +
      `<text id="title" x="${width / 2}" y="24">${xmlText(title)}</text>\n` +
      `<text id="subtitle" x="${width / 2}" y="42">${xmlText(subtitle)}</text>\n` +
      `<text id="unzoom" class="hide" x="${kPadLeft}" y="24">Reset Zoom</text>\n` +
      `<text id="search" x="${width - 110}" y="24">Search</text>\n` +
      `<text id="matched" x="${width - 110}" y="${height - 8}"> </text>\n` +
      `<text id="details" x="${kPadLeft}" y="${height - 8}"> </text>\n` +
      `<g id="frames">\n`,
  );
  out.push(...body);
  out.push("</g>\n</svg>\n");
  return { text: out.join(""), frames: drawn.length };
}

const split = (folded) => folded.split(";");

// Names an attacker could give a frame (a process, a JIT-compiled method, a perf map entry).
const kHostile = [
  "</text><script>window.__pwned=1</script>",
  '<img src=x onerror="window.__pwned=2">',
  'a&b<c>"\'',
  '" onmouseover="window.__pwned=3" x="',
  "]]><script>window.__pwned=4</script><![CDATA[",
  "java.util.Map<K,V>.get",
  "Foo$$Lambda$14/0x0000000800c03000.apply",
  "日本語 ünïcödé 😀 \u202eRTL",
  "tab\tand control\u0001chars",
  "<svg onload=window.__pwned=5>" + "X".repeat(200000),
];

const kSmallStacks = [
  ["main;run;compute;hash", 300],
  ["main;run;compute;sort;compare", 200],
  ["main;run;compute;sort", 40],
  ["main;run;recurse;recurse;recurse;recurse;leaf", 90],
  ["main;run;recurse;recurse;leaf", 30],
  ["main;run;recurse;hash", 25],
  ["main;run;io;read", 120],
  ["main;run;io;write", 80],
  ["main;run", 15],
  [`main;${kHostile[0]};leaf`, 150],
  [`main;${kHostile[1]};${kHostile[2]}`, 90],
  [`main;${kHostile[3]};${kHostile[5]}`, 70],
  [`main;${kHostile[6]};${kHostile[4]}`, 60],
  [`main;${kHostile[7]};hash`, 50],
  [`main;${kHostile[9]}`, 40],
  ["kworker/0:1;worker_thread;process_one_work;hash", 100],
  [`kworker/0:1;${kHostile[8]}`, 30],
].map(([stack, n]) => [split(stack), n]);

const kSubtitle = "target web \u00b7 2026-11-22 10:00:00\u201310:01:00 UTC \u00b7 99 Hz";

// Before and after: compute got slower, io faster, one function is new, one is gone.
function diffStacks() {
  const changed = kSmallStacks.map(([frames, n]) => {
    const name = frames.join(";");
    const after = name.includes("compute") ? Math.round(n * 1.5) : name.includes(";io;") ? Math.round(n / 2) : n;
    return [frames, after, n];
  });
  changed.push([split("main;run;compute;newly_added"), 60, 0]);
  changed.push([split("main;run;gone_after"), 0, 50]);
  return changed;
}

function folded(out) {
  const lines = (stacks, column) =>
    stacks.filter((s) => s[column] > 0).map((s) => `${s[0].join(";")} ${s[column]}\n`).join("");
  writeFileSync(join(out, "small.folded"), lines(kSmallStacks, 1));
  writeFileSync(join(out, "before.folded"), lines(diffStacks(), 2));
  writeFileSync(join(out, "after.folded"), lines(diffStacks(), 1));
  console.log("small.folded before.folded after.folded");
}

function small(out) {
  const tree = buildTree(kSmallStacks);
  const subtitle = `${kSubtitle} \u00b7 ${tree.samples[1]} samples`;
  const write = (file, options) => {
    const { text, frames } = svgDocument(buildTree(kSmallStacks), { subtitle, ...options });
    writeFileSync(join(out, file), text);
    console.log(`${file}: ${frames} frames`);
  };
  write("small.svg", { title: "Flame Graph <with & hostile names>" });
  write("inverted.svg", { title: "Icicle Graph", inverted: true });

  // Before and after: compute got slower, io faster, one function is new.
  const { text, frames } = svgDocument(buildTree(diffStacks()), {
    title: "Differential Flame Graph",
    subtitle: "before: 1.folded \u00b7 after: 2.folded",
    diff: true,
  });
  writeFileSync(join(out, "diff.svg"), text);
  console.log(`diff.svg: ${frames} frames`);

  const empty = svgDocument(buildTree([]), { title: "Flame Graph", subtitle: "0 samples" });
  writeFileSync(join(out, "empty.svg"), empty.text);
  console.log(`empty.svg: ${empty.frames} frames`);
}

// A deterministic pseudo-random profile: a few processes, call chains from a vocabulary where
// each caller has a handful of likely callees, some recursion, weights with a long tail.
function large(out, targetFrames) {
  let seed = 12345;
  const random = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 4294967296;
  };
  const vocabulary = [];
  const packages = ["net.http", "db.sql", "util", "runtime", "io", "crypto", "json", "cache"];
  for (let i = 0; i < 3000; i++) {
    const pkg = packages[i % packages.length];
    vocabulary.push(i % 5 === 0 ? `${pkg}.Handler<T>::method_${i}` : `${pkg}::fn_${i}`);
  }
  const processes = ["java", "nginx", "postgres", "python3", "node", "kworker/u8:2"];
  const stacks = [];
  const frameCount = (stacksSoFar) => {
    const root = buildTree(stacksSoFar);
    const total = root.samples[1];
    const min = Math.max(1, Math.ceil((total * kMinFrameWidth) / 1180));
    let n = 0;
    const walk = (node) => {
      n++;
      for (const c of node.children.values()) if (c.samples[1] >= min) walk(c);
    };
    walk(root);
    return n;
  };
  let batch = 2000;
  for (;;) {
    for (let s = 0; s < batch; s++) {
      const depth = 4 + Math.floor(Math.pow(random(), 0.8) * 60);
      const frames = [processes[Math.floor(Math.pow(random(), 2) * processes.length)]];
      let current = hash(frames[0]);
      for (let d = 1; d < depth; d++) {
        const choice = Math.floor(Math.pow(random(), 2.5) * 12);
        current = (Math.imul(current ^ (choice + 1), 2654435761) >>> 0) % vocabulary.length;
        frames.push(vocabulary[current]);
      }
      stacks.push([frames, 1 + Math.floor(Math.pow(random(), 6) * 500)]);
    }
    const n = frameCount(stacks);
    if (n >= targetFrames) break;
    batch = Math.max(200, Math.ceil(((targetFrames - n) / Math.max(n, 1)) * stacks.length * 0.8));
  }
  const tree = buildTree(stacks);
  const { text, frames } = svgDocument(tree, {
    title: "Flame Graph (large)",
    subtitle: `${kSubtitle} \u00b7 ${tree.samples[1]} samples`,
  });
  writeFileSync(join(out, "large.svg"), text);
  console.log(`large.svg: ${frames} frames, ${(text.length / 1e6).toFixed(1)} MB`);
}

const [outDir, flag, count] = process.argv.slice(2);
if (!outDir) {
  console.error("usage: node samples/gen.mjs OUTDIR [--large [FRAMES] | --folded]");
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });
if (flag === "--large") large(outDir, Number(count || 50000));
else if (flag === "--folded") folded(outDir);
else small(outDir);
