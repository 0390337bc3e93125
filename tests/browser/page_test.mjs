// Headless-Chromium test of the web page flamebpf --listen serves at / (userspace/src/serve/page),
// against a running agent: the timeline shows the targets (hostile names literally, nothing run),
// a drag selects a range and the flame graph of exactly that range appears, zoom and search work
// inside it, a base range and a second one give the differential flame graph, and the server's
// refusals are shown in the page. Expectations come from the /timeline answer the page itself got
// (its windows and samples), independently of the page's script. No console errors, and no request
// to any origin but the agent's. Prints one line per check and "N passed, N failed, N skipped";
// exits 0 only if nothing failed.
//
// Usage: node page_test.mjs URL ARTIFACT_DIR --target NAME [--target NAME…] [--hostile NAME]
//                           [--frame FUNCTION] [--comm NAME]
//   URL is the agent's, e.g. http://127.0.0.1:9464/. Each --target must be shown with samples;
//   the first is dragged on. --hostile names a target whose name is markup, shown literally and
//   whose flame graph must hold a frame named --comm. --frame (default c) is a function of the
//   workload every flame graph must show. ARTIFACT_DIR receives page.png, range.png, diff.png and
//   hostile.png. CHROMIUM overrides the browser (default /usr/bin/chromium).
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";
import { check, info, kChromiumArgs, runChecks, skip, watchedPage } from "./checks.mjs";

const kFrames = "#frames > g.f";

function parseArgs(argv) {
  const args = { url: null, out: null, targets: [], hostile: null, frame: "c", comm: null };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--target") args.targets.push(argv[++i]);
    else if (argv[i] === "--hostile") args.hostile = argv[++i];
    else if (argv[i] === "--frame") args.frame = argv[++i];
    else if (argv[i] === "--comm") args.comm = argv[++i];
    else rest.push(argv[i]);
  }
  if (rest.length !== 2 || args.targets.length === 0) {
    console.error("usage: node page_test.mjs URL ARTIFACT_DIR --target NAME [--target NAME…] " +
                  "[--hostile NAME] [--frame FUNCTION] [--comm NAME]");
    process.exit(2);
  }
  args.url = new URL(rest[0]);
  args.out = resolve(rest[1]);
  return args;
}

// The URL the page asks for a range: what flamebpf merge takes, whole seconds wide enough to hold
// the range's windows.
function rangeUrl(path, directory, ranges) {
  const query = new URLSearchParams();
  for (const [prefix, range] of ranges) {
    query.append(`${prefix}from`, `@${Math.floor(range.from / 1000)}`);
    query.append(`${prefix}to`, `@${Math.ceil(range.to / 1000)}`);
  }
  return `/${path}/${encodeURIComponent(directory)}?${query}`;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  mkdirSync(args.out, { recursive: true });
  const profileDir = mkdtempSync(join(tmpdir(), "flamebpf-chromium-"));
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: kChromiumArgs,
    viewport: { width: 1400, height: 1000 },
    deviceScaleFactor: 1,
  });
  try {
    await run(context, args);
  } finally {
    await context.close();
    rmSync(profileDir, { recursive: true, force: true });
  }
}

