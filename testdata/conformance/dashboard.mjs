// Drives flyd's dashboard in headless Chromium (playwright-core, with the
// system's Chromium) for daemon/dashboard_test.go. Environment:
//   FLY_URL   the login address (http://ADDR/?token=...)
//   FLY_RUN   the id of a live run started through the shim
//   CHROMIUM  the Chromium executable (default /usr/bin/chromium)
//   FLY_SHOT  if set, a screenshot of the live page is saved there
// It prints one JSON line per step on stdout and, at the restart step,
// waits for a line on stdin saying flyd is back.
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
  const page = await browser.newPage();
  page.setDefaultTimeout(60000); // a hang detector
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(process.env.FLY_URL);
  out({ step: "login", url_has_token: page.url().includes("token="), title: await page.title() });

  const row = page.locator(`tr[data-run="${run}"]`);
  await row.locator(".state", { hasText: "running" }).waitFor();
  out({ step: "run-listed" });

  await row.locator("a.run").click();
  const logLines = page.locator("#log-lines .line");
  await logLines.first().waitFor();
  const before = await logLines.count();
  const t0 = Date.now();
  await page.waitForFunction((n) => document.querySelectorAll("#log-lines .line").length > n, before);
  out({ step: "log-live", ms: Date.now() - t0, lines: await logLines.count() });
  if (process.env.FLY_SHOT) await page.screenshot({ path: process.env.FLY_SHOT, fullPage: true });

  // Only the cookie opens the API: the same request without it is refused.
  const status = await page.evaluate(async () => (await fetch("/v1/status", { credentials: "omit" })).status);
  out({ step: "no-cookie", status });

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
} finally {
  await browser.close();
  rl.close();
}
