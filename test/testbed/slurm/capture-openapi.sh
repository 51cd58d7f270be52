#!/usr/bin/env bash
# Saves the OpenAPI document that a running test bed's slurmrestd serves
# (GET /openapi/v3) as internal/slurmrest/spec/raw/slurm-<version>.json.
# Usage: capture-openapi.sh <env file> <out dir>
set -euo pipefail
envfile=$1 out=$2
# shellcheck disable=SC1090
. "$envfile"
tok=$(cat "$STRATA_TB_ADMIN_TOKEN_FILE")
dst=$out/slurm-$STRATA_TB_SLURM_VERSION.json
curl -sf -m 60 -H "X-SLURM-USER-TOKEN: $tok" "$STRATA_TB_REST_URL/openapi/v3" | jq -S . >"$dst.tmp"
mv "$dst.tmp" "$dst"
echo "captured $dst from Slurm $STRATA_TB_SLURM_RELEASE ($(jq '.paths|length' "$dst") paths)"
