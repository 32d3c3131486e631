// Drive the tool-set service's console (/ui) in Debian's headless Chromium
// over the DevTools protocol (playwright-core, no browser download): sign in
// (a wrong token first), create an MCP tool set, see its tools appear,
// filter one out by its status, switch to a tool set whose tool describes
// itself with markup while the first set's tools are still being read, and
// save a screenshot.
//
// Usage: node console.mjs BASE TOKEN UPSTREAM_MCP_URL SCREENSHOT. Prints one
// JSON object.

import { chromium } from "playwright-core";

const [base, token, upstream, screenshot] = process.argv.slice(2);
const report = {};
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  page.on("console", (message) => {
    // The browser's own note of each refused request (the wrong token's
    // 401) is not the page's error.
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) errors.push(message.text());
  });
  page.setDefaultTimeout(60_000);
  await page.goto(`${base}/ui`);

  // A wrong token is refused with the API's own words.
  await page.fill("#token", "not-a-key");
  await page.click("#sign-in-form button");
  await page.waitForFunction(() => document.getElementById("sign-in-error").textContent.length > 0);
  report.wrongToken = await page.textContent("#sign-in-error");

  await page.fill("#token", token);
  await page.click("#sign-in-form button");
  await page.waitForSelector("#console:not([hidden])");

  // Create an MCP tool set; its tools appear once its sync completes.
  await page.fill("#create-name", "Pocket Calculator");
  await page.selectOption("#create-kind", "mcp");
  await page.fill("#create-url", upstream);
  await page.fill("#create-labels", "team=maths");
  await page.click("#create-form button");
  await page.waitForSelector('#tools tbody tr[data-name="add"]');
  report.tools = await page.$$eval("#tools tbody tr", (rows) => rows.map((row) => row.dataset.name));
  report.summary = await page.textContent("#detail-summary");

  // Filter `divide` out: its row says it is no longer served.
  await page.selectOption('#tools tbody tr[data-name="divide"] select.status', "TOOL_STATUS_FILTERED");
  await page.waitForFunction(
    () => document.querySelector('#tools tbody tr[data-name="divide"] td.served')?.textContent === "no",
  );
  report.divideServed = await page.textContent('#tools tbody tr[data-name="divide"] td.served');

  // The events of its syncs, as they were recorded.
  await page.waitForFunction(() => document.querySelectorAll("#events tbody tr").length >= 2);
  report.events = await page.$$eval("#events tbody tr", (rows) => rows.map((row) => row.cells[1].textContent));

  // Switch to another tool set while the calculator's tools are still being
  // read again (after `multiply` is made to need approval): the
  // calculator's answer, held back until the other set is shown, must not
  // replace what is shown.
  const calculator = await page.$eval('#tool-sets tbody tr:has-text("Pocket Calculator")', (row) => row.dataset.id);
  const calculatorTools = (url) => new URL(url).pathname === `/v1/tool_sets/${calculator}/tools`;
  let release;
  const held = new Promise((resolve) => (release = resolve));
  await page.route(calculatorTools, async (route) => {
    await held;
    await route.continue();
  });
  const reading = page.waitForRequest((request) => calculatorTools(request.url()));
  await page.check('#tools tbody tr[data-name="multiply"] input.approval');
  await reading;

  // A tool whose description is markup stays text.
  await page.click('#tool-sets tbody tr:has-text("Markup")');
  await page.waitForSelector('#tools tbody tr[data-name="shout"]');
  const answered = page.waitForResponse((response) => calculatorTools(response.url()));
  release();
  await answered;
  await page.unroute(calculatorTools);
  // The page's own handling of that answer runs after the response event.
  await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 200)));
  report.afterStale = await page.$$eval("#tools tbody tr", (rows) => rows.map((row) => row.dataset.name));
  report.markup = {
    text: await page.$$eval('#tools tbody tr[data-name="shout"] td:last-child', (cells) => cells[0]?.textContent ?? null),
    images: await page.$$eval("#tools img", (images) => images.length),
    ran: await page.evaluate(() => window.pwned === true),
  };

  // Back to the calculator for the picture.
  await page.click('#tool-sets tbody tr:has-text("Pocket Calculator")');
  await page.waitForSelector('#tools tbody tr[data-name="add"]');
  await page.waitForFunction(() => document.querySelectorAll("#events tbody tr").length >= 2);
  await page.screenshot({ path: screenshot, fullPage: true });
  report.errors = errors;
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
