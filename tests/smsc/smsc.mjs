// A test SMSC for mnv's SMPP client, built on npm's smpp server: the PDUs are parsed and written,
// and the texts decoded (GSM 03.38, UCS-2, the concatenation header), by that library, not by
// our Go code. The Go tests start it with `node smsc.mjs`, read {"smpp":port,"control":port} from
// its first line of stdout, and steer it over a small HTTP control port:
//
//   POST /config   {systemId, password, undeliverable: [numbers], refuse: [numbers], receiptDelayMs,
//                  refuseReceipts, receiptReference, receiptRetryMs}  (a submit to a refused number is answered
//                  ESME_RINVDSTADR; receiptReference false leaves user_message_reference out of
//                  the receipts, as some operators' SMSCs do; "alternate" leaves it out of every
//                  other receipt, so one run meets both kinds)
//   POST /throttle {count}        answer the next count submit_sm with ESME_RTHROTTLED
//   POST /dropAfter {count, mode} after count more submit_sm are answered, take the next one
//                                 unanswered and end the session ("close": FIN after what was
//                                 written, the default; "reset": destroy at once; "unbind")
//   POST /unbind                  send unbind on every bound session
//   POST /drop {mode}             end every connection now
//   POST /enquire                 send enquire_link on every bound session
//   GET  /enquired                the answers to those: {sessionId, command, status}
//   GET  /received                every submit_sm, answered or not, oldest first
//   GET  /receipts                every receipt sent, and whether the client acknowledged it
//   GET  /binds                   every bind attempt and its answer
//
// A submit_sm is "accepted" once its submit_sm_resp with a message id has been written; one
// read on a session that is being dropped or unbound is recorded unanswered and never accepted,
// so a test can tell a message the client lost from one the SMSC took.
//
// Receipts behave as an operator's: each echoes the submit's user_message_reference (unless
// receiptReference is false) and carries the text's first 20 characters, and one the client did
// not acknowledge before its session ended (a process killed, a dropped connection) is sent
// again on the next bind rather than lost; one it answered with an error status is sent again
// after receiptRetryMs (200 ms).
//
// With SMSC_TLS_CERT and SMSC_TLS_KEY (PEM files) in its environment, the SMPP port speaks TLS
// only (npm smpp's server over node:tls); the control port stays plain HTTP.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import smpp from 'smpp';

const config = {
  systemId: 'mnv',
  password: 'secret',
  undeliverable: [],
  refuse: [],
  receiptDelayMs: 0,
  refuseReceipts: false,
  receiptReference: true,
  receiptRetryMs: 200,
};
let throttle = 0;
let dropAfter = null; // {count, mode}
let nextId = 0x10000;
let nextSession = 0;
const received = [];
const receipts = [];
const binds = [];
const enquired = [];
const bound = new Set();
const pendingReceipts = []; // receipts waiting for a bound session
let alternate = false; // receiptReference "alternate": whether the last receipt echoed it

function hexId() {
  nextId += 1;
  return nextId.toString(16);
}

// The concatenation IE (0x00, 8-bit reference, or 0x08, 16-bit) of a decoded user data header.
function concat(udh) {
  for (const ie of udh || []) {
    if (ie[0] === 0x00 && ie[1] === 3) return { ref: ie[2], total: ie[3], seq: ie[4] };
    if (ie[0] === 0x08 && ie[1] === 4) return { ref: ie.readUInt16BE(2), total: ie[4], seq: ie[5] };
  }
  return null;
}

function yymmddhhmm(d) {
  const p = (n) => String(n).padStart(2, '0');
  return p(d.getUTCFullYear() % 100) + p(d.getUTCMonth() + 1) + p(d.getUTCDate()) + p(d.getUTCHours()) + p(d.getUTCMinutes());
}

// receiptText is a message's start as the receipt's text field shows it: its first 20
// characters, up to the first that GSM 03.38 does not write as its ASCII octet, so the receipt
// stays one GSM text (npm's smpp would otherwise send it all as UCS-2 or Latin-1).
function receiptText(text) {
  const chars = [...(text || '')].slice(0, 20);
  const cut = chars.findIndex((c) => c.charCodeAt(0) >= 0x80 || '@$_`^{}[]~\\|'.includes(c));
  return (cut < 0 ? chars : chars.slice(0, cut)).join('');
}

