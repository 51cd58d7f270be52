#!/usr/bin/env bash
# Strata's Kubernetes test bed: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok (fake GPU nodes whose pods "run" at once), built from
# the Go module proxy by tools/build.sh and started on loopback only. See
# README.md beside this file.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: testbed.sh <command> [options]

Commands:
  build     build the binaries (etcd, kube-apiserver, kube-controller-manager,
            kube-scheduler, kwok) into the cache and print their folder
            (~15 min once per machine, then 0 s)
  up        start the test bed (builds the binaries first if they are not cached);
            does nothing if it is already running
  down      stop every daemon by the PID it recorded (SIGTERM, then SIGKILL after 30 s)
  status    show the daemons, their PIDs and memory, and whether the API answers
  env       print the environment file of a running test bed
  logs      print the tail of every daemon log (what a failing test shows)

Options (or the variables in brackets):
  --name N        instance name; instances with different names and ports
                  can run side by side                                   [KTB_NAME, default k8s]
  --port-base P   etcd client port P, etcd peer port P+1,
                  kube-apiserver (HTTPS) P+64                            [KTB_PORT_BASE, default 16379]
  --nodes N       fake GPU nodes kwok-gpu-1..N                           [KTB_NODES, default 2]
  --gpus N        nvidia.com/gpu per node                                [KTB_GPUS, default 8]
  --fresh         (up) empty etcd, new certificates, token and keys      [KTB_FRESH=1]
  --purge         (down) also delete the instance folder

Paths: binaries are cached in STRATA_KUBE_CACHE/<key> (/var/cache/strata/kubebin);
instances live in TB_STATE/<name> (/var/lib/strata/testbed). The environment file is
TB_STATE/<name>/env; tests find it through STRATA_KUBE_ENV (see internal/kubetest).

Examples:
  testbed.sh up                       # instance k8s on 16379/16380/16443
  testbed.sh up --fresh --nodes 4     # start over with 4 nodes
  testbed.sh up --name k8s2 --port-base 17379
  . <(testbed.sh env); curl --cacert $STRATA_KUBE_CA -H "Authorization: Bearer $(cat $STRATA_KUBE_TOKEN_FILE)" $STRATA_KUBE_SERVER/version
USAGE
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CMD=${1:-}; [ $# -gt 0 ] && shift
KTB_NAME=${KTB_NAME:-k8s}
KTB_PORT_BASE=${KTB_PORT_BASE:-} # default: what the instance last used, else 16379
KTB_NODES=${KTB_NODES:-2}
KTB_GPUS=${KTB_GPUS:-8}
KTB_FRESH=${KTB_FRESH:-0}
PURGE=0
while [ $# -gt 0 ]; do
  case $1 in
    --name) KTB_NAME=$2; shift 2 ;;
    --port-base) KTB_PORT_BASE=$2; shift 2 ;;
    --nodes) KTB_NODES=$2; shift 2 ;;
    --gpus) KTB_GPUS=$2; shift 2 ;;
    --fresh) KTB_FRESH=1; shift ;;
    --purge) PURGE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "testbed: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $KTB_NAME =~ ^[a-z0-9][a-z0-9-]*$ ]] || { echo "testbed: --name must be lower-case letters, digits and '-', got '$KTB_NAME'" >&2; exit 2; }
TB_STATE=${TB_STATE:-/var/lib/strata/testbed}
INST=$TB_STATE/$KTB_NAME
if [ -z "$KTB_PORT_BASE" ]; then
  KTB_PORT_BASE=16379
  if [ -s "$INST/port-base" ]; then KTB_PORT_BASE=$(cat "$INST/port-base"); fi
fi
for v in KTB_PORT_BASE KTB_NODES KTB_GPUS; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "testbed: $v must be a number, got '${!v}'" >&2; exit 2; }
done
[ "$KTB_NODES" -ge 1 ] || { echo "testbed: --nodes must be at least 1" >&2; exit 2; }

