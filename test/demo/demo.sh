#!/usr/bin/env bash
# The steps of `make demo` after strata-demo (the Slurm test bed and a GPU job
# through slurmrestd): the demo tenant policy applied and enforced by
# job_submit.lua, why a job waits, a finished job's model served on the
# Kubernetes test bed, the bridge's daemon and the portal API over it,
# topogen and reclaimd (a live reclaim and a live recovery from a GPU
# fault), and last the portal's pages, left running (pages.sh). Each step prints "== what it
# shows" and then the real commands and their output; the script stops at
# the first step that does not show what it should.
#
#   demo.sh <env file of the Slurm test bed>
#
# BIN (./bin) holds the built binaries; the Kubernetes test bed is started
# with `make kube-up` (TB_STATE, KUBE_NAME as in the Makefile).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO"
if [ $# != 1 ] || [ ! -s "$1" ]; then echo "usage: demo.sh <env file of a running Slurm test bed>" >&2; exit 2; fi
# shellcheck source=/dev/null
source "$1"
INST=$(dirname "$1")
BIN=${BIN:-$REPO/bin}
TB_STATE=${TB_STATE:-/var/lib/strata/testbed}
KUBE_NAME=${KUBE_NAME:-k8s}
POLICY=${POLICY:-test/demo/policy.yaml} # another cluster's copy, to run the demo on a bed of another name
TB=$STRATA_TB_BIN
OUT=$INST/demo                        # rendered files, topogen inputs, the bridge's config and store
SLURM_DIR=$(dirname "$SLURM_CONF")    # beside slurm.conf: job_submit.lua reads strata/policy.lua here
MODEL=llm-demo
SERVE_DIR=$STRATA_TB_JOB_DIR/serve    # the bridge's allowed root, in the bed's shared job folder

step() { printf '\n== %s\n' "$*"; }
note() { printf '   %s\n' "$@"; }
die() { echo "demo: $*" >&2; exit 1; }

# run prints a command as one would type it (as user $AS when set), then runs
# it; the command line goes to the terminal even when the output is captured.
exec 3>&1
run() {
  local a words=()
  for a in "$@"; do
    if [[ $a =~ ^[][A-Za-z0-9_./:=,@%+-]+$ ]]; then words+=("$a"); else words+=("'${a//\'/\'\\\'\'}'"); fi
  done
  printf '%s$ %s\n' "${AS:-}" "${words[*]}" >&3
  "$@"
}

# The bed's Slurm commands; sbatch as user $AS, with a token minted for them.
token() { "$TB/scontrol" token username="$1" lifespan=900 | sed 's/^SLURM_JWT=//'; }
sbatch() { SLURM_JWT=${AS:+$(token "$AS")} "$TB/sbatch" "$@"; }
squeue() { "$TB/squeue" "$@"; }
# strata-policy against the bed's slurmrestd with the demo policy (render
# needs neither slurmrestd nor a token).
strata-policy() {
  local verb=("$1") reads=(); shift
  case ${verb[0]} in
    render) "$BIN/strata-policy" --log-level warn render --policy "$POLICY" "$@"; return ;;
    explain) verb+=("$1"); shift ;;
    plan|apply|drift) reads=(--sacctmgr "$TB/sacctmgr") ;; # reads associations through it
  esac
  "$BIN/strata-policy" --log-level warn "${verb[@]}" --policy "$POLICY" \
    --url "$STRATA_TB_REST_URL" --token-file "$STRATA_TB_ADMIN_TOKEN_FILE" "${reads[@]}" "$@"
}
strata-bridge() { "$BIN/strata-bridge" --log-level warn -c "$OUT/bridge/bridge.yaml" "$@"; }

