// Writes dist/mnv.global.js: src/mnv.js as a classic script that defines window.Mnv, for pages
// that load it with <script src>. No bundler: the module has no imports, so the wrap is its
// source with the `export` keywords dropped and import.meta.url (a syntax error in a classic
// script) replaced by the script's own address, read while it runs.
//
//   node scripts/build-global.mjs           write dist/mnv.global.js
//   node scripts/build-global.mjs --check   fail when the committed copy is stale
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = readFileSync(join(root, 'src/mnv.js'), 'utf8');
const out = join(root, 'dist/mnv.global.js');

const scriptUrlLine = 'const SCRIPT_URL = import.meta.url;';
if (src.split(scriptUrlLine).length !== 2) {
  throw new Error(`src/mnv.js must hold the line "${scriptUrlLine}" exactly once`);
}
const names = [];
let body = src
  .replace(scriptUrlLine, "const SCRIPT_URL = typeof document !== 'undefined' && document.currentScript ? document.currentScript.src : '';")
  .replace(/^export (class|function|async function|const) ([A-Za-z_$][\w$]*)/gm, (_, kind, name) => {
    names.push(name);
    return `${kind} ${name}`;
  });
if (/^\s*(import|export)\b|import\.meta/m.test(body)) {
  throw new Error('src/mnv.js has an import or export form the wrap does not handle');
}
names.sort();
body = body.replace(/^(?=.)/gm, '  ');

const global = `// Generated from src/mnv.js by scripts/build-global.mjs; do not edit.
// mnv browser SDK as a classic script: defines window.Mnv = { ${names.join(', ')} }.
(function (global) {
  'use strict';
${body}
  global.Mnv = Object.freeze({ ${names.join(', ')} });
})(typeof window !== 'undefined' ? window : globalThis);
`;

if (process.argv.includes('--check')) {
  let have = '';
  try {
    have = readFileSync(out, 'utf8');
  } catch {}
  if (have !== global) {
    console.error('sdk/web/dist/mnv.global.js is stale: run make generate and commit');
    process.exit(1);
  }
} else {
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, global);
}
