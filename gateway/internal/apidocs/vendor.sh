#!/usr/bin/env bash
# Refreshes the vendored Redoc (the API reference page's renderer, MIT) from npm at the pinned
# version, checked against npm's integrity for that version: make apidocs. To move to another
# version, set both and run it; the page must still render /v1/api/openapi.json under its CSP.
set -euo pipefail
version=2.5.4
integrity=sha512-M6jWhG1qoBnH6TFmzJnstyCZ87HmOY/UzDm78mHiYihEdlV/YcS9ogOo1NlElnJMeLsyxHFe2yFc4sNjHTrABQ==

cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "redoc@$version" >/dev/null)
got="sha512-$(openssl dgst -sha512 -binary "$tmp/redoc-$version.tgz" | base64 -w0)"
if [ "$got" != "$integrity" ]; then
  echo "redoc-$version.tgz: integrity $got, want $integrity" >&2
  exit 1
fi
tar -xzf "$tmp/redoc-$version.tgz" -C "$tmp"
cp "$tmp/package/bundles/redoc.standalone.js" redoc.standalone.js
cp "$tmp/package/bundles/redoc.standalone.js.LICENSE.txt" redoc.standalone.js.LICENSE.txt
cp "$tmp/package/LICENSE" LICENSE
echo "redoc $version" > VERSION