# free_port prints a loopback TCP port nothing listens on.
free_port() {
  local p
  for p in $(shuf -i 20000-60000 -n 100); do
    if ! (exec 9<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  die "no free port on 127.0.0.1"
}

# The daemons step 4b starts (the bridge's and the portal's), stopped when
# the demo fails; when it succeeds the last step leaves them running for
# the pages (their pids in $OUT/bridge/pid and $OUT/portal/pid; they hold
# no descriptor of the demo's output, so a pipe after make demo ends with it).
DAEMONS=()
stop_daemons() {
  local pid
  for pid in "${DAEMONS[@]}"; do
    if kill -TERM "$pid" 2>/dev/null; then wait "$pid" 2>/dev/null || true; fi
  done
  DAEMONS=()
}
trap stop_daemons EXIT

# wait_http URL WHAT SECONDS LOG waits until GET URL answers 200.
wait_http() {
  local i
  for i in $(seq $(($3 * 5))); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1" || true)" = 200 ] && return 0
    sleep 0.2
  done
  die "$2 did not answer 200 at $1 within $3 s (its log: $4)"
}

# portal METHOD PATH [BODY]: a request to the portal as alice, shown with
# her token's variable rather than the token; the answer lands in
# $PORTAL_ANSWER and its status in $CODE.
portal() {
  local method=$1 path=$2 body=${3:-} shown args
  shown="curl -s -X $method -H 'Authorization: Bearer \$ALICE_TOKEN'"
  args=(-s -X "$method" -H "Authorization: Bearer $ALICE_TOKEN" -o "$PORTAL_ANSWER" -w '%{http_code}')
  if [ -n "$body" ]; then
    shown+=" -H 'Content-Type: application/json' -d '$body'"
    args+=(-H 'Content-Type: application/json' -d "$body")
  fi
  printf '$ %s %s\n' "$shown" "$PORTAL_URL$path" >&3
  CODE=$(curl "${args[@]}" "$PORTAL_URL$path") || die "the portal did not answer $method $path"
}
# want_answer CODE JQ-TEST WHAT: the last answer had status CODE and passes
# the jq test, or the step dies saying WHAT.
want_answer() {
  if [ "$CODE" != "$1" ] || ! jq -e "$2" "$PORTAL_ANSWER" >/dev/null; then
    die "the portal's answer is not what it should be ($3): status $CODE: $(head -c 2000 "$PORTAL_ANSWER")"
  fi
}

# wait_job waits up to 60 s until `squeue -o <format>` of a job prints want.
wait_job() {
  local id=$1 format=$2 want=$3 got="" i
  for i in $(seq 120); do
    got=$("$TB/squeue" -h -j "$id" -o "$format" 2>/dev/null || true)
    [ "$got" = "$want" ] && return 0
    sleep 0.5
  done
  die "job $id: $format is '$got' after 60 s, want '$want'"
}
SQUEUE_FORMAT='%.5i %.6u %.9a %.6q %.10l %.8T %.11b %R'

want=$(sed -n 's/^  name: *//p' "$POLICY" | head -1)
[ "$want" = "$STRATA_TB_CLUSTER" ] || die "$POLICY is for cluster $want, and this test bed is $STRATA_TB_CLUSTER (make demo runs on Slurm 26.05)"

# --- 1 ---------------------------------------------------------------------
step "strata-policy: the demo policy ($POLICY) made real in Slurm: plan, apply, plan again, render"
note "tenants acme (project llm: alice, at most 8 GPUs) and globex (project rl: bob); classes batch and train on partition gpu" \
  "every strata-policy command here also gets --url $STRATA_TB_REST_URL --token-file $STRATA_TB_ADMIN_TOKEN_FILE" \
  "(plan, apply and drift also --sacctmgr $TB/sacctmgr: they read the associations through it)"
