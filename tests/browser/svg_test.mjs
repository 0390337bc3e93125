// Headless-Chromium test of one flamebpf flame graph SVG: opens it as file://, then hovers,
// zooms, resets, searches (Ctrl-F, "/", ?s=), tries an invalid regex and checks hostile frame names
// show literally and run nothing. Expectations are computed here from the document (each frame's
// samples, name and rectangle, parents first), independently of the page's script. Prints one line per check and "N passed, N failed, N
// skipped"; exits 0 only if nothing failed.
//
// Usage: node svg_test.mjs SVG [ARTIFACT_DIR] [--search NAME]
//   ARTIFACT_DIR (default: the current directory) receives flamegraph.png, zoomed.png, search.png.
//   CHROMIUM overrides the browser (default /usr/bin/chromium).
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";
import { check, info, kChromiumArgs, runChecks, skip, watchedPage } from "./checks.mjs";

const kCharWidth = 0.59 * 12;
const kFrames = "#frames > g.f";

const near = (a, b, tolerance = 0.5) => Math.abs(a - b) <= tolerance;
const escapeRegex = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const codePoints = (text) => Array.from(text).length;
const normalFill = (fill) => String(fill).replace(/\s+/g, "").toLowerCase();

function parseArgs(argv) {
  const args = { svg: null, out: ".", search: null };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--search") args.search = argv[++i];
    else rest.push(argv[i]);
  }
  if (rest.length < 1 || rest.length > 2) {
    console.error("usage: node svg_test.mjs SVG [ARTIFACT_DIR] [--search NAME]");
    process.exit(2);
  }
  args.svg = resolve(rest[0]);
  if (rest[1]) args.out = resolve(rest[1]);
  return args;
}

// The <svg> element's size, read from the file so the viewport can match it before loading.
function svgSize(source) {
  const head = source.slice(0, 4096);
  const tag = head.match(/<svg\b[^>]*>/);
  const attr = (name) => Number((tag?.[0].match(new RegExp(`\\s${name}="([^"]*)"`)) || [])[1]);
  return { width: attr("width") || 1200, height: attr("height") || 800 };
}

// Each frame's depth (from its rectangle's y, 16 pixels a level from the root's) and first sample:
// frames come parents first, each frame's children left to right right after it.
function layOut(frames, inverted, frameHeight) {
  const rootY = frames.length ? frames[0].y : 0;
  const nextAt = [];
  for (const f of frames) {
    f.d = Math.round((inverted ? f.y - rootY : rootY - f.y) / frameHeight);
    f.x = f.d === 0 ? 0 : nextAt[f.d];
    nextAt[f.d] = f.x + f.w;
    nextAt[f.d + 1] = f.x;
  }
}

// What a frame's tooltip says: " (N samples, P%)" after the name, or in a differential graph
// " (before B, after A, +D, +P%)".
function expectedTitle(f, total, diff) {
  if (!diff) return `${f.n} (${f.w} samples, ${(total > 0 ? (100 * f.w) / total : 0).toFixed(2)}%)`;
  const delta = f.a - f.b;
  const percent = (100 * delta) / f.b;
  const change = f.b === 0 ? "new" : `${percent < 0 ? "" : "+"}${percent.toFixed(1)}%`;
  return `${f.n} (before ${f.b}, after ${f.a}, ${delta < 0 ? "" : "+"}${delta}, ${change})`;
}

// "#rrggbb" as getComputedStyle writes it.
function cssRgb(hex) {
  const [r, g, b] = [1, 3, 5].map((at) => parseInt(hex.slice(at, at + 2), 16));
  return `rgb(${r}, ${g}, ${b})`;
}

