#!/usr/bin/env bash
# The steps of `make demo` after strata-demo (the Slurm test bed and a GPU job
# through slurmrestd): the demo tenant policy applied and enforced by
# job_submit.lua, why a job waits, a finished job's model served on the
# Kubernetes test bed, topogen and reclaimd (a live reclaim and a live
# recovery from a GPU fault). Each step prints "== what it
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
[ $rc = 2 ] || die "plan exited $rc; a fresh bed needs changes (exit 2)"
run strata-policy apply --apply
rc=0; run strata-policy plan || rc=$?
[ $rc = 0 ] || die "plan after apply exited $rc, want 0 (nothing left to change)"
run strata-policy render --output-dir "$OUT" --slurm-dir "$SLURM_DIR"
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
EOF
run cat "$OUT/bridge/bridge.yaml"
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

# --- 5 ---------------------------------------------------------------------
step "topogen plan: what topogen would change in the cluster's topology.conf for a generated fabric"
rc=0; run "$BIN/topogen" -c "$OUT/topogen.yaml" --log-level warn plan || rc=$?
note "(topogen plan exited $rc: 0 = up to date, 2 = changes; apply them with: $BIN/topogen -c $OUT/topogen.yaml apply)"
[ $rc = 0 ] || [ $rc = 2 ] || die "topogen plan failed"

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
  "Kubernetes: kubeconfig $STRATA_KUBECONFIG (logs: bash test/testbed/k8s/testbed.sh logs)" \
  "topogen: $OUT/topogen.yaml" \
  "Stop everything: make testbed-down"