rc=0; run strata-policy plan || rc=$?
[ $rc = 3 ] || die "plan exited $rc; a fresh bed needs changes (exit 3)"
run strata-policy apply --apply
rc=0; run strata-policy plan || rc=$?
[ $rc = 0 ] || die "plan after apply exited $rc, want 0 (nothing left to change)"
run strata-policy render --output-dir "$OUT" --slurm-dir "$SLURM_DIR"
# render links each file in --slurm-dir to the current generation under
# --output-dir. The bed's slurmctld runs chrooted in the bed's root, where
# a link to $OUT (outside the root) does not resolve: the files themselves.
for f in "$SLURM_DIR"/strata/*; do
  if [ -L "$f" ]; then cp --remove-destination "$(readlink -f "$f")" "$f"; fi
done
note "(the bed's slurmctld runs chrooted in $STRATA_TB_ROOT: render's links into $OUT are replaced there by the files they point to)"
note "job_submit.lua reads $SLURM_DIR/strata/policy.lua again at most every 5 s: waiting 6 s"
sleep 6

# --- 2 ---------------------------------------------------------------------
step "job_submit.lua enforces the policy at sbatch: a refusal, defaults filled in, the project's GPU limit"
out=$(AS=bob run sbatch -A acme-llm --gres=gpu:1 --wrap 'sleep 600' 2>&1) && die "bob's job in acme-llm was accepted: $out"
echo "$out"
grep -q 'strata: user bob is not a member of account acme-llm' <<<"$out" || die "sbatch did not say why bob was refused"
# strata:signal: the job traps reclaimd's checkpoint signal (step 7 sends it).
BIG=$(AS=alice run sbatch --parsable -J train-8gpu --comment=strata:class=train,strata:signal --gres=gpu:8 -D "$STRATA_TB_JOB_DIR" \
  -o "$STRATA_TB_JOB_DIR/train-8gpu-%j.out" --wrap 'trap "echo checkpoint asked at \$(date +%T)" USR1; for i in $(seq 1800); do sleep 1; done')
echo "$BIG"
wait_job "$BIG" %T RUNNING
PENDING=$(AS=alice run sbatch --parsable -J one-more --gres=gpu:1 -D "$STRATA_TB_JOB_DIR" --wrap 'sleep 600')
echo "$PENDING"
wait_job "$PENDING" %r AssocGrpGRES
run squeue -o "$SQUEUE_FORMAT"
note "job_submit.lua gave both jobs alice's default account acme-llm, the QOS of their class (train from the" \
  "comment, else batch) and the class's time limit; job $PENDING waits: acme-llm has its 8 GPUs in use"

# --- 3 ---------------------------------------------------------------------
step "strata-policy explain: why job $PENDING waits, in plain words, and everything about alice"
run strata-policy explain job "$PENDING"
echo
run strata-policy explain user alice

# --- 4 ---------------------------------------------------------------------
step "strata-bridge: the model a finished Slurm job wrote, served on Kubernetes in its tenant's namespace"
note "Starting the Kubernetes test bed (kube-apiserver, etcd, controllers, scheduler, 2 kwok nodes with 8 fake GPUs)." \
  "The first start on a machine builds its binaries from the Go module proxy: about 15 minutes, once" \
  "(cached in /var/cache/strata/kubebin); later starts take about 20 s."
"${MAKE:-make}" --no-print-directory kube-up TB_STATE="$TB_STATE" KUBE_NAME="$KUBE_NAME"
# shellcheck source=/dev/null
source "$TB_STATE/$KUBE_NAME/env"
rm -rf "$OUT/bridge"
mkdir -p "$OUT/bridge"
ABS_OUT=$(cd "$OUT" && pwd)
BRIDGE_PORT=$(free_port)
cat >"$OUT/bridge/bridge.yaml" <<EOF
# strata-bridge for the demo: the Slurm test bed $STRATA_TB_NAME and the Kubernetes test bed $KUBE_NAME.
apiVersion: strata/v1
kind: BridgeConfig
slurm:
  url: $STRATA_TB_REST_URL
  user: $STRATA_TB_ADMIN_USER
  token_file: $STRATA_TB_ADMIN_TOKEN_FILE
kubernetes:
  kubeconfig: $STRATA_KUBECONFIG
  rollout_timeout: 1m
policy:
  # Tenants, namespaces and serving quotas: rendered from the policy in step 1.
  serving_file: $OUT/serving.json
models:
  # Jobs see the bed's shared job folder at $STRATA_TB_JOB_DIR; this host and the
  # (fake) nodes see it under the bed's root.
  allowed_roots: [$SERVE_DIR]
  host_root: $STRATA_TB_ROOT
  mount:
    kind: hostPath
    root: $STRATA_TB_JOB_DIR
    path: $STRATA_TB_ROOT$STRATA_TB_JOB_DIR
runtimes:
  dir: $REPO/etc/strata/bridge/runtimes
defaults:
  # vllm: 1 GPU per replica (kwok runs no container, so no image is pulled).
  runtime: vllm
store:
  path: $OUT/bridge/bridge.db
# The JSON API the portal calls (step 4b), with its bearer token.
listen: 127.0.0.1:$BRIDGE_PORT
api:
  token_file: $ABS_OUT/bridge/bridge-api.token
EOF
run cat "$OUT/bridge/bridge.yaml"
(umask 077 && head -c 32 /dev/urandom | base64 >"$OUT/bridge/bridge-api.token")
install -d -m 1777 "$STRATA_TB_ROOT$SERVE_DIR" "$STRATA_TB_ROOT$SERVE_DIR/$MODEL"
TRAIN=$(AS=alice run sbatch --parsable -J "$MODEL" -D "$SERVE_DIR/$MODEL" --comment=strata:serve=$MODEL \
  --wrap 'printf "weights of a very small model\n" > model.bin')
echo "$TRAIN"
for i in $(seq 120); do
  state=$("$TB/scontrol" show job -o "$TRAIN" | grep -o 'JobState=[A-Z_]*' || true)
  case $state in JobState=COMPLETED) break ;; JobState=FAILED | JobState=CANCELLED | JobState=TIMEOUT) die "job $TRAIN: $state" ;; esac
  [ "$i" = 120 ] && die "job $TRAIN did not complete within 60 s ($state)"
  sleep 0.5
done
note "job $TRAIN completed; it wrote $SERVE_DIR/$MODEL/model.bin and asked to be served as $MODEL"
run strata-bridge deploy --job "$TRAIN" --apply
run strata-bridge list
run strata-bridge status "$MODEL"
note "its pods, as the apiserver lists them (NAME NODE PHASE GPUS VERSION):"
curl -sf --cacert "$STRATA_KUBE_CA" -H "Authorization: Bearer $(cat "$STRATA_KUBE_TOKEN_FILE")" \
  "$STRATA_KUBE_SERVER/api/v1/namespaces/strata-acme/pods?labelSelector=app.kubernetes.io/name=$MODEL" |
  jq -r '.items[] | "   \(.metadata.name)  \(.spec.nodeName)  \(.status.phase)  \(.spec.containers[0].resources.limits["nvidia.com/gpu"] // "0")  \(.metadata.labels["strata.io/version"])"'

# --- 4b --------------------------------------------------------------------
step "strata-portal-api: alice's jobs with why one waits, and a model deployed through the portal and the bridge's API"
note "strata-bridge run (the daemon, as its unit runs it: check-config, then run) serves its API on 127.0.0.1:$BRIDGE_PORT" \
  "with the token in $OUT/bridge/bridge-api.token; strata-portal-api serve, as its unit runs it, reads this bed" \
  "as cluster $STRATA_TB_CLUSTER and reaches the bridge with the same token (its bridge_token_file)."
mkdir -p "$OUT/portal"
# A previous demo's daemons, left running for its pages, make way.
for pidfile in "$OUT/bridge/pid" "$OUT/portal/pid"; do
  if [ -s "$pidfile" ]; then kill -TERM "$(cat "$pidfile")" 2>/dev/null || true; rm -f "$pidfile"; fi
done
rm -f "$OUT/portal/portal.db"*
PORTAL_PORT=$(free_port)
PORTAL_URL=http://127.0.0.1:$PORTAL_PORT
PORTAL_ANSWER=$OUT/portal/answer.json
run strata-bridge check-config
"$BIN/strata-bridge" --log-level info -c "$OUT/bridge/bridge.yaml" run >"$OUT/bridge/daemon.log" 2>&1 3>&- &
DAEMONS+=($!)
echo $! >"$OUT/bridge/pid"
wait_http "http://127.0.0.1:$BRIDGE_PORT/healthz" "strata-bridge run" 30 "$OUT/bridge/daemon.log"
cat >"$OUT/portal/portal-api.yaml" <<EOF
# strata-portal-api for the demo: the Slurm test bed $STRATA_TB_NAME, and its bridge.
apiVersion: strata/v1
kind: PortalConfig
listen: 127.0.0.1:$PORTAL_PORT
database: $ABS_OUT/portal/portal.db
templates_dir: $ABS_OUT/portal/templates
# The pages, where browsers reach them (http only on loopback): login-link
# prints its links under it (the last step).
pages:
  public_url: $PORTAL_URL
clusters:
  - name: $STRATA_TB_CLUSTER
    slurmrestd_url: $STRATA_TB_REST_URL
    jwt_key_file: $STRATA_TB_JWT_KEY
    poll_user: $STRATA_TB_ADMIN_USER
    tenants_file: $ABS_OUT/tenants.json
    poll_interval: 2s
    stale_after: 10s
    bridge_url: http://127.0.0.1:$BRIDGE_PORT
    bridge_token_file: $ABS_OUT/bridge/bridge-api.token
EOF
run cat "$OUT/portal/portal-api.yaml"
strata-portal-api() { "$BIN/strata-portal-api" --log-level warn --config "$OUT/portal/portal-api.yaml" "$@"; }
run strata-portal-api check-config
"$BIN/strata-portal-api" --config "$OUT/portal/portal-api.yaml" serve >"$OUT/portal/daemon.log" 2>&1 3>&- &
DAEMONS+=($!)
echo $! >"$OUT/portal/pid"
wait_http "$PORTAL_URL/healthz" "strata-portal-api serve" 30 "$OUT/portal/daemon.log"
note "a personal token for alice (printed once; the database keeps its hash), kept in \$ALICE_TOKEN:"
ALICE_TOKEN=$(run strata-portal-api token create --user alice --expires 1d --note demo)
[[ $ALICE_TOKEN == strata_pat_* ]] || die "token create printed no token"

note "alice's jobs through the portal (ID STATE REASON: what it means):"
portal GET "/v1/jobs?cluster=$STRATA_TB_CLUSTER"
jq -r '.jobs[] | "   \(.id) \(.state) \(.reason.slurm // "-")\(if .reason.meaning then ": " + .reason.meaning else "" end)"' "$PORTAL_ANSWER"
want_answer 200 "[.jobs[] | select(.id == $PENDING and .state == \"PENDING\")] | length == 1" "job $PENDING pending in alice's list"
want_answer 200 "[.jobs[] | select(.id == $BIG and .state == \"RUNNING\")] | length == 1" "job $BIG running in alice's list"
note "why job $PENDING waits, in words, with the policy line of the limit (as strata-policy explain said it in step 3):"
portal GET "/v1/jobs/$STRATA_TB_CLUSTER/$PENDING"
jq '.reason' "$PORTAL_ANSWER"
want_answer 200 '.reason.slurm == "AssocGrpGRES" and (.reason.text // "" | test("GPU")) and (.reason.policy_line // "" | test(":[0-9]+$"))' \
  "job $PENDING's reason in words, with its policy line"

PMODEL=llm-portal
install -d -m 1777 "$STRATA_TB_ROOT$SERVE_DIR/$PMODEL"
note "alice's next job writes a model and asks nothing of the bridge; through the portal she serves it as $PMODEL:"
PJOB=$(AS=alice run sbatch --parsable -J "$PMODEL" -D "$SERVE_DIR/$PMODEL" --wrap 'printf "weights of another small model\n" > model.bin')
echo "$PJOB"
# The list, not the job's own page: that one falls back to slurmdbd and
# shows the job completed before the poller has it, and a deploy goes by
# the poller's snapshot.
for i in $(seq 60); do
  portal GET "/v1/jobs?cluster=$STRATA_TB_CLUSTER" 3>/dev/null
  [ "$CODE" = 200 ] && jq -e --argjson id "$PJOB" 'any(.jobs[]; .id == $id and .state == "COMPLETED")' "$PORTAL_ANSWER" >/dev/null && break
  [ "$i" = 60 ] && die "the portal does not show job $PJOB completed within 60 s: $CODE $(head -c 500 "$PORTAL_ANSWER")"
  sleep 1
done
note "job $PJOB completed, as the portal's poller saw it"
portal POST /v1/deployments "{\"cluster\": \"$STRATA_TB_CLUSTER\", \"job\": $PJOB, \"name\": \"$PMODEL\"}"
jq '{cluster, name, namespace, tenant, version, outcome, message, audit_id, objects: [.objects[]? | "\(.kind)/\(.name): \(.action)"]}' "$PORTAL_ANSWER"
want_answer 200 ".outcome == \"ready\" and .version == \"job-$PJOB\" and .namespace == \"strata-acme\" and .audit_id > 0" \
  "job $PJOB's model deployed and rolled out"
note "the deployments alice may see (NAME TENANT VERSION OUTCOME REPLICAS), from the bridge through the portal:"
portal GET /v1/deployments
jq -r '.deployments[] | "   \(.name) \(.tenant) \(.version) \(.outcome) \(.replicas)"' "$PORTAL_ANSWER"
want_answer 200 "[.deployments[] | select(.name == \"$PMODEL\" and .job_id == $PJOB and .outcome == \"ready\")] | length == 1" \
  "$PMODEL listed as ready"
want_answer 200 "[.deployments[] | select(.name == \"$MODEL\" and .job_id == $TRAIN)] | length == 1" "$MODEL (step 4) listed"
note "and on the job, where its model is served:"
portal GET "/v1/jobs/$STRATA_TB_CLUSTER/$PJOB"
jq -c '[.served[]? | {name, namespace, version}]' "$PORTAL_ANSWER"
want_answer 200 "[.served[]? | select(.name == \"$PMODEL\")] | length == 1" "job $PJOB served as $PMODEL"
note "both daemons go on running after the demo, for its pages (logs: $OUT/bridge/daemon.log, $OUT/portal/daemon.log)"

# --- 5 ---------------------------------------------------------------------
step "topogen plan: what topogen would change in the cluster's topology.conf for a generated fabric"
rc=0; run "$BIN/topogen" -c "$OUT/topogen.yaml" --log-level warn plan || rc=$?
note "(topogen plan exited $rc: 0 = up to date, 3 = changes; apply them with: $BIN/topogen -c $OUT/topogen.yaml apply)"
[ $rc = 0 ] || [ $rc = 3 ] || die "topogen plan failed"

step "reclaimd simulate: example reclaim rules over a recorded trace (what reclaim would do before it acts)"
T=reclaimd/internal/simulate/testdata
run "$BIN/reclaimd" simulate --rules $T/example-rules.json --step 1m --jobs $T/example.jobs.csv --samples $T/example.samples.csv

step "reclaimd check-config: the rules and the tenant map strata-policy rendered in step 1, as reclaimd reads them"
note "reclaimd takes each job's tenant from tenants.json (no hand copy in its config); SIGHUP reloads both files"
ABS_OUT=$(cd "$OUT" && pwd)
cat >"$OUT/reclaimd.yaml" <<EOF
apiVersion: strata/v1
kind: ReclaimdConfig
rules_file: $ABS_OUT/reclaim-rules.json
tenants_file: $ABS_OUT/tenants.json
EOF
run "$BIN/reclaimd" --config "$OUT/reclaimd.yaml" check-config

# --- 7 ---------------------------------------------------------------------
step "reclaimd live: alice's idle 8-GPU job $BIG warned, signalled and requeued; a busy job beside it untouched; job $PENDING starts"
note "the controller and one agent per node, as the packages run them; the agents replay samples (no real GPUs here):" \
  "job $BIG's GPUs at 0%, every other job's busy. The rules are the shipped train rule in seconds instead of minutes."
run "$BIN/strata-demo" -env "$1" -reclaim -idle-job "$BIG" -waiting-job "$PENDING" -reclaimd "$BIN/reclaimd" \
  -tenants "$ABS_OUT/tenants.json" -work "$ABS_OUT/reclaimd-live"
run "$TB/squeue" -o "$SQUEUE_FORMAT"
note "job $BIG's own output ($STRATA_TB_JOB_DIR/train-8gpu-$BIG.out):"
sed 's/^/   /' "$STRATA_TB_ROOT$STRATA_TB_JOB_DIR/train-8gpu-$BIG.out" 2>/dev/null || true

# --- 8 ---------------------------------------------------------------------
step "reclaimd recovery live: an Xid 79 under a running job; its node drained, the job run again on another node, the node resumed"
note "a second run of the controller and agents, with GPU node health and recovery on: a requeueable job of bob's" \
  "on a node of its own, then the fault line an agent reads (a replayed node takes its faults from agent.faults_file)." \
  "The health command is a script that passes: it stands in for dcgmi diag over ssh."
run "$BIN/strata-demo" -env "$1" -fault -reclaimd "$BIN/reclaimd" -tenants "$ABS_OUT/tenants.json" -work "$ABS_OUT/reclaimd-fault"
run "$TB/sinfo" -R

# ---------------------------------------------------------------------------
step "Where things are"
note "Slurm $STRATA_TB_SLURM_RELEASE: $INST (logs: bash test/testbed/slurm/testbed.sh logs)" \
  "  commands: $TB/{squeue,sinfo,sbatch,scontrol,scancel,sacctmgr,sshare,sacct}" \
  "  as a user: SLURM_JWT=\$($TB/scontrol token username=alice | cut -d= -f2) $TB/sbatch ..." \
  "  slurmrestd: $STRATA_TB_REST_URL, admin token $STRATA_TB_ADMIN_TOKEN_FILE" \
  "  the demo's jobs run for 10 minutes (alice's 8-GPU one 30): $TB/squeue to see them, $TB/scancel <id> to end one" \
  "policy: $POLICY; rendered: $OUT/{serving.json,tenants.json,reclaim-rules.json,k8s/resourcequotas.yaml,disk-quota.sh}" \
  "  job_submit.lua's data: $SLURM_DIR/strata/policy.lua" \
  "reclaimd: $BIN/reclaimd --config $OUT/reclaimd.yaml check-config; the live runs' configs and logs: $OUT/reclaimd-live, $OUT/reclaimd-fault" \
  "bridge: $BIN/strata-bridge -c $OUT/bridge/bridge.yaml status $MODEL" \
  "portal: $BIN/strata-portal-api --config $OUT/portal/portal-api.yaml serve, left running with the bridge's daemon for the pages" \
  "  (logs: $OUT/portal/daemon.log, $OUT/bridge/daemon.log; stop both: kill \$(cat $OUT/portal/pid $OUT/bridge/pid))" \
  "Kubernetes: kubeconfig $STRATA_KUBECONFIG (logs: bash test/testbed/k8s/testbed.sh logs)" \
  "topogen: $OUT/topogen.yaml" \
  "Stop everything: make testbed-down"

# ---------------------------------------------------------------------------
step "The portal's pages: alice's and the operator's, checked in a real browser and left running"
note "strata-portal-api serve serves the pages under / beside the API; sign-in here is by one-time links" \
  "(strata-portal-api login-link), for a site without an identity provider. Screenshots: $OUT/pages"
BIN=$BIN bash "$HERE/pages.sh" "$OUT/portal/portal-api.yaml" "$OUT/pages" \
  "/,/jobs,/jobs/$STRATA_TB_CLUSTER/$PENDING,/submit,/operator" \
  "/operator,/operator/nodes/$STRATA_TB_CLUSTER,/operator/jobs?cluster=$STRATA_TB_CLUSTER&state=RUNNING"
# The demo succeeded: its daemons stay up for the pages.
DAEMONS=()
