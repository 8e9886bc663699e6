// A real HTTP server for the tests: each test sets how it answers and reads what it received.
import http from 'node:http';

export async function startServer() {
  const s = { requests: [], handle: null };
  s.server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      s.requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      s.handle(req, res, s.requests.length);
    });
  });
  await new Promise((resolve) => s.server.listen(0, '127.0.0.1', resolve));
  s.origin = `http://127.0.0.1:${s.server.address().port}`;
  s.baseUrl = s.origin + '/v1/api';
  s.close = () => {
    s.server.closeAllConnections();
    return new Promise((resolve) => s.server.close(resolve));
  };
  return s;
}

// envelope answers like the gateway does.
export function reply(res, status, data, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'application/json', 'X-Request-Id': 'req-' + status, ...headers });
  res.end(JSON.stringify({ success: true, data, messages: [{ type: 'SUCCESS', message: 'ok', httpStatus: 'OK', technical: false }] }));
}

export function fail(res, status, code, { field, headers = {} } = {}) {
  res.writeHead(status, { 'Content-Type': 'application/json', 'X-Request-Id': 'req-' + status, ...headers });
  const m = { type: 'ERROR', code, message: code + ' happened', httpStatus: 'X', technical: status >= 500 };
  if (field) m.field = field;
  res.end(JSON.stringify({ success: false, data: null, messages: [m] }));
}

export const captured = { transactionId: 'tx', status: 'CAPTURED', operatorId: 'sandbox', encryptedMobileNumber: 'AQ', expiresAt: '2026-01-01T00:00:00.000Z' };