async function run(context, args) {
  const { page, errors, foreign } = await watchedPage(
    context, (url) => url.startsWith(args.url.origin + "/"), 30000);
  // The timeline the page drew, as it got it.
  let timeline = null;
  page.on("response", async (r) => {
    if (new URL(r.url()).pathname !== "/timeline" || !r.ok()) return;
    try {
      timeline = await r.json();
    } catch {
      timeline = null;
    }
  });

  const started = Date.now();
  const response = await page.goto(new URL("/", args.url).href, { waitUntil: "load" });
  const headers = response.headers();
  check("GET / answers the page as HTML", response.status() === 200 &&
        (headers["content-type"] || "").startsWith("text/html"), `${response.status()} ${headers["content-type"]}`);
  const policy = headers["content-security-policy"] || "";
  check("under a Content-Security-Policy of this origin only, no inline script",
        /(^|;\s*)default-src 'self'/.test(policy) && /script-src 'self'(;|$)/.test(policy) && !/unsafe/.test(policy),
        policy);
  // The timeline holds still while the test drags on it.
  await page.locator("#follow").uncheck();
  await page.waitForSelector("#rows .row");
  await page.waitForFunction(() => document.getElementById("timeline").dataset.t0 !== undefined);
  await page.waitForTimeout(200); // the response handler has parsed /timeline
  info(`timeline shown ${Date.now() - started} ms after the request for the page`);
  if (!check("the page got the timeline", timeline !== null && Array.isArray(timeline.windows))) return;

  const rows = await page.evaluate(() =>
    Array.from(document.querySelectorAll("#rows .row"), (r) => {
      const canvas = r.querySelector("canvas");
      const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      let painted = 0;
      for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted++;
      return {
        name: r.querySelector(".name").textContent,
        total: Number(r.dataset.total),
        nodump: r.classList.contains("nodump"),
        painted,
      };
    }),
  );
  info(`${rows.length} rows: ${rows.map((r) => `${JSON.stringify(r.name)} ${r.total}`).join(", ")}; ` +
       `${timeline.windows.length} windows`);
  const names = [...args.targets, ...(args.hostile ? [args.hostile] : [])];
  for (const name of names) {
    const row = rows.find((r) => r.name === name);
    const stats = timeline.targets.find((t) => t.name === name);
    const total = stats ? stats.samples.reduce((sum, s) => sum + s[1], 0) : -1;
    check(`the timeline shows ${JSON.stringify(name)} as text, with its ${total} samples drawn`,
          row !== undefined && !row.nodump && row.total === total && total > 0 && row.painted > 0,
          JSON.stringify(row));
  }
  if (args.hostile) {
    const injected = await page.evaluate(() => {
      const found = [];
      if (window.__pwned !== undefined) found.push(`window.__pwned = ${window.__pwned}`);
      const scripts = document.getElementsByTagName("script");
      if (scripts.length !== 1) found.push(`${scripts.length} script elements`);
      for (const e of document.getElementsByTagName("*")) {
        for (const a of e.attributes) if (/^on/i.test(a.name)) found.push(`<${e.localName} ${a.name}>`);
        if (/^(img|object|embed|svg|a)$/.test(e.localName) && !/^(open|pprof)$/.test(e.id)) found.push(`<${e.localName}>`);
      }
      return found;
    });
    check("a name that is markup ran nothing and made no element", injected.length === 0, injected.join(", "));
  }
  await page.screenshot({ path: join(args.out, "page.png"), fullPage: true });

  const t0 = Math.min(...timeline.windows.map((w) => w[0]));
  const t1 = Math.max(...timeline.windows.map((w) => w[1]));
  const rowIndex = (name) => rows.findIndex((r) => r.name === name);
  // Drags on the row of name from the middle of window first to the middle of window last; the
  // range that covers them.
  const drag = async (name, first, last) => {
    const chart = page.locator("#rows .row").nth(rowIndex(name)).locator(".chart");
    const box = await chart.boundingBox();
    const middle = (w) => box.x + (((w[0] + w[1]) / 2 - t0) / (t1 - t0)) * box.width;
    const y = box.y + box.height / 2;
    await page.mouse.move(middle(timeline.windows[first]), y);
    await page.mouse.down();
    await page.mouse.move(middle(timeline.windows[last]), y, { steps: 8 });
    await page.mouse.up();
    return { from: timeline.windows[first][0], to: timeline.windows[last][1] };
  };
  // The windows in which a target had samples, and its samples in windows first to last.
  const windowsOf = (name) => timeline.targets.find((t) => t.name === name).samples.map((s) => s[0]);
  const samplesIn = (name, first, last) =>
    timeline.targets.find((t) => t.name === name).samples
      .filter((s) => s[0] >= first && s[0] <= last).reduce((sum, s) => sum + s[1], 0);
  const directoryOf = (name) => timeline.targets.find((t) => t.name === name).directory;
  // The frame once it shows the flame graph at url.
  const graph = async (url) => {
    const shown = await page
      .waitForFunction((url) => document.getElementById("graph").dataset.shown === url, url, { timeout: 60000 })
      .then(() => true, () => false);
    if (!shown) return null;
    const frame = page.frames().find((f) => f !== page.mainFrame() && f.url().endsWith(url));
    if (!frame) return null;
    await frame.waitForFunction(() => window.flamebpf !== undefined, null, { timeout: 30000 });
    return frame;
  };
  const framesOf = (frame) =>
    frame.evaluate((selector) =>
      Array.from(document.querySelectorAll(selector), (g) => ({
        n: g.getAttribute("data-n"),
        w: Number(g.getAttribute("data-w")),
        b: Number(g.getAttribute("data-b")),
        a: Number(g.getAttribute("data-a")),
        match: g.classList.contains("match"),
        fill: getComputedStyle(g.querySelector("rect")).fill,
      })), kFrames);

  // A range of the first target: the first half of its windows.
  const target = args.targets[0];
  const own = windowsOf(target);
  if (!check(`${JSON.stringify(target)} has samples in at least 4 windows`, own.length >= 4, JSON.stringify(own))) return;
  const half = Math.floor(own.length / 2);
  const first = { lo: own[0], hi: own[half - 1] };
  const second = { lo: own[half], hi: own[own.length - 1] };
  let range = await drag(target, first.lo, first.hi);
  let url = rangeUrl("svg", directoryOf(target), [["", range]]);
  const dragged = Date.now();
  let frame = await graph(url);
  if (!check(`dragging over windows ${first.lo}-${first.hi} shows the flame graph of that range (${url})`, frame !== null,
             `the frame shows ${await page.locator("#graph").getAttribute("src")}; status ` +
             JSON.stringify(await page.locator("#status").textContent()))) return;
  info(`flame graph shown ${Date.now() - dragged} ms after the drag`);
  const total = await frame.evaluate(() => Number(document.documentElement.getAttribute("data-total")));
  const expected = samplesIn(target, first.lo, first.hi);
  check(`its samples are the stats' for those windows (${expected})`, total === expected, `the flame graph has ${total}`);
  const original = await framesOf(frame);
  check(`its frames include the workload's ${JSON.stringify(args.frame)}`, original.some((f) => f.n === args.frame),
        original.slice(0, 20).map((f) => f.n).join(";"));
  const selection = await page.locator("#selection").textContent();
  check("the selection names the target and the range", selection.startsWith(target) && /UTC/.test(selection),
        JSON.stringify(selection));

  // Zoom, inside the flame graph: the parent of the workload's function, to full width.
  const svgWidth = await frame.evaluate(() => {
    const svg = document.documentElement;
    return Number(svg.getAttribute("width")) - 2 * Number(svg.getAttribute("data-pad-left"));
  });
  const parentIndex = original.findIndex((f, i) => original[i + 1]?.n === args.frame && f.w < total);
  if (parentIndex >= 0) {
    await frame.locator(kFrames).nth(parentIndex).click();
    const width = Number(await frame.locator(kFrames).nth(parentIndex).locator("rect").getAttribute("width"));
    check(`clicking ${JSON.stringify(original[parentIndex].n)} zooms it to the full width`,
          Math.abs(width - svgWidth) < 0.5 && (await frame.locator("#unzoom").isVisible()), `width ${width} of ${svgWidth}`);
    await page.keyboard.press("Escape");
    const back = Number(await frame.locator(kFrames).nth(parentIndex).locator("rect").getAttribute("width"));
    check("Escape resets the zoom", back < svgWidth - 0.5, `width ${back}`);
  } else {
    skip("zoom", `no frame narrower than the root holds ${args.frame}`);
  }

  // Search, inside the flame graph.
  await frame.locator(".background").click({ position: { x: 2, y: 2 } });
  await page.keyboard.press("Control+f");
  await page.keyboard.type(`^${args.frame}$`);
  await page.keyboard.press("Enter");
  const matched = await frame.locator("#matched").textContent();
  const share = Number((/Matched:\s*([0-9.]+)%/.exec(matched) || [])[1]);
  check(`searching ^${args.frame}$ shows the share it matched`, share > 0, JSON.stringify(matched));
  const searched = await framesOf(frame);
  const hits = searched.filter((f) => f.n === args.frame);
  const highlight = hits[0]?.fill;
  check(`its ${hits.length} frames are highlighted, no other`,
        hits.length > 0 && searched.every((f, i) => f.match === (f.n === args.frame)) &&
          hits.every((f) => f.fill === highlight) &&
          searched.some((f, i) => f.match && original[i].fill !== highlight),
        JSON.stringify(searched.filter((f) => f.match !== (f.n === args.frame)).slice(0, 5)));
  await page.screenshot({ path: join(args.out, "range.png"), fullPage: true });

  // A diff: the range as base, then the second half of the windows.
  await page.locator("#set-base").click();
  const base = range;
  range = await drag(target, second.lo, second.hi);
  url = rangeUrl("diff", directoryOf(target), [["base_", base], ["", range]]);
  frame = await graph(url);
  if (check(`with a base, dragging over windows ${second.lo}-${second.hi} shows the diff (${url})`, frame !== null,
            `the frame shows ${await page.locator("#graph").getAttribute("src")}; status ` +
            JSON.stringify(await page.locator("#status").textContent()))) {
    const mode = await frame.evaluate(() => document.documentElement.getAttribute("data-mode"));
    const diffFrames = await framesOf(frame);
    const after = samplesIn(target, second.lo, second.hi);
    const function_ = diffFrames.find((f) => f.n === args.frame);
    check("the differential flame graph renders", mode === "diff" && diffFrames.length > 1 &&
          diffFrames.every((f) => Number.isFinite(f.b) && Number.isFinite(f.a)), `mode ${mode}, ${diffFrames.length} frames`);
    check(`its after side is the second range's ${after} samples, and ${JSON.stringify(args.frame)} is on both sides`,
          diffFrames[0]?.a === after && function_ !== undefined && function_.a > 0 && function_.b > 0,
          `root ${JSON.stringify(diffFrames[0])}, ${JSON.stringify(function_)}`);
    const text = await page.locator("#selection").textContent();
    check("the selection names the base and the range", /base .*against /.test(text), JSON.stringify(text));
    await page.screenshot({ path: join(args.out, "diff.png"), fullPage: true });
  }
  await page.locator("#clear-base").click();

  // The hostile target's own flame graph, through its directory's name.
  if (args.hostile) {
    const windows = windowsOf(args.hostile);
    if (windows.length >= 2) {
      const lo = windows[windows.length > 2 ? 1 : 0];
      const hi = windows[windows.length - 1];
      const hostileRange = await drag(args.hostile, lo, hi);
      const hostileUrl = rangeUrl("svg", directoryOf(args.hostile), [["", hostileRange]]);
      frame = await graph(hostileUrl);
      const frames = frame ? await framesOf(frame) : [];
      check(`the flame graph of the hostile target appears, with its ${JSON.stringify(args.comm)}`,
            frame !== null && (!args.comm || frames.some((f) => f.n === args.comm)),
            `${hostileUrl}: ${frames.slice(0, 10).map((f) => f.n).join(";")}`);
      const selected = await page.locator("#rows .row.selected .name").textContent();
      check("its name shows literally as the selected row's", selected === args.hostile, JSON.stringify(selected));
      await page.screenshot({ path: join(args.out, "hostile.png"), fullPage: true });
    } else {
      skip("the hostile target's flame graph", `it has samples in ${windows.length} windows`);
    }
  }

  // A refusal from the server is shown in the page, as text.
  const refusal = "no folded dump lies within the range <b>(made by the test)</b>";
  await page.route("**/svg/**", (route) =>
    route.fulfill({ status: 404, contentType: "text/plain; charset=utf-8", body: `${refusal}\n` }));
  const before = errors.length;
  await drag(target, own[0], own[0]);
  const refused = await page
    .waitForFunction(() => document.getElementById("status").classList.contains("error"), null, { timeout: 30000 })
    .then(() => true, () => false);
  const status = await page.locator("#status").textContent();
  check("the server's refusal is shown in the page as text, the frame hidden",
        refused && status.includes(refusal) && (await page.locator("#graph").isHidden()), JSON.stringify(status));
  // Chromium reports the refused frame's status as a console error: the refusal was asked for.
  errors.splice(before, errors.length - before, ...errors.slice(before).filter((e) => !/status of 404/.test(e)));
  await page.unroute("**/svg/**");

  check("no console or page errors", errors.length === 0, errors.join(" | "));
  check("no request to any origin but the agent's", foreign.length === 0, foreign.join(" "));
}

runChecks(main);
