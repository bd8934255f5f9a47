// Drives flyd's dashboard in headless Chromium (playwright-core, with the
// system's Chromium) for daemon/e2e/dashboard_test.go. Environment:
//   FLY_URL   the login address (http://ADDR/#token=...)
//   FLY_OTHER a page on another loopback port, as any local web server the
//             user's browser visits: it must get nothing usable
//   FLY_RUN   the id of a live run started through the shim
//   FLY_CRASHED the id of a run that crashed, in another workspace
//   CHROMIUM  the Chromium executable (default /usr/bin/chromium)
//   FLY_SHOT  if set, a screenshot of the live page is saved there
//   FLY_BENCH_LINES  if set, only measure the log's latency to the DOM
//             over that many lines and print it
// It prints one JSON line per step on stdout and, at the restart step,
// waits for a line on stdin saying flyd is back. Two steps list the
// page's problems (a console error, a failed request, an answer of 400 or
// more) while it shows a live run and, after flyd's restart, an ended
// one: there must be none (the steps between make some on purpose).
import { chromium } from "playwright-core";
import readline from "node:readline";

const out = (o) => console.log(JSON.stringify(o));
const rl = readline.createInterface({ input: process.stdin });
const nextLine = () => new Promise((resolve) => rl.once("line", resolve));
const run = process.env.FLY_RUN;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
try {
  const context = await browser.newContext(); // one profile: its cookies go to every port
  const page = await context.newPage();
  page.setDefaultTimeout(60000); // a hang detector
  const errors = [];
  let problems = [];
  const watch = (p) => {
    p.on("pageerror", (e) => errors.push(String(e)));
    p.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
    p.on("requestfailed", (r) => problems.push(`failed: ${r.method()} ${r.url()}: ${(r.failure() || {}).errorText}`));
    p.on("response", (r) => { if (r.status() >= 400) problems.push(`${r.status()}: ${r.request().method()} ${r.url()}`); });
  };
  watch(page);
  await page.goto(process.env.FLY_URL);
  out({ step: "login", url_has_token: page.url().includes("token="), title: await page.title(),
    cookies: (await context.cookies()).length });

  const row = page.locator(`tr[data-run="${run}"]`);
  await row.locator(".state", { hasText: "running" }).waitFor();
  out({ step: "run-listed" });
  if (process.env.FLY_APP) { // an app an IDE runs, found through its DTD
    const app = page.locator(`tr[data-app="${process.env.FLY_APP}"]`);
    await app.waitFor();
    out({ step: "app-listed", text: await app.textContent() });
  }

  if (process.env.FLY_BENCH_LINES) {
    // Latency from the child's print (the fake stamps each line at=NS) to
    // its line in the DOM, for FLY_BENCH_LINES lines, measured in the page.
    const n = Number(process.env.FLY_BENCH_LINES);
    await page.evaluate((n) => {
      window.__lat = [];
      new MutationObserver((muts) => {
        const now = Date.now();
        for (const m of muts) for (const node of m.addedNodes) {
          const at = /at=(\d+)/.exec(node.textContent || ""); // the child's print time, in ns
          if (at && window.__lat.length < n) window.__lat.push(now - Number(at[1].slice(0, -6)));
        }
      }).observe(document.querySelector("#log-lines"), { childList: true });
    }, n);
    await row.locator("a.run").click();
    for (let i = 0; i < 5 && process.env.FLY_BENCH_DEBUG; i++) {
      await new Promise((r) => setTimeout(r, 2000));
      out({ debug: await page.evaluate(() => [window.__lat.length, document.querySelectorAll("#log-lines .line").length, document.querySelector("#log-state").textContent, (document.querySelector("#log-lines").lastElementChild || {}).textContent]) });
    }
    await page.waitForFunction((n) => window.__lat.length >= n, n, { timeout: 120000, polling: 250 });
    const lat = (await page.evaluate(() => window.__lat)).slice(500).sort((a, b) => a - b); // after the backlog
    out({ step: "bench", n: lat.length, p50: lat[Math.floor(lat.length / 2)], p99: lat[Math.floor(lat.length * 0.99)] });
    process.exit(0);
  }
  await row.locator("a.run").click();
  const logLines = page.locator("#log-lines .line");
  await logLines.first().waitFor();
  const before = await logLines.count();
  const t0 = Date.now();
  await page.waitForFunction((n) => document.querySelectorAll("#log-lines .line").length > n, before);
  out({ step: "log-live", ms: Date.now() - t0, lines: await logLines.count() });
  // The errors panel beside the log shows the app's framework errors,
  // deduplicated, and the run's row counts them.
  const firstError = page.locator("#errors-list li").first();
  await firstError.waitFor();
  await page.waitForFunction(() => /^2× /.test((document.querySelector("#errors-list li") || {}).textContent || ""));
  out({ step: "errors-panel", text: await firstError.textContent(), count: await row.locator(".errors-count").textContent() });
  if (process.env.FLY_SHOT) await page.screenshot({ path: process.env.FLY_SHOT, fullPage: true });
  // The icon a browser asks for by itself is served without the token.
  const favicon = await page.evaluate(async () => { const r = await fetch("/favicon.ico", { credentials: "omit" }); return [r.status, r.headers.get("content-type")]; });
  out({ step: "clean-live", problems, favicon });

  // Nothing the browser sends by itself opens the API: a request without
  // the page's Authorization header is refused.
  const status = await page.evaluate(async () => (await fetch("/v1/status", { credentials: "include" })).status);
  out({ step: "no-cookie", status });

  // Another local server the user visits, on another port of the same
  // host: the dashboard's page cannot send it anything (its CSP's
  // connect-src refuses a credentialed cross-origin fetch before it is
  // sent), a navigation to it carries nothing of the dashboard's, and its
  // page cannot read the dashboard's storage.
  if (process.env.FLY_OTHER) {
    const fetched = await page.evaluate(async (u) => {
      let violated = "";
      const seen = (e) => { violated = e.violatedDirective; };
      document.addEventListener("securitypolicyviolation", seen);
      let sent = true;
      try { await fetch(u + "fetched", { credentials: "include", mode: "no-cors" }); } catch (e) { sent = false; }
      await new Promise((r) => setTimeout(r, 0)); // the violation's event is queued as a task
      document.removeEventListener("securitypolicyviolation", seen);
      return { sent, violated };
    }, process.env.FLY_OTHER);
    const other = await context.newPage();
    await other.goto(process.env.FLY_OTHER + "visited");
    const stored = await other.evaluate(() => JSON.stringify([sessionStorage.getItem("fly_token"), localStorage.length, document.cookie]));
    await other.close();
    out({ step: "other-port", stored, fetched });
  }

  // A reload keeps the login: the token is in the tab's sessionStorage.
  await page.reload();
  await row.locator(".state", { hasText: "running" }).waitFor();
  out({ step: "reloaded", url_has_token: page.url().includes("token=") });

  await row.locator("button[data-action=stop]").click();
  await row.locator(".state", { hasText: "stopped" }).waitFor();
  out({ step: "stopped" });

  const pid = await page.locator("#daemon").getAttribute("data-pid");
  out({ step: "restart-flyd", pid });
  await nextLine();
  await page.waitForFunction((old) => {
    const d = document.querySelector("#daemon");
    return d.dataset.pid && d.dataset.pid !== old && document.querySelector("#conn").classList.contains("on");
  }, pid);
  await row.locator(".state", { hasText: "stopped" }).waitFor();
  out({ step: "reconnected", errors });

  // A new page, of a flyd that never saw the run live, lists the ended run
  // from flyd's records, by its app's name, with its log from the store:
  // the app's lines, flutter's machine events hidden until the toggle
  // shows them, and the errors the log holds.
  await page.close();
  const fresh = await context.newPage();
  fresh.setDefaultTimeout(60000);
  problems = [];
  watch(fresh);
  await fresh.goto(process.env.FLY_URL);
  const ended = fresh.locator(`tr[data-run="${run}"]`);
  await ended.locator(".state", { hasText: "stopped" }).waitFor();
  out({ step: "finished-listed", app: await ended.locator("td.app").textContent(), device: await ended.locator("td.device").textContent(),
    by: await ended.locator("td.by").textContent(), no_runs_hidden: await fresh.locator("#no-runs").isHidden() });
  await ended.locator("a.run").click();
  await fresh.waitForFunction(() => /^ended/.test(document.querySelector("#log-state").textContent) &&
    document.querySelectorAll("#log-lines .line").length > 0 && document.querySelector("#errors-list li"));
  const visibleEvents = () => fresh.evaluate(() => [...document.querySelectorAll("#log-lines .stream-event")].filter((d) => d.checkVisibility()).length);
  const hidden = await visibleEvents();
  await fresh.locator("#show-events").check();
  const shown = await visibleEvents();
  out({ step: "finished-log", state: await fresh.locator("#log-state").textContent(), lines: await fresh.locator("#log-lines .line").count(),
    stdout: (await fresh.locator("#log-lines .stream-stdout").allTextContents()).join("\n"),
    events: await fresh.locator("#log-lines .stream-event").count(), visible_before: hidden, visible_after: shown,
    error: await fresh.locator("#errors-list li").first().textContent() });
  await fresh.locator("#show-events").uncheck();
  const visibleAgain = await visibleEvents();

  // The run that crashed is listed and read the same way, to its crash.
  const crashed = fresh.locator(`tr[data-run="${process.env.FLY_CRASHED}"]`);
  await crashed.locator("a.run").click();
  await fresh.waitForFunction(() => /^ended/.test(document.querySelector("#log-state").textContent) &&
    /Lost connection to device/.test(document.querySelector("#log-lines").textContent));
  out({ step: "crashed-log", state: await crashed.locator(".state").textContent(), log_state: await fresh.locator("#log-state").textContent(),
    lost: /Lost connection to device/.test(await fresh.locator("#log-lines").textContent()) });
  out({ step: "clean-finished", problems, visible_again: visibleAgain, errors });
} finally {
  await browser.close();
  rl.close();
}