PIDS=$INST/pids
LOGS=$INST/log
CERTS=$INST/certs
KUBECONFIG_FILE=$INST/kubeconfig
P_ETCD=$KTB_PORT_BASE
P_PEER=$((KTB_PORT_BASE + 1))
P_API=$((KTB_PORT_BASE + 64))
SERVER=https://127.0.0.1:$P_API
POD_CIDR=203.0.113.0/24 # TEST-NET-3: pod IPs are only data here; never connect to them
SERVICE_CIDR=10.0.0.0/24
# resourcequota-controller keeps each ResourceQuota's used counts, which the
# ResourceQuota admission checks pods against.
CONTROLLERS=resourcequota-controller,deployment-controller,replicaset-controller,garbage-collector-controller,namespace-controller,endpointslice-controller,serviceaccount-controller,horizontal-pod-autoscaler-controller,pod-garbage-collector-controller
# Stop order: clients of the API first, etcd last.
DAEMONS=(kwok kube-scheduler kube-controller-manager kube-apiserver etcd)
NODE_NAMES=$(for i in $(seq 1 "$KTB_NODES"); do printf 'kwok-gpu-%d ' "$i"; done); NODE_NAMES=${NODE_NAMES% }

log() { printf '[k8s testbed %s] %s\n' "$KTB_NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
need_root() { [ "$(id -u)" = 0 ] || die "must run as root (the state and cache folders are under /var)"; }

# One up or down at a time per instance (two `make test` runs, or a test
# restarting the bed while someone else runs `down`).
lock() { mkdir -p "$TB_STATE"; exec 8>"$TB_STATE/.$KTB_NAME.k8s.lock"; flock 8; }

# Integration tests hold <instance>/test.lock while they use the bed
# (internal/kubetest: shared, or exclusive for tests that count GPUs); a
# restart or a stop waits for them to end rather than pull the bed away.
test_lock() {
  exec 7>>"$INST/test.lock"
  if ! flock -n -x 7; then
    log "waiting for the tests using this bed to end (they hold $INST/test.lock)"
    flock -x -w 1200 7 || die "tests still hold $INST/test.lock after 20 min"
  fi
}

cmd_build() { bash "$HERE/tools/build.sh"; }

# is_ours PID: the process is one of this instance's daemons (every daemon has
# a path inside $INST on its command line), not a reused PID.
is_ours() {
  local cl
  cl=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  [[ $cl == *"$INST/"* ]]
}
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null && is_ours "$(cat "$1")"; }

launch() { # name cmd...
  local name=$1; shift
  # The subshell closes every descriptor it inherited (the instance locks, whose
  # holder would block the next down; a caller's pipe, whose reader would wait
  # for EOF forever) and execs the daemon, so $! is the daemon's own PID.
  (
    for fd in "/proc/$BASHPID/fd/"*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec setsid "$@"
  ) >"$LOGS/$name.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PIDS/$name.pid"
  # Until the subshell has closed its descriptors and exec'd the daemon, its
  # command line is this script's, which is_ours does not know: waitfor would
  # take the daemon for dead. Wait for the exec (or the end) first.
  local i
  for i in $(seq 100); do
    is_ours "$pid" && return 0
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
}