function sendReceipt(r) {
  const session = [...bound][0];
  if (!session) {
    pendingReceipts.push(r);
    return;
  }
  const rec = { messageId: r.messageId, dest: r.dest, stat: r.stat, sessionId: session.id, acked: false, status: null, reference: null };
  const text = `id:${r.messageId} sub:001 dlvrd:${r.stat === 'DELIVRD' ? '001' : '000'} submit date:${yymmddhhmm(r.at)} done date:${yymmddhhmm(new Date())} stat:${r.stat} err:${r.stat === 'DELIVRD' ? '000' : '001'} text:${receiptText(r.text)}`;
  const pdu = {
    source_addr: r.dest,
    destination_addr: r.source,
    esm_class: smpp.ESM_CLASS.MC_DELIVERY_RECEIPT,
    short_message: text,
    receipted_message_id: r.messageId,
    message_state: r.stat === 'DELIVRD' ? smpp.MESSAGE_STATE.DELIVERED : smpp.MESSAGE_STATE.UNDELIVERABLE,
  };
  if (r.echo === undefined) { // decided once per receipt, so a receipt sent again is the same
    r.echo = config.receiptReference === 'alternate' ? (alternate = !alternate) : !!config.receiptReference;
  }
  if (r.echo && r.reference != null) {
    pdu.user_message_reference = r.reference;
    rec.reference = r.reference;
  }
  const sent = session.deliver_sm(pdu, (resp) => {
    session.unacked.delete(r);
    rec.acked = resp.command_status === 0;
    rec.status = resp.command_status;
    // A non-zero answer (ESME_RX_T_APPN: the client could not take it yet) is "not delivered":
    // an operator's SMSC keeps the receipt and tries again later, on whatever session is bound.
    if (resp.command_status !== 0) setTimeout(() => sendReceipt(r), config.receiptRetryMs);
  });
  if (sent === false) { // the socket was no longer writable: not sent at all
    pendingReceipts.push(r);
    return;
  }
  session.unacked.add(r);
  receipts.push(rec);
}

function endSession(session, mode) {
  session.dropping = true;
  bound.delete(session);
  if (mode === 'unbind') session.unbind(); // the client's unbind_resp ends it
  else if (mode === 'reset') session.destroy();
  else session.close(); // socket.end(): what was written is delivered, then FIN
}

// A client killed mid-session (kill -9) can leave a write racing the reset; the SMSC must
// outlive it, as an operator's does, and say so on stderr.
process.on('uncaughtException', (err) => console.error('smsc: uncaught:', err));

const tlsOptions = process.env.SMSC_TLS_CERT
  ? { cert: readFileSync(process.env.SMSC_TLS_CERT), key: readFileSync(process.env.SMSC_TLS_KEY) }
  : {};

