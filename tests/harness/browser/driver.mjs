// The browser driver of the Go tests (tests/harness/browser.go): it launches Debian's Chromium
// with playwright-core and serves page operations, one JSON object a line, on stdin/stdout.
//
//   request   {"id": 7, "op": "click", "page": "p1", "selector": "main button", ...}
//   answer    {"id": 7, "result": ...}  or  {"id": 7, "error": "..."}
//   event     {"event": "route", "target": "c1", "route": "r3", "request": {...}}
//             {"event": "cdp", "target": "p1", "method": "Network.responseReceived", "params": {...}}
//             {"event": "console", "target": "p1", "type": "error", "text": "..."}
//             {"event": "pageerror", "target": "p1", "text": "..."}
//
// Operations run concurrently (a route's answer arrives while a goto waits for it). The driver
// closes Chromium and exits when stdin ends or on SIGTERM, so no Chromium outlives its test.
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const executablePath = process.env.MNV_CHROMIUM || '/usr/bin/chromium';
const timeout = Number(process.env.MNV_BROWSER_TIMEOUT_MS || 20000);

const objects = new Map(); // id -> BrowserContext | Page | CDPSession
const routes = new Map(); // id -> resolve function of a pending route
let next = 0;
const name = (prefix, o) => {
  const id = `${prefix}${++next}`;
  objects.set(id, o);
  return id;
};
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const get = (id) => {
  const o = objects.get(id);
  if (!o) throw new Error(`no such object ${id}`);
  return o;
};

// The closed network of CI hangs Chromium's background connections without these flags.
const browser = await chromium.launch({
  executablePath,
  headless: true,
  timeout: 60000,
  args: [
    '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--disable-dev-shm-usage', '--disable-gpu',
  ],
});

let closing = false;
async function shutdown(code) {
  if (closing) return;
  closing = true;
  try { await browser.close(); } catch { /* already gone */ }
  process.exit(code);
}
process.on('SIGTERM', () => shutdown(143));
process.on('SIGINT', () => shutdown(130));

function watchPage(id, page) {
  page.on('console', (m) => send({ event: 'console', target: id, type: m.type(), text: m.text(), url: m.location()?.url ?? '' }));
  page.on('pageerror', (e) => send({ event: 'pageerror', target: id, text: String(e?.stack || e) }));
}

const ops = {
  async newContext({ width, height, mobile }) {
    const ctx = await browser.newContext({
      viewport: { width: width || 1000, height: height || 900 },
      isMobile: !!mobile, hasTouch: !!mobile,
    });
    ctx.setDefaultTimeout(timeout);
    ctx.setDefaultNavigationTimeout(timeout * 2);
    return name('c', ctx);
  },
  async closeContext({ context }) {
    await get(context).close();
    objects.delete(context);
  },
  async newPage({ context }) {
    const page = await get(context).newPage();
    const id = name('p', page);
    watchPage(id, page);
    return id;
  },
  async closePage({ page }) {
    await get(page).close();
    objects.delete(page);
  },
  async addInitScript({ context, script }) {
    await get(context).addInitScript({ content: script });
  },
  // Requests matching pattern (a glob) go to the test, which answers with fulfil or continue.
  async route({ context, page, pattern }) {
    const target = page || context;
    await get(target).route(pattern, async (route, request) => {
      const rid = `r${++next}`;
      const answer = new Promise((resolve) => routes.set(rid, resolve));
      send({
        event: 'route', target, route: rid,
        request: { method: request.method(), url: request.url(), headers: await request.allHeaders(), postData: request.postData() ?? '' },
      });
      const a = await answer;
      routes.delete(rid);
      if (a.continue) {
        await route.continue({ headers: a.headers });
      } else {
        await route.fulfill({ status: a.status, headers: a.headers, body: a.body ?? '' });
      }
    });
  },
  async answerRoute({ route, answer }) {
    const resolve = routes.get(route);
    if (!resolve) throw new Error(`no pending route ${route}`);
    resolve(answer);
  },
  async cookies({ context, urls }) {
    return await get(context).cookies(urls);
  },
  async addCookies({ context, cookies }) {
    await get(context).addCookies(cookies);
  },
  async goto({ page, url }) {
    const r = await get(page).goto(url);
    return r ? r.status() : 0;
  },
  async url({ page }) {
    return get(page).url();
  },
  async waitVisible({ page, selector }) {
    await get(page).locator(selector).first().waitFor({ state: 'visible' });
  },
  async click({ page, selector }) {
    await get(page).locator(selector).first().click();
  },
  async fill({ page, selector, value }) {
    await get(page).locator(selector).first().fill(value);
  },
  async type({ page, selector, text }) {
    await get(page).locator(selector).first().pressSequentially(text);
  },
  async press({ page, key }) {
    await get(page).keyboard.press(key);
  },
  async innerText({ page, selector }) {
    return await get(page).locator(selector).first().innerText();
  },
  async textContent({ page, selector }) {
    return (await get(page).locator(selector).first().textContent()) ?? '';
  },
  async attribute({ page, selector, attribute }) {
    return await get(page).locator(selector).first().getAttribute(attribute);
  },
  async evaluate({ page, expression }) {
    const v = await get(page).evaluate(expression);
    return v === undefined ? null : v;
  },
  // Polls with evaluate, which DevTools runs outside the page's CSP (waitForFunction would
  // eval a string in the page, which a strict CSP refuses); a navigation under way destroys
  // the context the expression runs in, so an error is tried again until the deadline.
  async waitFor({ page, expression, timeout: ms }) {
    const p = get(page);
    const within = ms || timeout;
    const deadline = Date.now() + within;
    let last;
    for (;;) {
      try {
        const v = await p.evaluate(expression);
        if (v) return v;
        last = undefined;
      } catch (e) {
        last = e;
      }
      if (Date.now() > deadline) {
        throw new Error(`${expression} still not true after ${within} ms${last ? `: ${last.message}` : ''}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  },
  async screenshot({ page }) {
    return (await get(page).screenshot({ fullPage: true, type: 'png' })).toString('base64');
  },
  async setViewport({ page, width, height }) {
    await get(page).setViewportSize({ width, height });
  },
  // A DevTools session of the page (the WebAuthn domain, Network and Log events); events named
  // in events are sent to the test.
  async cdpSession({ page, events }) {
    const p = get(page);
    const session = await p.context().newCDPSession(p);
    const id = name('s', session);
    for (const method of events || []) {
      session.on(method, (params) => send({ event: 'cdp', target: id, method, params }));
    }
    return id;
  },
  async cdp({ session, method, params }) {
    return await get(session).send(method, params || {});
  },
};

const lines = createInterface({ input: process.stdin });
lines.on('line', async (line) => {
  if (!line.trim()) return;
  let m;
  try {
    m = JSON.parse(line);
  } catch (e) {
    send({ id: 0, error: `not JSON: ${line}` });
    return;
  }
  try {
    const op = ops[m.op];
    if (!op) throw new Error(`no operation ${m.op}`);
    send({ id: m.id, result: (await op(m)) ?? null });
  } catch (e) {
    send({ id: m.id, error: String(e?.message || e) });
  }
});
lines.on('close', () => shutdown(0));
send({ event: 'ready', version: browser.version() });