T0=0
waitfor() { # what daemon timeout_s cmd...: poll cmd; fail at once if the daemon exits
  local what=$1 d=$2 t=$3; shift 3
  local end=$(( $(date +%s) + t ))
  while [ "$(date +%s)" -lt "$end" ]; do
    if "$@" >/dev/null 2>&1; then log "$what ready at +$(since "$T0")s"; return 0; fi
    if ! alive "$PIDS/$d.pid"; then
      local p; p=$(cat "$PIDS/$d.pid" 2>/dev/null)
      log "$d exited while starting (PID file: '$p'; the process: $(ps -o pid=,stat=,args= -p "$p" 2>/dev/null | cut -c1-200 || echo none)); the end of $LOGS/$d.log:"
      tail -n 30 "$LOGS/$d.log" >&2 || true
      die "$what did not start"
    fi
    sleep 0.2
  done
  log "$what NOT ready after ${t}s; last lines of the logs:"; cmd_logs >&2 || true
  die "$what did not start"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

token() { cat "$INST/admin.token"; }
api() { # method path [curl args...]: prints the body, then the HTTP code on its own line
  local m=$1 p=$2; shift 2
  curl -sS -m 10 --cacert "$CERTS/apiserver.crt" -H "Authorization: Bearer $(token)" \
    -X "$m" -w '\n%{http_code}' "$@" "$SERVER$p"
}
etcd_healthy() { local b; b=$(curl -sf -m 2 "http://127.0.0.1:$P_ETCD/health") && [[ $b == *'"health":"true"'* ]]; }
api_ready() { local b; b=$(curl -sf -m 5 --cacert "$CERTS/apiserver.crt" -H "Authorization: Bearer $(token)" "$SERVER/readyz") && [ "$b" = ok ]; }

# Nodes are created through the API with status (capacity) in the object, as a
# kubelet registers itself; kwok then sets their conditions. Every node has
# KTB_GPUS whole GPUs (nvidia.com/gpu); besides them, as NVIDIA's device plugin
# advertises them: kwok-gpu-1 has two more GPUs split into MIG slices (mixed
# strategy: 7 x nvidia.com/mig-1g.10gb and 2 x nvidia.com/mig-3g.40gb), and
# kwok-gpu-2 two more shared ones (time-slicing, 4 replicas each:
# 8 x nvidia.com/gpu.shared; MPS, 4 replicas each: 8 x nvidia.com/gpu.mps).
node_json() { # index
  local n="kwok-gpu-$1" zone="zone-a" extra='' xlabels=''
  if [ $(($1 % 2)) -eq 0 ]; then zone="zone-b"; fi
  case $1 in
    1) extra=',"nvidia.com/mig-1g.10gb":"7","nvidia.com/mig-3g.40gb":"2"'
       xlabels=',"nvidia.com/mig.strategy":"mixed","nvidia.com/mig.capable":"true","nvidia.com/mig-1g.10gb.count":"7","nvidia.com/mig-3g.40gb.count":"2"' ;;
    2) extra=',"nvidia.com/gpu.shared":"8","nvidia.com/gpu.mps":"8"'
       xlabels=',"nvidia.com/gpu.replicas":"4","nvidia.com/gpu.sharing-strategy":"time-slicing"' ;;
  esac
  local res='"cpu":"64","memory":"512Gi","pods":"110","nvidia.com/gpu":"'"$KTB_GPUS"'"'"$extra"
  cat <<JSON
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$n",
 "annotations":{"kwok.x-k8s.io/node":"fake","node.alpha.kubernetes.io/ttl":"0"},
 "labels":{"type":"kwok","kubernetes.io/hostname":"$n","kubernetes.io/os":"linux","kubernetes.io/arch":"amd64",
  "nvidia.com/gpu.product":"H100","topology.kubernetes.io/zone":"$zone"$xlabels}},
 "spec":{},
 "status":{"capacity":{$res},"allocatable":{$res}}}
JSON
}

ensure_nodes() {
  local i n out code body
  for i in $(seq 1 "$KTB_NODES"); do
    n=kwok-gpu-$i
    out=$(node_json "$i" | api POST "/api/v1/nodes?pretty=false" -H 'Content-Type: application/json' --data-binary @-) || die "create node $n: curl failed"
    code=${out##*$'\n'}; body=${out%$'\n'*}
    case $code in
      201) ;;
      409) # left from an earlier run (up without --fresh): bring labels and capacity in line,
           # and drop the conditions so kwok's node-initialize stage makes it Ready again
           # (which proves kwok is running, rather than trusting an old Ready).
        out=$(node_json "$i" | jq -c '{metadata: {labels: .metadata.labels, annotations: .metadata.annotations}}' |
          api PATCH "/api/v1/nodes/$n?pretty=false" -H 'Content-Type: application/merge-patch+json' --data-binary @-)
        [ "${out##*$'\n'}" = 200 ] || die "update node $n: ${out%$'\n'*}"
        out=$(node_json "$i" | jq -c '{status: {capacity: .status.capacity, allocatable: .status.allocatable, conditions: null}}' |
          api PATCH "/api/v1/nodes/$n/status?pretty=false" -H 'Content-Type: application/merge-patch+json' --data-binary @-)
        [ "${out##*$'\n'}" = 200 ] || die "update node $n status: ${out%$'\n'*}"
        ;;
      *) die "create node $n: HTTP $code: $body" ;;
    esac
  done
}