const server = smpp.createServer(tlsOptions, (session) => {
  session.id = ++nextSession;
  session.dropping = false;
  session.on('error', () => {}); // a client that went away; nothing to do
  session.unacked = new Set(); // receipts sent on this session and not acknowledged yet
  session.on('close', () => {
    bound.delete(session);
    // An operator's SMSC keeps a receipt until it is acknowledged: what this session never
    // acknowledged goes to another bound session, or waits for the next bind.
    const unacked = [...session.unacked];
    session.unacked.clear();
    for (const r of unacked) sendReceipt(r);
  });

  session.on('bind_transceiver', (pdu) => {
    let status = 0;
    if (pdu.system_id !== config.systemId) status = smpp.ESME_RINVSYSID;
    else if (pdu.password !== config.password) status = smpp.ESME_RINVPASWD;
    binds.push({ sessionId: session.id, systemId: pdu.system_id, systemType: pdu.system_type, interfaceVersion: pdu.interface_version, status });
    if (status !== 0) {
      session.send(pdu.response({ command_status: status }));
      session.close();
      return;
    }
    session.send(pdu.response({ system_id: 'npm-smpp' }));
    bound.add(session);
    while (pendingReceipts.length && bound.size) sendReceipt(pendingReceipts.shift());
  });

  session.on('enquire_link', (pdu) => session.send(pdu.response()));

  session.on('unbind', (pdu) => {
    session.send(pdu.response());
    endSession(session, 'close');
  });

  session.on('unbind_resp', () => endSession(session, 'close'));

  session.on('submit_sm', (pdu) => {
    const sm = pdu.short_message || {};
    const rec = {
      sessionId: session.id,
      seq: pdu.sequence_number,
      source: pdu.source_addr,
      sourceTon: pdu.source_addr_ton,
      dest: pdu.destination_addr,
      destTon: pdu.dest_addr_ton,
      dataCoding: pdu.data_coding,
      esmClass: pdu.esm_class,
      registeredDelivery: pdu.registered_delivery,
      text: typeof sm === 'string' ? sm : sm.message,
      concat: concat(sm.udh),
      reference: pdu.user_message_reference ?? null,
      status: null,
      messageId: null,
      answered: false,
    };
    received.push(rec);
    if (session.dropping || !bound.has(session)) return; // unanswered, never accepted
    if (dropAfter && dropAfter.count-- <= 0) {
      const mode = dropAfter.mode;
      dropAfter = null;
      endSession(session, mode);
      return;
    }
    if (throttle > 0) {
      throttle--;
      rec.status = smpp.ESME_RTHROTTLED;
      rec.answered = true;
      session.send(pdu.response({ command_status: smpp.ESME_RTHROTTLED }));
      return;
    }
    if (config.refuse.includes(rec.dest)) {
      rec.status = smpp.ESME_RINVDSTADR;
      rec.answered = true;
      session.send(pdu.response({ command_status: smpp.ESME_RINVDSTADR }));
      return;
    }
    rec.status = 0;
    rec.messageId = hexId();
    rec.answered = true;
    session.send(pdu.response({ message_id: rec.messageId }));
    if ((pdu.registered_delivery & 0x03) && !config.refuseReceipts) {
      const r = {
        messageId: rec.messageId, source: rec.source, dest: rec.dest, at: new Date(),
        stat: config.undeliverable.includes(rec.dest) ? 'UNDELIV' : 'DELIVRD',
        text: rec.text, reference: rec.reference,
      };
      setTimeout(() => sendReceipt(r), config.receiptDelayMs);
    }
  });
});

function body(req) {
  return new Promise((resolve, reject) => {
    let data = '';
    req.on('data', (c) => { data += c; });
    req.on('end', () => {
      try { resolve(data ? JSON.parse(data) : {}); } catch (e) { reject(e); }
    });
  });
}

const control = http.createServer(async (req, res) => {
  const json = (code, v) => { res.writeHead(code, { 'content-type': 'application/json' }); res.end(JSON.stringify(v)); };
  try {
    const url = new URL(req.url, 'http://x');
    if (req.method === 'GET' && url.pathname === '/received') return json(200, received);
    if (req.method === 'GET' && url.pathname === '/receipts') return json(200, receipts);
    if (req.method === 'GET' && url.pathname === '/binds') return json(200, binds);
    if (req.method === 'GET' && url.pathname === '/enquired') return json(200, enquired);
    if (req.method !== 'POST') return json(404, { error: 'not found' });
    const b = await body(req);
    switch (url.pathname) {
      case '/config':
        Object.assign(config, b);
        config.undeliverable = config.undeliverable || []; // Go sends a nil list as null
        config.refuse = config.refuse || [];
        return json(200, config);
      case '/throttle': throttle = b.count | 0; return json(200, { throttle });
      case '/dropAfter': dropAfter = { count: b.count | 0, mode: b.mode || 'close' }; return json(200, dropAfter);
      case '/unbind':
        for (const s of [...bound]) endSession(s, 'unbind');
        return json(200, {});
      case '/enquire':
        for (const s of [...bound]) {
          s.enquire_link((resp) => enquired.push({ sessionId: s.id, command: resp.command, status: resp.command_status }));
        }
        return json(200, {});
      case '/drop':
        for (const s of [...server.sessions]) endSession(s, b.mode || 'close');
        return json(200, {});
      default: return json(404, { error: 'not found' });
    }
  } catch (e) {
    return json(400, { error: String(e) });
  }
});

server.listen(0, '127.0.0.1', () => {
  control.listen(0, '127.0.0.1', () => {
    process.stdout.write(JSON.stringify({ smpp: server.address().port, control: control.address().port }) + '\n');
  });
});
