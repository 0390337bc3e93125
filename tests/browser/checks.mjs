// What the browser tests share: how Chromium is started, and their report, one line per check
// ("PASS name", "FAIL name -- detail", "SKIP name -- why", "INFO text") and a last line
// "N passed, N failed, N skipped" as they end.

// No network of its own, no proxy: the page under test is all the browser may fetch.
export const kChromiumArgs = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
  "--disable-quic",
  "--no-proxy-server",
];

const counts = { passed: 0, failed: 0, skipped: 0 };

export function check(name, ok, detail = "") {
  if (ok) counts.passed++;
  else counts.failed++;
  console.log(`${ok ? "PASS" : "FAIL"} ${name}${!ok && detail ? ` -- ${detail}` : ""}`);
  return ok;
}

export function skip(name, why) {
  counts.skipped++;
  console.log(`SKIP ${name} -- ${why}`);
}

export function info(text) {
  console.log(`INFO ${text}`);
}

// The context's page, watched: a request whose URL allowed() refuses is aborted and noted in
// foreign; console errors, page errors and dialogs are noted in errors.
export async function watchedPage(context, allowed, timeoutMs) {
  const errors = [];
  const foreign = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (allowed(url)) return route.continue();
    foreign.push(url);
    return route.abort();
  });
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(timeoutMs);
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "assert") errors.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  page.on("dialog", (d) => {
    errors.push(`dialog: ${d.message()}`);
    d.dismiss().catch(() => {});
  });
  return { page, errors, foreign };
}

// Runs main, counting an exception as a failed check; the exit code is 0 only if some check
// passed and none failed.
export function runChecks(main) {
  main()
    .catch((error) => check("test harness", false, error && error.stack ? error.stack : String(error)))
    .finally(() => {
      console.log(`${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
      process.exitCode = counts.failed === 0 && counts.passed > 0 ? 0 : 1;
    });
}
