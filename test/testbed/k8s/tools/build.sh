#!/usr/bin/env bash
# Builds the Kubernetes test bed's binaries (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok) from this tool module and
# prints the directory that holds them. Binaries are cached outside the
# checkout under $STRATA_KUBE_CACHE (default /var/cache/strata/kubebin), keyed
# by a hash of go.mod, go.sum and the main packages, so only the first run on a
# machine pays for the build (~15 min on 2 cores, ~4.7 GB peak memory).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${STRATA_KUBE_CACHE:-/var/cache/strata/kubebin}
version=v1.37.2
key=$(cd "$here" && cat go.mod go.sum build.sh $(find cmd -name '*.go' | sort) | sha256sum | cut -c1-16)
out="$cache/$key"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
complete() { for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || return 1; done; }
if complete; then echo "$out"; exit 0; fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if complete; then echo "$out"; exit 0; fi
tmp=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "building Kubernetes $version test-bed binaries into $out (first run on this machine: ~15 min)" >&2
ldf="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1"
ldf+=" -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
(cd "$here" && GOFLAGS=-mod=readonly GOWORK=off go build -trimpath -ldflags "$ldf" -o "$tmp/" ./cmd/... ) >&2
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