// Parents from the layout alone: the frame one level up whose sample range holds the frame's
// first sample.
function linkParents(frames) {
  const byDepth = new Map();
  frames.forEach((f, i) => {
    if (!byDepth.has(f.d)) byDepth.set(f.d, []);
    byDepth.get(f.d).push(i);
  });
  for (const list of byDepth.values()) list.sort((a, b) => frames[a].x - frames[b].x);
  for (const f of frames) {
    f.parent = -1;
    const above = byDepth.get(f.d - 1);
    if (!above) continue;
    let lo = 0;
    let hi = above.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const p = frames[above[mid]];
      if (p.x + p.w <= f.x && !(p.w === 0 && p.x === f.x)) lo = mid + 1;
      else if (p.x > f.x) hi = mid - 1;
      else {
        f.parent = above[mid];
        break;
      }
    }
  }
}

function ancestors(frames, i) {
  const out = [];
  for (let p = frames[i].parent; p >= 0; p = frames[p].parent) out.push(p);
  return out;
}

function isDescendant(frames, i, of) {
  for (let p = frames[i].parent; p >= 0; p = frames[p].parent) if (p === of) return true;
  return false;
}

// Share in percent of `within` (the root when -1) that frames matching re cover, each sample
// once: the topmost matching frames, or everything if `within` or one of its ancestors matches.
function expectedShare(frames, re, within, total) {
  const hit = frames.map((f) => re.test(f.n));
  if (within >= 0 && (hit[within] || ancestors(frames, within).some((a) => hit[a]))) return 100;
  const base = within >= 0 ? frames[within].w : total;
  let covered = 0;
  frames.forEach((f, i) => {
    if (!hit[i] || ancestors(frames, i).some((a) => hit[a])) return;
    if (within < 0 || isDescendant(frames, i, within)) covered += f.w;
  });
  return base > 0 ? (100 * covered) / base : 0;
}

// "Matched: P%": P and half a unit of its last digit.
function shownShare(text) {
  const m = /Matched:\s*([0-9]+(?:\.([0-9]+))?)%/.exec(text || "");
  if (!m) return null;
  return { value: Number(m[1]), tolerance: 0.5 * 10 ** -(m[2] ? m[2].length : 0) + 1e-9 };
}

// Everything the checks look at, per frame: shown, rect x and width, label, fills.
function snapshot(page) {
  return page.evaluate((selector) => {
    // checkVisibility() does not see display: none on SVG elements in Chromium 156.
    const shown = (e) => {
      for (; e && e.nodeType === 1; e = e.parentNode) if (getComputedStyle(e).display === "none") return false;
      return true;
    };
    return Array.from(document.querySelectorAll(selector), (g) => {
      const rect = g.querySelector("rect");
      const text = g.querySelector("text");
      return {
        shown: shown(g),
        x: rect.getAttribute("x"),
        width: rect.getAttribute("width"),
        label: text ? text.textContent : null,
        computedFill: getComputedStyle(rect).fill,
        classes: g.getAttribute("class"),
      };
    });
  }, kFrames);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  mkdirSync(args.out, { recursive: true });
  const source = readFileSync(args.svg, "utf8");
  const size = svgSize(source);
  const embedded = /<script[^>]*><!\[CDATA\[\n?([\s\S]*?)\]\]><\/script>/.exec(source)?.[1];
  const current = readFileSync(new URL("../../userspace/src/emit/res/flamegraph.js", import.meta.url), "utf8");
  info(`embedded script ${embedded === current ? "is" : "differs from"} userspace/src/emit/res/flamegraph.js`);
  const viewport = { width: Math.ceil(size.width), height: Math.min(Math.ceil(size.height), 4000) };
  const profileDir = mkdtempSync(join(tmpdir(), "flamebpf-chromium-"));
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: kChromiumArgs,
    viewport,
    deviceScaleFactor: 1,
    offline: true,
  });
  try {
    await run(context, args, viewport, source);
  } finally {
    await context.close();
    rmSync(profileDir, { recursive: true, force: true });
  }
}

