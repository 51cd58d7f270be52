#!/usr/bin/env bash
# The last step of `make demo`: the portal's pages, running. Checks in
# headless Chromium that each page renders for alice and for the cluster's
# operator (signing in with one-time links, in English and Korean; the
# screenshots kept in OUT), then prints the URL and fresh one-time sign-in
# links for both.
#
#   pages.sh PORTAL_CONFIG OUT [ALICE_PAGES [OPERATOR_PAGES]]
#
# PORTAL_CONFIG is the config strata-portal-api serve runs with (its
# pages.public_url is where the pages are); the pages are comma-separated
# paths. BIN (./bin) holds strata-portal-api and strata-demo; OPERATOR (root,
# the test bed's Slurm administrator and the demo policy's cluster admin)
# signs in as the operator. demo.sh runs it with its portal; it runs as
# well on its own against any portal serving the pages.
set -euo pipefail

if [ $# -lt 2 ] || [ ! -s "$1" ]; then echo "usage: pages.sh PORTAL_CONFIG OUT [ALICE_PAGES [OPERATOR_PAGES]]" >&2; exit 2; fi
CONFIG=$1 OUT=$2
ALICE_PAGES=${3:-/,/jobs,/submit,/operator}
OPERATOR=${OPERATOR:-root}
CLUSTER=$(sed -n 's/^  - name: *//p' "$CONFIG" | head -1)
OPERATOR_PAGES=${4:-/operator,/operator/nodes/$CLUSTER,/operator/jobs?state=RUNNING}
BIN=${BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/bin}
die() { echo "demo: $*" >&2; exit 1; }

link() {
  local l
  l=$("$BIN/strata-portal-api" --log-level warn --config "$CONFIG" login-link --user "$1" 2>/dev/null) || die "login-link --user $1 failed"
  echo "$l"
}
URL=$(sed -n 's/^  public_url: *//p' "$CONFIG" | head -1)
[ -n "$URL" ] || die "$CONFIG has no pages.public_url: login-link needs it to print a whole link"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/signin" || true)" = 200 ] || die "the pages do not answer at $URL/signin"

mkdir -p "$OUT"
echo "   each page opened in headless Chromium as alice and as $OPERATOR (signed in with one-time links), in English and Korean:"
"$BIN/strata-demo" -shots "$OUT" \
  -visit "alice $(link alice) $ALICE_PAGES" \
  -visit "$OPERATOR $(link "$OPERATOR") $OPERATOR_PAGES" || die "a page did not render (screenshots of those that did: $OUT)"
echo
echo "   The pages are running at $URL"
echo "   Sign in once with each link (each is good once, for 15 minutes; make more with"
echo "   $BIN/strata-portal-api --config $CONFIG login-link --user USER):"
echo "     alice (researcher, acme's admin): $(link alice)"
echo "     $OPERATOR (the cluster's operator):  $(link "$OPERATOR")"
