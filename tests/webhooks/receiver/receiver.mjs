// A webhook receiver for mnv's tests that checks every delivery with the Standard Webhooks
// reference library (npm standardwebhooks), so our signatures are proven by code we did not
// write, as a client's receiver would check them.
//
//   node receiver.mjs [port]        listens on 127.0.0.1:<port> (0 or none: any free port) and
//                                   prints {"port": N} as one JSON line on stdout once listening.
//
//   POST /_config   {path, secrets: ["whsec_…"], failFirst, status, delayMs, toleranceSeconds}
//                   (re)configures a path; its records are kept. failFirst answers `status`
//                   (default 500) to the first N attempts of each webhook-id; delayMs holds every
//                   answer; toleranceSeconds widens the library's ±5 minute timestamp check (only
//                   the self-test of a published example needs it).
//   POST <path>     verifies with each configured secret (ok if any verifies), records the
//                   attempt and answers 2xx, or the configured failure, or 400 if nothing
//                   verifies (404 for a path never configured).
//   GET /_received?path=…   the records of that path (all paths without it), oldest first.
import http from "node:http";
import { Webhook, WebhookVerificationError } from "standardwebhooks";

const maxBody = 5 << 20;

// Tolerant replaces only the timestamp window of the reference check; the signature is still
// computed and compared by the library.
class Tolerant extends Webhook {
  constructor(secret, toleranceSeconds) {
    super(secret);
    this.toleranceSeconds = toleranceSeconds;
  }
  verifyTimestamp(header) {
    const ts = parseInt(header, 10);
    if (Number.isNaN(ts)) {
      throw new WebhookVerificationError("Invalid Signature Headers");
    }
    if (Math.abs(Math.floor(Date.now() / 1000) - ts) > this.toleranceSeconds) {
      throw new WebhookVerificationError("Message timestamp outside the configured tolerance");
    }
    return new Date(ts * 1000);
  }
}

const configs = new Map(); // path -> {verifiers, failFirst, status, delayMs}
const records = []; // every attempt, in arrival order
const attempts = new Map(); // `${path} ${webhookId}` -> attempts so far

function configure(c) {
  if (typeof c.path !== "string" || !c.path.startsWith("/") || c.path.startsWith("/_")) {
    throw new Error("path must start with / and not with /_");
  }
  const secrets = c.secrets ?? [];
  if (!Array.isArray(secrets)) {
    throw new Error("secrets must be an array");
  }
  const tolerance = c.toleranceSeconds;
  const verifiers = secrets.map((s) => (tolerance == null ? new Webhook(s) : new Tolerant(s, tolerance)));
  configs.set(c.path, {
    verifiers,
    failFirst: c.failFirst ?? 0,
    status: c.status ?? 500,
    delayMs: c.delayMs ?? 0,
  });
}

function json(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size > maxBody) {
        reject(new Error("body too large"));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function receive(req, res, path) {
  const raw = await readBody(req);
  const receivedAt = Date.now();
  const webhookId = req.headers["webhook-id"] ?? null;
  const key = `${path} ${webhookId}`;
  const attempt = (attempts.get(key) ?? 0) + 1;
  attempts.set(key, attempt);
  let body = null;
  try {
    body = JSON.parse(raw);
  } catch {
    // kept as rawBody only
  }
  const rec = {
    path,
    webhookId,
    timestamp: req.headers["webhook-timestamp"] ?? null,
    signatureHeader: req.headers["webhook-signature"] ?? null,
    verifiedWith: -1,
    error: null,
    body,
    rawBody: raw,
    contentType: req.headers["content-type"] ?? null,
    receivedAt,
    attempt,
  };
  records.push(rec);
  const cfg = configs.get(path);
  if (!cfg) {
    rec.error = "path not configured";
    return json(res, 404, { error: rec.error });
  }
  const errors = [];
  cfg.verifiers.forEach((wh, i) => {
    if (rec.verifiedWith >= 0) return;
    try {
      wh.verify(raw, req.headers);
      rec.verifiedWith = i;
    } catch (e) {
      errors.push(`secret ${i}: ${e.message}`);
    }
  });
  if (rec.verifiedWith < 0) {
    rec.error = errors.length ? errors.join("; ") : "no secret configured";
    return json(res, 400, { error: rec.error });
  }
  if (cfg.delayMs > 0) {
    await sleep(cfg.delayMs);
  }
  if (attempt <= cfg.failFirst) {
    return json(res, cfg.status, { failing: attempt });
  }
  return json(res, 200, { ok: true });
}

const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, "http://receiver");
    if (req.method === "POST" && url.pathname === "/_config") {
      configure(JSON.parse(await readBody(req)));
      return json(res, 200, { ok: true });
    }
    if (req.method === "GET" && url.pathname === "/_received") {
      const path = url.searchParams.get("path");
      return json(res, 200, path == null ? records : records.filter((r) => r.path === path));
    }
    if (req.method === "POST" && !url.pathname.startsWith("/_")) {
      return await receive(req, res, url.pathname);
    }
    return json(res, 405, { error: `${req.method} ${url.pathname} is not served` });
  } catch (e) {
    if (!res.headersSent) json(res, 400, { error: e.message });
  }
});

const port = Number(process.argv[2] ?? 0);
server.listen(port, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n");
});
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => process.exit(0)); // the records die with the test that asked for them
}