nodes_ready() { # all of NODE_NAMES have Ready=True
  local out want got
  out=$(api GET "/api/v1/nodes?labelSelector=type%3Dkwok&pretty=false") || return 1
  [ "${out##*$'\n'}" = 200 ] || return 1
  want=$(tr ' ' '\n' <<<"$NODE_NAMES" | jq -R . | jq -sc .)
  got=$(printf '%s' "${out%$'\n'*}" | jq -c --argjson want "$want" \
    '[.items[] | select(.metadata.name as $n | $want | index($n)) | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length')
  [ "$got" = "$KTB_NODES" ]
}

write_kubeconfig() {
  local ca; ca=$(base64 -w0 <"$CERTS/apiserver.crt")
  umask 077
  cat >"$KUBECONFIG_FILE.tmp" <<KC
apiVersion: v1
kind: Config
clusters:
- name: $KTB_NAME
  cluster:
    server: $SERVER
    certificate-authority-data: $ca
users:
- name: admin
  user:
    token: $(token)
contexts:
- name: $KTB_NAME
  context:
    cluster: $KTB_NAME
    user: admin
current-context: $KTB_NAME
KC
  mv "$KUBECONFIG_FILE.tmp" "$KUBECONFIG_FILE"
  umask 022
}

make_secrets() { # admin token and service-account keys; kept across `up` without --fresh
  umask 077
  [ -s "$INST/admin.token" ] || openssl rand -hex 32 >"$INST/admin.token"
  printf '%s,admin,admin-uid,system:masters\n' "$(token)" >"$INST/tokens.csv"
  if [ ! -s "$INST/sa.key" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$INST/sa.key" 2>/dev/null
    openssl ec -in "$INST/sa.key" -pubout -out "$INST/sa.pub" 2>/dev/null
  fi
  umask 022
}

cmd_up() {
  need_root
  local t
  for t in curl jq openssl flock base64 pgrep; do command -v $t >/dev/null || die "$t is missing: make deps (or apt-get install curl jq openssl procps)"; done
  lock
  local d all=1
  for d in "${DAEMONS[@]}"; do alive "$PIDS/$d.pid" || all=0; done
  if [ "$KTB_FRESH" != 1 ] && [ $all = 1 ] && [ -s "$INST/env" ]; then
    log "already running; environment file: $INST/env"; return 0
  fi
  local bin; bin=$(cmd_build) || die "building the binaries failed"
  for d in "${DAEMONS[@]}"; do [ -x "$bin/$d" ] || die "$bin/$d is missing"; done
  if [ -d "$INST" ]; then test_lock; fi
  T0=$(now)
  down_quiet
  if [ "$KTB_FRESH" = 1 ] && [ -d "$INST" ]; then # everything but the test lock, which we hold
    find "$INST" -mindepth 1 -maxdepth 1 ! -name test.lock -exec rm -rf {} +
  fi
  local p
  for p in $P_ETCD $P_PEER $P_API; do
    port_free "$p" || die "port $p on 127.0.0.1 is in use (another instance? choose --port-base)"
  done
  mkdir -p "$INST" "$PIDS" "$LOGS" "$CERTS"
  echo "$KTB_PORT_BASE" >"$INST/port-base"
  make_secrets
  cp "$HERE/kwok-stages.yaml" "$INST/kwok-stages.yaml"
  # ResourceQuota admission with every nvidia.com/ resource limited: a pod may
  # ask for one only in a namespace whose ResourceQuota names it, so a GPU tier a
  # tenant's quota leaves out is refused by the apiserver itself.
  cat >"$INST/admission.yaml" <<'YAML'
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ResourceQuota
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: ResourceQuotaConfiguration
      limitedResources:
        - resource: pods
          matchContains: ["nvidia.com/"]
YAML

  launch etcd "$bin/etcd" --name=default --data-dir="$INST/etcd" \
    --listen-client-urls="http://127.0.0.1:$P_ETCD" --advertise-client-urls="http://127.0.0.1:$P_ETCD" \
    --listen-peer-urls="http://127.0.0.1:$P_PEER" --initial-advertise-peer-urls="http://127.0.0.1:$P_PEER" \
    --initial-cluster="default=http://127.0.0.1:$P_PEER" --unsafe-no-fsync=true --log-level=warn
  waitfor etcd etcd 60 etcd_healthy

  # --endpoint-reconciler-type=none: 1.37 refuses a loopback --advertise-address otherwise.
  # TaintNodesByCondition would taint new nodes not-ready, and only the node-lifecycle
  # controller (not run here) lifts it; ServiceAccount would make pods wait for the
  # default ServiceAccount.
  launch kube-apiserver "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$P_ETCD" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$P_API" \
    --endpoint-reconciler-type=none --cert-dir="$CERTS" --token-auth-file="$INST/tokens.csv" \
    --authorization-mode=RBAC --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$INST/sa.pub" --service-account-signing-key-file="$INST/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --enable-admission-plugins=ResourceQuota,Priority \
    --admission-control-config-file="$INST/admission.yaml" \
    --disable-admission-plugins=ServiceAccount,TaintNodesByCondition \
    --allow-privileged=true --profiling=false
  waitfor kube-apiserver kube-apiserver 120 api_ready
  write_kubeconfig

  local k=$KUBECONFIG_FILE
  launch kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$k" \
    --authentication-kubeconfig="$k" --authorization-kubeconfig="$k" --secure-port=0 \
    --leader-elect=false --use-service-account-credentials=false --controllers="$CONTROLLERS"
  launch kube-scheduler "$bin/kube-scheduler" --kubeconfig="$k" --authentication-kubeconfig="$k" \
    --authorization-kubeconfig="$k" --secure-port=0 --leader-elect=false
  launch kwok "$bin/kwok" --kubeconfig="$k" --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --cidr="$POD_CIDR" --node-ip=203.0.113.1 -c "$INST/kwok-stages.yaml"
  ensure_nodes
  log "nodes $NODE_NAMES created at +$(since "$T0")s"
  waitfor "$KTB_NODES nodes Ready (kwok)" kwok 60 nodes_ready
  for d in kube-controller-manager kube-scheduler; do
    alive "$PIDS/$d.pid" || { tail -n 30 "$LOGS/$d.log" >&2; die "$d exited; its log: $LOGS/$d.log"; }
  done

  local out kver ever kwver
  out=$(api GET "/version?pretty=false"); kver=$(printf '%s' "${out%$'\n'*}" | jq -r .gitVersion)
  ever=$(curl -sf -m 5 "http://127.0.0.1:$P_ETCD/version" | jq -r .etcdserver)
  kwver=$(awk '$1 == "sigs.k8s.io/kwok" {print $2; exit}' "$HERE/tools/go.mod")
  cat >"$INST/env.tmp" <<ENV
# Kubernetes test bed $KTB_NAME, written by test/testbed/k8s/testbed.sh at $(date -u +%FT%TZ)
STRATA_KUBE_NAME=$KTB_NAME
STRATA_KUBECONFIG=$KUBECONFIG_FILE
STRATA_KUBE_SERVER=$SERVER
STRATA_KUBE_CA=$CERTS/apiserver.crt
STRATA_KUBE_TOKEN_FILE=$INST/admin.token
STRATA_KUBE_VERSION=$kver
STRATA_KUBE_ETCD_VERSION=$ever
STRATA_KUBE_KWOK_VERSION=$kwver
STRATA_KUBE_NODES="$NODE_NAMES"
STRATA_KUBE_GPUS_PER_NODE=$KTB_GPUS
STRATA_KUBE_GPU_RESOURCE=nvidia.com/gpu
STRATA_KUBE_MIG_NODE=kwok-gpu-1
STRATA_KUBE_MIG_RESOURCES="nvidia.com/mig-1g.10gb=7 nvidia.com/mig-3g.40gb=2"
STRATA_KUBE_SHARED_NODE=$([ "$KTB_NODES" -ge 2 ] && echo kwok-gpu-2)
STRATA_KUBE_QUOTA_LIMITED=nvidia.com/
STRATA_KUBE_GPU_PRODUCT=H100
STRATA_KUBE_POD_CIDR=$POD_CIDR
STRATA_KUBE_SERVICE_CIDR=$SERVICE_CIDR
STRATA_KUBE_LOGS=$LOGS
KUBE_BIN=$bin
ENV
  mv "$INST/env.tmp" "$INST/env"
  log "up in $(since "$T0")s; Kubernetes $kver, etcd $ever, kwok $kwver; $KTB_NODES nodes x $KTB_GPUS GPUs; env file: $INST/env"
}

stop_group() { # daemon...: SIGTERM all, wait up to 30 s, SIGKILL stragglers (by recorded PID only)
  local d f p pids=() i any
  for d in "$@"; do
    f=$PIDS/$d.pid
    [ -s "$f" ] || continue; p=$(cat "$f")
    if kill -0 "$p" 2>/dev/null && is_ours "$p"; then kill -TERM "$p" && pids+=("$p"); fi
    rm -f "$f"
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  for i in $(seq 300); do
    any=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && any=1; done
    [ $any = 0 ] && return 0; sleep 0.1
  done
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && { log "PID $p did not stop in 30 s: SIGKILL"; kill -KILL "$p" 2>/dev/null; }; done
  return 0
}

leftovers() { # PIDs of daemons of this instance that no PID file names (a lost PID file)
  local p exe
  for p in $(pgrep -f -- "$INST/" || true); do # candidates: this instance's path on the command line
    exe=$(readlink "/proc/$p/exe" 2>/dev/null) || continue
    case ${exe##*/} in etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kwok) ;; *) continue ;; esac
    is_ours "$p" && echo "$p"
  done
  return 0
}

down_quiet() {
  [ -d "$INST" ] || return 0
  stop_group kwok kube-scheduler kube-controller-manager
  stop_group kube-apiserver
  stop_group etcd
  local rest
  mapfile -t rest < <(leftovers)
  if [ ${#rest[@]} -gt 0 ]; then
    log "stopping daemons of this instance with no PID file: ${rest[*]}"
    kill -TERM "${rest[@]}" 2>/dev/null || true; sleep 2
    mapfile -t rest < <(leftovers)
    [ ${#rest[@]} -eq 0 ] || kill -KILL "${rest[@]}" 2>/dev/null || true
  fi
}

cmd_down() {
  need_root
  lock
  if [ -d "$INST" ]; then test_lock; fi
  local t0; t0=$(now)
  down_quiet
  rm -f "$INST/env"
  if [ "$PURGE" = 1 ]; then rm -rf "$INST"; log "purged $INST"; fi
  log "down in $(since "$t0")s"
}

cmd_status() {
  [ -d "$PIDS" ] || { echo "$KTB_NAME: not set up ($INST)"; return 3; }
  local d f rc=0 seen=0
  for d in "${DAEMONS[@]}"; do
    f=$PIDS/$d.pid
    [ -e "$f" ] || continue
    seen=1
    if alive "$f"; then
      printf '%-24s running  pid %-8s %4d MiB\n' "$d" "$(cat "$f")" $(( $(ps -o rss= -p "$(cat "$f")") / 1024 ))
    else
      printf '%-24s DEAD\n' "$d"; rc=1
    fi
  done
  [ $seen = 1 ] || { echo "$KTB_NAME: stopped"; return 3; }
  if [ -s "$INST/env" ]; then
    local out
    if api_ready; then echo "kube-apiserver           answers on $SERVER"; else echo "kube-apiserver           NOT answering on $SERVER"; rc=1; fi
    if out=$(api GET "/api/v1/nodes?labelSelector=type%3Dkwok&pretty=false") && [ "${out##*$'\n'}" = 200 ]; then
      printf '%s' "${out%$'\n'*}" | jq -r '.items[] | "node \(.metadata.name)  \(.metadata.labels["topology.kubernetes.io/zone"])  nvidia.com/gpu \(.status.allocatable["nvidia.com/gpu"])  Ready=\([.status.conditions[]? | select(.type == "Ready") | .status][0] // "-")"'
    fi
    echo "env file                 $INST/env"
  fi
  return $rc
}

cmd_logs() {
  local f
  for f in "$LOGS"/*.log; do
    [ -s "$f" ] || continue
    echo "==> $f <=="; tail -n "${TB_LOG_LINES:-40}" "$f"
  done
}

case $CMD in
  build) cmd_build ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) [ -s "$INST/env" ] || die "not running (no $INST/env)"; cat "$INST/env" ;;
  logs) cmd_logs ;;
  ""|-h|--help|help) usage ;;
  *) echo "testbed: unknown command $CMD (see --help)" >&2; exit 2 ;;
esac