async function run(context, args, viewport, source) {
  const { page, errors, foreign: requests } = await watchedPage(
    context, (url) => url.startsWith("file:"), 20000);

  const url = pathToFileURL(args.svg).href;
  const started = Date.now();
  await page.goto(url, { waitUntil: "load", timeout: 120000 });
  await page.waitForFunction(() => window.flamebpf !== undefined, null, { timeout: 60000 }).catch(() => {});
  const loaded = await page.evaluate(
    () =>
      new Promise((done) =>
        requestAnimationFrame(() =>
          setTimeout(() => {
            const nav = performance.getEntriesByType("navigation")[0];
            done({
              ready: window.flamebpf !== undefined,
              frames: window.flamebpf ? window.flamebpf.frames : -1,
              initMs: window.flamebpf ? window.flamebpf.initMs : -1,
              domMs: nav ? nav.domContentLoadedEventEnd : -1,
              loadMs: nav ? nav.loadEventEnd : -1,
              paintedMs: performance.now(),
            });
          }, 0),
        ),
      ),
  );
  const wallMs = Date.now() - started;

  const doc = await page.evaluate((selector) => {
    const svg = document.documentElement;
    const num = (e, a) => parseFloat(e.getAttribute(a));
    return {
      width: num(svg, "width"),
      total: num(svg, "data-total"),
      padLeft: num(svg, "data-pad-left"),
      frameHeight: num(svg, "data-frame-height"),
      inverted: svg.getAttribute("data-inverted") === "1",
      diff: svg.getAttribute("data-mode") === "diff",
      frames: Array.from(document.querySelectorAll(selector), (g) => ({
        w: num(g, "data-w"),
        b: num(g, "data-b"),
        a: num(g, "data-a"),
        y: num(g.querySelector("rect"), "y"),
        n: g.getAttribute("data-n"),
        titled: g.querySelector("title") !== null,
      })),
    };
  }, kFrames);
  const { frames, total, padLeft } = doc;
  const plot = doc.width - 2 * padLeft;
  layOut(frames, doc.inverted, doc.frameHeight);
  linkParents(frames);
  frames.forEach((f) => (f.title = expectedTitle(f, total, doc.diff)));

  check("loads without console or page errors", errors.length === 0, errors.join(" | "));
  check("script initialised", loaded.ready && loaded.frames === frames.length,
        `window.flamebpf ${loaded.ready ? `counts ${loaded.frames}` : "missing"}, ${frames.length} frames`);
  info(`${frames.length} frames; load: ${wallMs} ms wall (goto to painted), DOMContentLoaded ` +
       `${loaded.domMs.toFixed(0)} ms, load event ${loaded.loadMs.toFixed(0)} ms, script init ` +
       `${loaded.initMs.toFixed(1)} ms, first frame after ${loaded.paintedMs.toFixed(0)} ms`);
  await page.screenshot({ path: join(args.out, "flamegraph.png") });
  const original = await snapshot(page);
  const pixels = (i) => Number(original[i].width);

  // Colours: each frame filled as its palette class in the SVG's style says.
  const palette = new Map([...source.matchAll(/\.(c[0-9]+)\{fill:(#[0-9a-f]{6})\}/g)].map((m) => [m[1], cssRgb(m[2])]));
  const badFill = original.findIndex((f) => {
    const swatch = (f.classes || "").split(/\s+/).find((c) => palette.has(c));
    return swatch === undefined || normalFill(f.computedFill) !== normalFill(palette.get(swatch));
  });
  check(`every frame is filled with its palette class's colour (${palette.size} colours)`, badFill < 0,
        badFill >= 0 ? `${frames[badFill].n}: class ${original[badFill].classes}, fill ${original[badFill].computedFill}` : "");
  check("tooltips are made on hover, not shipped", frames.every((f) => !f.titled));

  const frameAt = (i) => page.locator(kFrames).nth(i);
  const text = (selector) => page.locator(selector).textContent();
  const shown = (selector) => page.locator(selector).isVisible();

  // The frame to zoom into: the widest frame two levels down that is narrower than everything
  // and has children; then one of its children, for a zoom within the zoom.
  const hasChild = new Set(frames.map((f) => f.parent));
  const pick = (minDepth) =>
    frames
      .map((f, i) => i)
      .filter((i) => frames[i].d >= minDepth && frames[i].w < total && hasChild.has(i) && pixels(i) >= 12)
      .sort((a, b) => frames[b].w - frames[a].w)[0];
  const target = pick(2) ?? pick(1);
  const rootIndex = frames.findIndex((f) => f.d === 0);

  if (rootIndex >= 0) {
    await frameAt(rootIndex).hover();
    const details = await text("#details");
    check("hovering the root fills #details", details.startsWith("Function: all"), JSON.stringify(details));
  }

  if (target === undefined) {
    skip("zoom checks", "no frame below the root is wide enough to click (empty profile?)");
    if (rootIndex >= 0) {
      await frameAt(rootIndex).click();
      const after = await snapshot(page);
      check("clicking the root of a flat profile changes nothing",
            after.every((f, i) => f.x === original[i].x && f.width === original[i].width && f.shown));
    }
  } else {
    await zoomChecks(page, { frames, original, target, total, padLeft, plot, frameAt, text, shown, args });
  }

  await searchChecks(page, { frames, original, total, target, frameAt, text, args, url });
  await hostileChecks(page, { frames, original, plot, frameAt, text, args });
  await timing(page, { frames, total });

  check("no console or page errors during the test", errors.length === 0, errors.join(" | "));
  check("no network requests", requests.length === 0, requests.join(" "));
}

async function zoomChecks(page, { frames, original, target, total, padLeft, plot, frameAt, text, shown, args }) {
  const z = frames[target];
  const name = z.n;

  await frameAt(target).hover();
  const details = await text("#details");
  const counts = z.title.slice(name.length);
  check("hovering a frame fills #details with its name and counts",
        details.startsWith("Function: " + name.slice(0, 20)) && details.endsWith(counts),
        `got ${JSON.stringify(details)} for title ${JSON.stringify(z.title)}`);
  const title = await frameAt(target).evaluate((g) => g.querySelector("title")?.textContent ?? null);
  check("hovering a frame gives it its tooltip: name and counts", title === z.title,
        `got ${JSON.stringify(title)}, want ${JSON.stringify(z.title)}`);
  const stroke = await frameAt(target).evaluate((g) => getComputedStyle(g.querySelector("rect")).stroke);
  check("the hovered frame is outlined", stroke !== "none" && stroke !== "", `stroke ${stroke}`);

  await frameAt(target).click();
  let now = await snapshot(page);
  check("clicked frame spans the full width",
        near(Number(now[target].x), padLeft) && near(Number(now[target].width), plot),
        `x ${now[target].x} width ${now[target].width}, want ${padLeft} and ${plot}`);
  const above = ancestors(frames, target);
  const badAncestor = above.find((a) => !now[a].shown || !near(Number(now[a].width), plot));
  check(`its ${above.length} ancestors stay shown, full width`, badAncestor === undefined,
        badAncestor !== undefined ? `ancestor ${frames[badAncestor].n}: ${JSON.stringify(now[badAncestor])}` : "");
  const below = frames.map((f, i) => i).filter((i) => isDescendant(frames, i, target));
  const badChild = below.find((i) => {
    const wantX = padLeft + ((frames[i].x - z.x) / z.w) * plot;
    const wantW = (frames[i].w / z.w) * plot;
    return !now[i].shown || !near(Number(now[i].x), wantX, 0.1) || !near(Number(now[i].width), wantW, 0.1);
  });
  check(`its ${below.length} descendants scale with it`, badChild === undefined,
        badChild !== undefined ? `${frames[badChild].n}: ${JSON.stringify(now[badChild])}` : "");
  const related = new Set([target, ...above, ...below]);
  const unrelated = frames.map((f, i) => i).filter((i) => !related.has(i));
  const badOther = unrelated.find((i) => now[i].shown);
  check(`the ${unrelated.length} unrelated frames hide`, unrelated.length > 0 && badOther === undefined,
        unrelated.length === 0 ? "no unrelated frame to test" : `${frames[badOther]?.n} still shown`);
  const badLabel = [...related].find((i) => {
    const label = now[i].label || "";
    if (!label) return false;
    const fits = Math.floor((Number(now[i].width) - 6) / kCharWidth);
    const literal = label === frames[i].n || (label.endsWith("..") && frames[i].n.startsWith(label.slice(0, -2)));
    return !literal || codePoints(label) > fits;
  });
  check("labels are cut to fit the new widths", badLabel === undefined,
        badLabel !== undefined ? `${JSON.stringify(now[badLabel].label)} in ${now[badLabel].width} px` : "");
  const wanted = Math.floor((plot - 6) / kCharWidth);
  const zLabel = now[target].label || "";
  check("the zoomed frame's label shows its name", zLabel === name || (codePoints(name) > wanted && zLabel.endsWith("..")),
        JSON.stringify(zLabel));
  check("Reset Zoom appears", await shown("#unzoom"));
  await page.screenshot({ path: join(args.out, "zoomed.png") });

  // A zoom within the zoom.
  const inner = below.filter((i) => frames[i].w < z.w && frames[i].w > 0 && Number(now[i].width) >= 12)
    .sort((a, b) => frames[b].w - frames[a].w)[0];
  if (inner !== undefined) {
    await frameAt(inner).click();
    now = await snapshot(page);
    check("zooming again within a zoom spans the inner frame full width",
          near(Number(now[inner].width), plot) && near(Number(now[target].width), plot) &&
            now[target].shown && unrelated.every((i) => !now[i].shown),
          `inner ${JSON.stringify(now[inner])}`);
  } else {
    skip("zoom within a zoom", "the zoomed frame has no narrower descendant");
  }

  await page.locator("#unzoom").click();
  now = await snapshot(page);
  const moved = now.findIndex((f, i) =>
    !f.shown || f.x !== original[i].x || f.width !== original[i].width || f.label !== original[i].label);
  check("Reset Zoom restores every frame as drawn", moved < 0,
        moved >= 0 ? `${frames[moved].n}: ${JSON.stringify(now[moved])} was ${JSON.stringify(original[moved])}` : "");
  check("Reset Zoom hides itself", !(await shown("#unzoom")));

  await frameAt(target).click();
  await page.keyboard.press("Escape");
  now = await snapshot(page);
  check("Escape resets the zoom", now[target].width === original[target].width && now.every((f) => f.shown));
}

async function searchChecks(page, { frames, original, total, target, frameAt, text, args, url }) {
  // Search for the most frequent plain name, preferring one that nests (recursion).
  let term = args.search;
  if (!term) {
    const counts = new Map();
    frames.forEach((f, i) => {
      if (f.d === 0 || !/^[\x21-\x7e]{2,80}$/.test(f.n)) return;
      const nested = ancestors(frames, i).some((a) => frames[a].n === f.n) ? 0.5 : 0;
      counts.set(f.n, (counts.get(f.n) || 0) + 1 + nested);
    });
    term = [...counts].sort((a, b) => b[1] - a[1])[0]?.[0] ?? "all";
  }
  const pattern = escapeRegex(term);
  const re = new RegExp(pattern);
  const want = expectedShare(frames, re, -1, total);

  await page.locator(".background").click({ position: { x: 2, y: 2 } });
  await page.keyboard.press("Control+f");
  const field = await page.evaluate(() => {
    const input = document.activeElement;
    return !!input && input.localName === "input" && !!input.closest("foreignObject") && input.checkVisibility();
  });
  check("Ctrl-F opens a focused search field", field);
  await page.keyboard.type(pattern);
  await page.waitForTimeout(300); // the search as one types has run
  const searchStarted = Date.now();
  await page.keyboard.press("Enter");
  await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0))));
  info(`search on Enter to the next frame: ${Date.now() - searchStarted} ms`);
  const matched = await text("#matched");
  const got = shownShare(matched);
  check(`searching ${JSON.stringify(pattern)} shows the matched share (${want.toFixed(3)}%)`,
        got !== null && near(got.value, want, got.tolerance), JSON.stringify(matched));
  const now = await snapshot(page);
  const hits = frames.map((f, i) => i).filter((i) => re.test(frames[i].n));
  const highlight = hits.length ? normalFill(now[hits[0]].computedFill) : "";
  const badHit = hits.find((i) => normalFill(now[i].computedFill) !== highlight);
  const badMiss = frames.findIndex((f, i) => !re.test(f.n) && normalFill(now[i].computedFill) !== normalFill(original[i].computedFill));
  check(`its ${hits.length} matching frames are highlighted, no other`,
        hits.length > 0 && badHit === undefined && badMiss < 0 &&
          hits.some((i) => normalFill(original[i].computedFill) !== highlight),
        `highlight ${highlight}; ${badHit !== undefined ? `hit ${frames[badHit].n} is ${now[badHit].computedFill}` : ""}` +
          `${badMiss >= 0 ? ` non-match ${frames[badMiss].n} is ${now[badMiss].computedFill}` : ""}`);
  await page.screenshot({ path: join(args.out, "search.png") });

  if (target !== undefined) {
    await frameAt(target).click();
    const inZoom = expectedShare(frames, re, target, total);
    const zoomed = shownShare(await text("#matched"));
    check(`in a zoom, the share is of the zoomed frame (${inZoom.toFixed(3)}%)`,
          zoomed !== null && near(zoomed.value, inZoom, zoomed.tolerance), JSON.stringify(await text("#matched")));
    await page.keyboard.press("Escape");
    const back = shownShare(await text("#matched"));
    check("after the zoom, the share is of everything again", back !== null && near(back.value, want, back.tolerance));
  }

  await page.keyboard.press("/");
  const slash = await page.evaluate(() => document.activeElement?.localName === "input");
  check('"/" opens the search field too', slash);
  await page.keyboard.press("Escape");
  check("Escape closes the field and keeps the search",
        !(await page.locator("foreignObject input").isVisible()) && shownShare(await text("#matched")) !== null);

  await page.locator("#search").click();
  const cleared = await snapshot(page);
  check("Reset Search clears the highlight and the share",
        cleared.every((f, i) => normalFill(f.computedFill) === normalFill(original[i].computedFill)) &&
          (await text("#matched")).trim() === "",
        JSON.stringify(await text("#matched")));

  await page.keyboard.press("Control+f");
  await page.keyboard.type("foo(");
  await page.keyboard.press("Enter");
  const invalid = await text("#matched");
  check("an invalid regex shows a message", /invalid/i.test(invalid), JSON.stringify(invalid));
  await page.keyboard.press("Escape");
  if ((await text("#search")).trim() !== "Search") await page.locator("#search").click();

  await page.goto(`${url}?s=${encodeURIComponent(pattern)}`, { waitUntil: "load" });
  await page.waitForFunction(() => window.flamebpf !== undefined, null, { timeout: 60000 }).catch(() => {});
  const fromUrl = shownShare(await text("#matched"));
  check("?s= searches on load", fromUrl !== null && near(fromUrl.value, want, fromUrl.tolerance),
        JSON.stringify(await text("#matched")));
  await page.goto(url, { waitUntil: "load" });
  await page.waitForFunction(() => window.flamebpf !== undefined, null, { timeout: 60000 }).catch(() => {});
}

async function hostileChecks(page, { frames, original, plot, frameAt, text }) {
  const hostile = frames.map((f, i) => i).filter((i) => /[<>&"']/.test(frames[i].n));
  if (frames.length <= 1) {
    skip("hostile names", "the profile has no frame but the root");
    return;
  }
  if (!check("the SVG has frames with markup characters in their names", hostile.length > 0,
             "add a hostile name (e.g. </text><script>window.__pwned=1</script>) to the test profile")) {
    return;
  }
  const literal = (label, name) =>
    label === null || label === "" || label === name || (label.endsWith("..") && name.startsWith(label.slice(0, -2)));
  // Every hostile frame's tooltip, made as a pointer over it would.
  const titles = await page.evaluate(
    ([selector, indexes]) => {
      const all = document.querySelectorAll(selector);
      return indexes.map((i) => {
        all[i].dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
        return all[i].querySelector("title")?.textContent ?? null;
      });
    },
    [kFrames, hostile],
  );
  const bad = hostile.find((i, k) => titles[k] !== frames[i].title || !literal(original[i].label, frames[i].n));
  check(`${hostile.length} hostile names show literally in titles and labels`, bad === undefined,
        bad !== undefined ? JSON.stringify(frames[bad]) : "");

  const widest = hostile.sort((a, b) => frames[b].w - frames[a].w).find((i) => Number(original[i].width) >= 4);
  if (widest !== undefined) {
    const name = frames[widest].n;
    await frameAt(widest).hover();
    const details = await text("#details");
    check("hovering a hostile frame shows its name literally", details.startsWith("Function: " + name.slice(0, 20)),
          JSON.stringify(details));
    await frameAt(widest).click();
    const label = await frameAt(widest).evaluate((g) => g.querySelector("text")?.textContent ?? "");
    const fits = Math.floor((plot - 6) / kCharWidth);
    check("a zoomed hostile frame's new label is literal", label !== "" && literal(label, name) &&
          codePoints(label) <= fits, JSON.stringify(label));
    await page.keyboard.press("Escape");
  }
  const injected = await page.evaluate(() => {
    const found = [];
    if (window.__pwned !== undefined) found.push(`window.__pwned = ${window.__pwned}`);
    const scripts = document.getElementsByTagNameNS("*", "script").length;
    if (scripts !== 1) found.push(`${scripts} script elements`);
    for (const e of document.getElementsByTagName("*")) {
      for (const a of e.attributes) if (/^on/i.test(a.name)) found.push(`<${e.localName} ${a.name}>`);
      if (/^(img|iframe|object|embed|image|use|a)$/.test(e.localName)) found.push(`<${e.localName}>`);
      if (e.localName === "foreignObject" && e.id !== "searchbox") found.push("foreign object");
    }
    return found;
  });
  check("no script ran and no markup came from a name", injected.length === 0, injected.join(", "));
}

// Zoom and reset times, in the script and until the next frame is drawn: into the widest frame
// below the root (the most frames to redraw) and into a narrow one (the most frames to hide).
async function timing(page, { frames, total }) {
  const byWidth = frames.map((f, i) => i).filter((i) => frames[i].d >= 1 && frames[i].w > 0 && frames[i].w < total)
    .sort((a, b) => frames[b].w - frames[a].w);
  const narrow = byWidth.find((i) => frames[i].w <= total / 100 && frames[i].d >= 3);
  const measure = (i) =>
    page.evaluate(
      ([selector, i]) =>
        new Promise((done) => {
          const started = performance.now();
          if (i >= 0) {
            document.querySelectorAll(selector)[i].dispatchEvent(new MouseEvent("click", { bubbles: true }));
          } else {
            document.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
          }
          const script = performance.now() - started;
          requestAnimationFrame(() => setTimeout(() => done([script, performance.now() - started]), 0));
        }),
      [kFrames, i],
    );
  for (const i of [byWidth[0], narrow]) {
    if (i === undefined) continue;
    const shown = frames.filter((f, k) => k === i || isDescendant(frames, k, i)).length;
    const [zoomScript, zoomFrame] = await measure(i);
    const [resetScript, resetFrame] = await measure(-1);
    info(`zoom into ${JSON.stringify(frames[i].n.slice(0, 40))} (${((100 * frames[i].w) / total).toFixed(1)}%, ` +
         `${shown} frames shown): script ${zoomScript.toFixed(1)} ms, next frame after ${zoomFrame.toFixed(1)} ms; ` +
         `reset: script ${resetScript.toFixed(1)} ms, next frame after ${resetFrame.toFixed(1)} ms`);
  }
}

runChecks(main);
