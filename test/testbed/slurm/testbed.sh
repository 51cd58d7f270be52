#!/usr/bin/env bash
# Strata's Slurm test bed: a complete single-host Slurm (munged, MariaDB, slurmdbd,
# slurmctld, several `slurmd -N`, slurmrestd with JWT) running from a Debian root
# made with debootstrap, on loopback only. See README.md beside this file.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: testbed.sh <command> [options]

Commands:
  build     build the Debian root for SLURM_VERSION and cache it (once per machine)
  up        start a test bed (builds the root first if it is not cached)
  down      cancel all jobs, stop every daemon by PID, unmount
  status    show the daemons, their PIDs and whether slurmrestd answers
  env       print the environment file of a running test bed
  logs      print the tail of every daemon log (what a failing test shows)
  restart-ctld  start slurmctld again if it stopped (a bad topology makes it exit)
  plugins   copy slurm-plugins/job_submit.lua into a running bed (slurmctld reloads it
            on the next job, when its mtime changes; no restart)

Options (or the variables in brackets):
  --version V     Slurm release: 26.05 (Debian testing) or 24.11 (Debian 13)  [SLURM_VERSION, default 26.05]
  --name N        instance name; two instances with different names and ports
                  can run side by side                                          [TB_NAME, default s<version>]
  --port-base P   first of the ports this instance uses (P..P+2, P+11..)       [TB_PORT_BASE]
  --cluster C     Slurm ClusterName                                             [TB_CLUSTER, default: the name]
  --nodes N       number of slurmd nodes                                        [TB_NODES, default 4]
  --gpus N        fake GPUs per node                                            [TB_GPUS, default 8]
  --fresh         (up) start from the cached root: empty accounting DB and state [TB_FRESH=1]
  --sessions      (build, up) a root that also runs portal sessions: JupyterLab with
                  the Python kernel, and ttyd (26.05 only: Debian testing's
                  jupyterlab 4.4; a separate, larger cached root)            [TB_SESSIONS=1]
  --mariadb-max-packet S  (up) MariaDB max_allowed_packet, e.g. 256M, for a bed
                  that loads large sacctmgr flat files (the benchmark's own);
                  shared beds keep MariaDB's default, 16M, as most sites do  [TB_MARIADB_MAX_PACKET]
  --node-vm       (up, down, status) a node bed: the compute node runs under its own
                  kernel in a qemu VM (test/testbed/node/vm.sh) with cgroup v2,
                  task/cgroup, device, core and memory confinement and an XFS
                  scratch disk; slurmctld, slurmdbd and slurmrestd stay in the
                  chroot. Defaults: --name n<version>, --port-base 26300 (26.05)
                  or 24300 (24.11), --nodes 1, --gpus 4. Tests find it through
                  STRATA_NODEBEDS, never STRATA_TESTBEDS                   [TB_NODE_VM=1]
  --purge         (down) also delete the instance folder

Paths: roots are cached in TB_CACHE (/var/cache/strata/testbed); instances live in
TB_STATE/<name> (/var/lib/strata/testbed). The environment file is
TB_STATE/<name>/env; tests find it through STRATA_TESTBED_ENV.
USAGE
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JOB_SUBMIT_LUA=$HERE/../../../slurm-plugins/job_submit.lua
OCI_CONF=$HERE/../../../etc/slurm/oci.conf      # the node bed's, as shipped
OCI_RUN=$HERE/../../../slurm-plugins/strata-oci-run
CMD=${1:-}; [ $# -gt 0 ] && shift
SLURM_VERSION=${SLURM_VERSION:-26.05}
TB_NODES=${TB_NODES:-4}
TB_GPUS=${TB_GPUS:-8}
TB_FRESH=${TB_FRESH:-0}
TB_SESSIONS=${TB_SESSIONS:-0}
TB_MARIADB_MAX_PACKET=${TB_MARIADB_MAX_PACKET:-}
TB_NODE_VM=${TB_NODE_VM:-0}
PURGE=0
while [ $# -gt 0 ]; do
  case $1 in
    --version) SLURM_VERSION=$2; shift 2 ;;
    --name) TB_NAME=$2; shift 2 ;;
    --port-base) TB_PORT_BASE=$2; shift 2 ;;
    --cluster) TB_CLUSTER=$2; shift 2 ;;
    --nodes) TB_NODES=$2; TB_NODES_SET=1; shift 2 ;;
    --gpus) TB_GPUS=$2; TB_GPUS_SET=1; shift 2 ;;
    --fresh) TB_FRESH=1; shift ;;
    --sessions) TB_SESSIONS=1; shift ;;
    --mariadb-max-packet) TB_MARIADB_MAX_PACKET=$2; shift 2 ;;
    --node-vm) TB_NODE_VM=1; shift ;;
    --purge) PURGE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "testbed: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -n "$TB_MARIADB_MAX_PACKET" ] && ! [[ $TB_MARIADB_MAX_PACKET =~ ^[0-9]+[KMG]?$ ]]; then
  echo "testbed: --mariadb-max-packet $TB_MARIADB_MAX_PACKET: want a size such as 256M" >&2; exit 2
fi

if [ "$TB_SESSIONS" = 1 ] && [ "$SLURM_VERSION" != 26.05 ]; then
  echo "testbed: --sessions is for --version 26.05 only: Debian 13 has no ttyd package (and jupyterlab 4.0)" >&2; exit 2
fi

case $SLURM_VERSION in
  26.05) SUITE=testing; DEF_PORT=26100 ;;
  24.11) SUITE=trixie;  DEF_PORT=24100 ;;
  *) echo "testbed: unsupported SLURM_VERSION $SLURM_VERSION (26.05 or 24.11)" >&2; exit 2 ;;
esac
VTAG=${SLURM_VERSION//./}
if [ "$TB_NODE_VM" = 1 ]; then
  # The node bed: its own name and ports; one VM node with 4 fake GPUs. 26.05's
  # root is the one with the session servers (the one `make testbed-up` caches);
  # the bed does not offer sessions (its node is not on the host's loopback).
  DEF_PORT=$(( DEF_PORT + 200 ))
  TB_NAME=${TB_NAME:-n$VTAG}
  [ "$SLURM_VERSION" = 26.05 ] && TB_SESSIONS=1
  [ "${TB_NODES_SET:-}" = 1 ] || TB_NODES=1
  [ "${TB_GPUS_SET:-}" = 1 ] || TB_GPUS=4
  [ "$TB_NODES" = 1 ] || { echo "testbed: --node-vm runs one node" >&2; exit 2; }
fi
TB_NAME=${TB_NAME:-s$VTAG}
TB_PORT_BASE=${TB_PORT_BASE:-$DEF_PORT}
TB_CACHE=${TB_CACHE:-/var/cache/strata/testbed}
TB_STATE=${TB_STATE:-/var/lib/strata/testbed}
TB_MIRROR=${TB_MIRROR:-http://deb.debian.org/debian}
# Bump RECIPE when the package list or the build steps change: the cache key follows it.
PACKAGES="slurmctld slurmd slurmdbd slurmrestd slurm-client slurm-wlm-jwt-plugin munge mariadb-server procps lua5.4"
# --sessions adds the servers of the portal's session templates. jupyterlab
# depends on its whole build toolchain (nodejs, webpack, jest, ~700 node-*
# packages, 1.2 GB); its prebuilt pages in /usr/share/jupyter/lab/static are
# all it serves, so the toolchain's files are removed from the root after
# the install: `jupyter lab build` cannot run in the bed.
SESSION_PACKAGES="jupyterlab python3-ipykernel ttyd"
RECIPE=2
VARIANT=$VTAG; [ "$TB_SESSIONS" = 1 ] && VARIANT=$VTAG-sessions
TARBALL=$TB_CACHE/root-$VARIANT-r$RECIPE.tar.zst
INST=$TB_STATE/$TB_NAME
R=$INST/root
PIDS=$INST/pids
LOGS=$INST/logs
CLUSTER=${TB_CLUSTER:-$TB_NAME}

P_CTLD=$TB_PORT_BASE
P_DBD=$((TB_PORT_BASE + 1))
P_REST=$((TB_PORT_BASE + 2))
p_slurmd() { echo $((TB_PORT_BASE + 10 + $1)); }
NODE_NAMES=$(for i in $(seq 1 "$TB_NODES"); do printf 'gpu%d ' "$i"; done); NODE_NAMES=${NODE_NAMES% }

log() { printf '[testbed %s] %s\n' "$TB_NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
need_root() { [ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot, mount)"; }

CH=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root chroot)
in_root() { "${CH[@]}" "$R" "$@"; }

mounts_up() { # only what the daemons need; nothing of the host's /dev is bound in
  local r=$1
  mountpoint -q "$r/proc" || mount -t proc proc "$r/proc"
  mountpoint -q "$r/sys" || mount -t sysfs sysfs "$r/sys"
  mkdir -p "$r/dev/pts" "$r/dev/shm"
  mountpoint -q "$r/dev/pts" || mount -t devpts -o newinstance,ptmxmode=0666 devpts "$r/dev/pts"
  mountpoint -q "$r/dev/shm" || mount -t tmpfs -o mode=1777 tmpfs "$r/dev/shm"
  mountpoint -q "$r/run" || mount -t tmpfs -o mode=755 tmpfs "$r/run"
}
mounts_down() {
  local r=$1 m
  for m in run dev/shm dev/pts sys proc; do
    if mountpoint -q "$r/$m"; then umount "$r/$m" || umount -l "$r/$m"; fi
  done
}

cmd_build() {
  need_root
  [ -s "$TARBALL" ] && { log "root for Slurm $SLURM_VERSION is cached: $TARBALL"; return 0; }
  command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap zstd"
  mkdir -p "$TB_CACHE"
  local b=$TB_CACHE/build-$VARIANT.$$ t0 blog=$TB_CACHE/build-$VARIANT.log; t0=$(now)
  trap 'mounts_down "'"$b"'" 2>/dev/null; rm -rf "'"$b"'"' EXIT
  log "debootstrap $SUITE into $b (a few minutes, once per machine)"
  debootstrap --variant=minbase "$SUITE" "$b" "$TB_MIRROR" >"$blog" 2>&1 \
    || { tail -20 "$blog" >&2; die "debootstrap failed (log: $blog)"; }
  log "debootstrap done after $(since "$t0")s"
  # Debian testing's Release files on some mirrors carry an expired Valid-Until.
  echo 'Acquire::Check-Valid-Until "false";' >"$b/etc/apt/apt.conf.d/99no-valid-until"
  printf '#!/bin/sh\nexit 101\n' >"$b/usr/sbin/policy-rc.d"; chmod 755 "$b/usr/sbin/policy-rc.d"
  cat >"$b/etc/dpkg/dpkg.cfg.d/01-strata-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/info/*
SLIM
  # A throwaway root: dpkg need not fsync every file.
  echo force-unsafe-io >"$b/etc/dpkg/dpkg.cfg.d/02-strata-unsafe-io"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$b/etc/hosts"
  mounts_up "$b"
  "${CH[@]}" "$b" sh -c "export DEBIAN_FRONTEND=noninteractive; apt-get -q update && \
     apt-get install -y -q --no-install-recommends $PACKAGES && apt-get clean" >>"$blog" 2>&1 \
    || { tail -20 "$blog" >&2; die "apt-get install failed (log: $blog)"; }
  log "packages installed after $(since "$t0")s"
  if [ "$TB_SESSIONS" = 1 ]; then
    "${CH[@]}" "$b" sh -c "export DEBIAN_FRONTEND=noninteractive; apt-get install -y -q --no-install-recommends $SESSION_PACKAGES && apt-get clean" \
      >>"$blog" 2>&1 || { tail -20 "$blog" >&2; die "apt-get install of the session servers failed (log: $blog)"; }
    # The build toolchain goes after the install (a dpkg path-exclude breaks the node packages'
    # update-alternatives). Without the node command JupyterLab does not try it (it asks node for
    # yarn's configuration at start when it finds it).
    rm -rf "$b/usr/share/nodejs" "$b/usr/lib/nodejs" "$b"/usr/lib/x86_64-linux-gnu/libnode.so* \
      "$b/usr/bin/node" "$b/usr/bin/nodejs" "$b/etc/alternatives/js"
    "${CH[@]}" "$b" sh -c 'command -v jupyter-lab && command -v ttyd && python3 -c "import ipykernel"' >>"$blog" 2>&1 \
      || die "the session servers do not run in the root (log: $blog)"
    log "session servers installed after $(since "$t0")s"
  fi
  rm -rf "$b"/var/lib/apt/lists/* "$b"/var/cache/apt/*.bin
  # Test users with fixed UIDs (far from the host's own): restd runs slurmrestd,
  # alice and bob submit jobs.
  "${CH[@]}" "$b" sh -c 'groupadd -g 26001 restd && useradd -u 26001 -g restd -M -d /nonexistent -s /usr/sbin/nologin restd
     for u in alice:26002 bob:26003; do n=${u%:*}; id=${u#*:}; groupadd -g $id $n && useradd -u $id -g $n -m -s /bin/bash $n; done'
  # forky's mariadb-server postinst no longer initialises the data dir; do it here for both.
  if [ ! -d "$b/var/lib/mysql/mysql" ]; then
    "${CH[@]}" "$b" mariadb-install-db --user=mysql --datadir=/var/lib/mysql \
      --auth-root-authentication-method=socket --skip-test-db >>"$blog" 2>&1 || die "mariadb-install-db failed"
  fi
  "${CH[@]}" "$b" dpkg-query -W -f='${Version}\n' slurmctld >"$b/etc/strata-testbed-slurm-package"
  mounts_down "$b"
  tar --numeric-owner --xattrs -I 'zstd -T0 -3' -cpf "$TARBALL.tmp" -C "$b" .
  mv "$TARBALL.tmp" "$TARBALL"
  rm -rf "$b"; trap - EXIT
  log "cached $TARBALL ($(du -h "$TARBALL" | cut -f1)) after $(since "$t0")s"
}

NODE_VM=$HERE/../node/vm.sh
NODE_VM_CPUS=${NODE_VM_CPUS:-2}
NODE_VM_MEM=${NODE_VM_MEM:-1024}
NODE_VM_REALMEM=$(( NODE_VM_MEM - 256 ))
P_AGENT=$((TB_PORT_BASE + 20))
node_vm_conf() { # dir: the node bed's confinement, on top of the chroot bed's configs
  local e=$1 i
  sed -i -e 's|^ProctrackType=.*|ProctrackType=proctrack/cgroup|' \
    -e 's|^TaskPlugin=.*|TaskPlugin=task/cgroup,task/affinity|' \
    -e 's|^JobAcctGatherType=.*|JobAcctGatherType=jobacct_gather/cgroup|' \
    -e 's|^DefMemPerCPU=.*|DefMemPerCPU=100|' \
    -e 's|^# No cgroups in the root.*|# The node runs under its own kernel (a qemu VM): cgroup v2 confines every job.|' "$e/slurm.conf"
  cat >"$e/cgroup.conf" <<CG
# The node bed's VM: cgroup v2 without systemd (slurmd makes its own scope).
CgroupPlugin=cgroup/v2
IgnoreSystemd=yes
ConstrainCores=yes
ConstrainDevices=yes
ConstrainRAMSpace=yes
AllowedRAMSpace=100
ConstrainSwapSpace=no
CG
  { echo "AutoDetect=off"
    for i in $(seq 1 "$TB_NODES"); do echo "NodeName=gpu$i Name=gpu Type=h100 File=/dev/fakegpu[0-$((TB_GPUS - 1))]"; done
  } >"$e/gres.conf"
}

node_vm_agent() { "$TB_CACHE/node/agent" exec "127.0.0.1:$P_AGENT" "$@"; }

node_vm_up() { # boot the VM, give it the instance's configs and key, start munged and slurmd in it
  local variant=$VTAG; [ "$SLURM_VERSION" = 26.05 ] && variant=$VTAG-sessions
  bash "$NODE_VM" start --inst "$INST" --variant "$variant" --node gpu1 --cpus "$NODE_VM_CPUS" --mem "$NODE_VM_MEM" \
    --gpus "$TB_GPUS" --slurmd-port "$(p_slurmd 1)" --agent-port "$P_AGENT" || die "the node VM did not start"
  cp "$INST/vm/qemu.pid" "$PIDS/node-vm.pid"
  log "node VM answers at +$(since "$T0")s ($(cat "$INST/vm/accel"))"
  # The guest reaches slurmctld through qemu's user network (10.0.2.2 is the host's
  # loopback); slurmd listens on every guest address for the forwarded port.
  local f
  for f in slurm.conf gres.conf cgroup.conf topology.conf; do
    if [ "$f" = slurm.conf ]; then
      sed -e 's|^SlurmctldHost=.*|SlurmctldHost=localhost(10.0.2.2)|' -e '/^CommunicationParameters=NoInAddrAny/d' "$R/etc/slurm/$f"
    else cat "$R/etc/slurm/$f"; fi | node_vm_agent sh -c "cat >/etc/slurm/$f.tmp && mv /etc/slurm/$f.tmp /etc/slurm/$f"
  done
  node_vm_agent sh -c 'cat >/etc/munge/munge.key && chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key' <"$R/etc/munge/munge.key"
  # Containers: the production oci.conf and its wrapper, where the strata-policy package installs it.
  node_vm_agent sh -c 'cat >/etc/slurm/oci.conf' <"$OCI_CONF"
  node_vm_agent sh -c 'mkdir -p /usr/share/strata/slurm && cat >/usr/share/strata/slurm/strata-oci-run && chmod 755 /usr/share/strata/slurm/strata-oci-run' <"$OCI_RUN"
  printf '127.0.0.1\tlocalhost gpu1\n' | node_vm_agent sh -c 'cat >/etc/hosts'
  node_vm_agent sh -c 'install -d -o munge -g munge -m 755 /run/munge; install -d -o slurm -g slurm /run/slurm /var/log/slurm
    mkdir -p /var/lib/slurm/slurmd/gpu1 /var/lib/strata-jobs; chmod 1777 /var/lib/strata-jobs
    for u in alice bob; do install -d -o $u -g $u -m 700 /run/user/$(id -u $u); done
    setsid chroot --userspec=munge:munge / /usr/sbin/munged -F >/var/log/munged.out 2>&1 </dev/null &
    i=0; until munge -n 2>/dev/null | unmunge >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.2; done
    setsid /usr/sbin/slurmd -D -N gpu1 >/var/log/slurm/slurmd-gpu1.out 2>&1 </dev/null &' \
    || die "munged did not start in the node VM"
}

render_conf() { # writes every config file for this instance into $R/etc
  local e=$R/etc/slurm n i first last nodes="gpu[1-$TB_NODES]"
  mkdir -p "$e"
  sed -e "s/@CLUSTER@/$CLUSTER/g" -e "s/@P_CTLD@/$P_CTLD/g" -e "s/@P_DBD@/$P_DBD/g" \
    "$HERE/etc/slurm.conf.in" >"$e/slurm.conf"
  for i in $(seq 1 "$TB_NODES"); do
    if [ "$TB_NODE_VM" = 1 ]; then # what the VM has: confinement is checked against real numbers
      echo "NodeName=gpu$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$(p_slurmd "$i") CPUs=$NODE_VM_CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$NODE_VM_CPUS ThreadsPerCore=1 RealMemory=$NODE_VM_REALMEM Gres=gpu:h100:$TB_GPUS State=UNKNOWN"
    else
      echo "NodeName=gpu$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$(p_slurmd "$i") CPUs=16 Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:h100:$TB_GPUS State=UNKNOWN"
    fi
  done >>"$e/slurm.conf"
  echo "PartitionName=gpu Nodes=$nodes Default=YES MaxTime=1-0 DefaultTime=1:00:00 State=UP OverSubscribe=NO" >>"$e/slurm.conf"
  if [ "$SLURM_VERSION" = 26.05 ]; then # 24.11 has no metrics plugin
    { echo "# OpenMetrics on slurmctld's own port (/metrics/nodes, /metrics/partitions, ...), for the dashboards"
      echo "MetricsType=metrics/openmetrics"; } >>"$e/slurm.conf"
  fi
  {
    echo "AutoDetect=off"
    for i in $(seq 1 "$TB_NODES"); do
      first=$(( (i - 1) * TB_GPUS )); last=$(( i * TB_GPUS - 1 ))
      echo "NodeName=gpu$i Name=gpu Type=h100 File=/dev/fakegpu[$first-$last]"
    done
  } >"$e/gres.conf"
  { # two leaves under one spine: first half of the nodes, second half
    local half=$(( (TB_NODES + 1) / 2 ))
    echo "SwitchName=leaf1 Nodes=gpu[1-$half]"
    if [ "$TB_NODES" -gt "$half" ]; then
      echo "SwitchName=leaf2 Nodes=gpu[$((half + 1))-$TB_NODES]"
      echo "SwitchName=spine1 Switches=leaf[1-2]"
    fi
  } >"$e/topology.conf"
  echo "CgroupPlugin=disabled" >"$e/cgroup.conf"
  [ "$TB_NODE_VM" = 1 ] && node_vm_conf "$e"
  install_plugins
  sed -e "s/@P_DBD@/$P_DBD/g" "$HERE/etc/slurmdbd.conf.in" >"$e/slurmdbd.conf"
  if [ "$SLURM_VERSION" = 24.11 ]; then # 24.11 has no StorageHost=unix:; its libmariadb uses the socket for localhost
    sed -i -e 's|^StorageHost=.*|StorageHost=localhost|' -e 's|^StorageUser=.*|StorageUser=slurm\nStoragePass=slurmtb|' "$e/slurmdbd.conf"
  fi
  in_root sh -c 'chown slurm:slurm /etc/slurm/slurmdbd.conf; chmod 600 /etc/slurm/slurmdbd.conf'
  cp "$HERE/etc/99-strata-testbed.cnf" "$R/etc/mysql/mariadb.conf.d/99-strata-testbed.cnf"
  local packet=$R/etc/mysql/mariadb.conf.d/99-strata-testbed-packet.cnf
  if [ -n "$TB_MARIADB_MAX_PACKET" ]; then
    printf '# testbed.sh --mariadb-max-packet\n[mysqld]\nmax_allowed_packet = %s\n' "$TB_MARIADB_MAX_PACKET" >"$packet"
  else
    rm -f "$packet"
  fi
  # The node names resolve to their NodeAddr, as on a cluster: a job finds its node's address by name
  # (the session templates bind their servers to it).
  { printf '127.0.0.1\tlocalhost %s %s\n' "$(hostname)" "$NODE_NAMES"; printf '::1\tlocalhost ip6-localhost ip6-loopback\n'; } >"$R/etc/hosts"
  if [ ! -s "$e/jwt_hs256.key" ]; then
    head -c 32 /dev/urandom >"$e/jwt_hs256.key"
    in_root sh -c 'chown slurm:slurm /etc/slurm/jwt_hs256.key; chmod 600 /etc/slurm/jwt_hs256.key'
  fi
  for i in $(seq 0 $(( TB_NODES * TB_GPUS - 1 ))); do # fake GPUs: char devices with /dev/null's numbers
    [ -c "$R/dev/fakegpu$i" ] || mknod -m 666 "$R/dev/fakegpu$i" c 1 3
  done
  in_root sh -c "mkdir -p /var/lib/slurm/slurmctld /var/log/slurm /var/log/mysql /var/lib/strata-jobs && \
    chown slurm:slurm /var/lib/slurm/slurmctld /var/log/slurm && chown mysql:mysql /var/log/mysql && chmod 1777 /var/lib/strata-jobs && \
    for n in $NODE_NAMES; do mkdir -p /var/lib/slurm/slurmd/\$n; done"
}

install_plugins() { # slurm.conf has JobSubmitPlugins=lua: slurmctld will not start without the script
  [ -s "$JOB_SUBMIT_LUA" ] || die "missing $JOB_SUBMIT_LUA"
  install -m 644 "$JOB_SUBMIT_LUA" "$R/etc/slurm/job_submit.lua.tmp"
  mv "$R/etc/slurm/job_submit.lua.tmp" "$R/etc/slurm/job_submit.lua"
}

launch() { # name user|root cmd...   chroot execs the daemon, so $! is the daemon's PID
  local name=$1 us=$2; shift 2
  if [ "$us" = root ]; then
    setsid "${CH[@]}" "$R" "$@" >"$LOGS/$name.out" 2>&1 </dev/null &
  else
    setsid "${CH[@]}" --userspec="$us:$us" "$R" "$@" >"$LOGS/$name.out" 2>&1 </dev/null &
  fi
  echo $! >"$PIDS/$name.pid"
}

T0=0
waitfor() { # what timeout_s cmd...
  local what=$1 t=$2; shift 2
  local end=$(( $(date +%s) + t ))
  [ "$1" = in_root ] && { shift; set -- "${CH[@]}" "$R" "$@"; } # timeout cannot run a shell function
  while [ "$(date +%s)" -lt "$end" ]; do
    if timeout 10 "$@" >/dev/null 2>&1; then log "$what ready at +$(since "$T0")s"; return 0; fi
    sleep 0.2
  done
  log "$what NOT ready after ${t}s; last lines of its logs:"; cmd_logs >&2 || true
  return 1
}

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

rest_ping() { # parser
  local tok; tok=$(cat "$INST/admin.jwt")
  curl -sf -m 5 -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $tok" "http://127.0.0.1:$P_REST/slurm/$1/ping/"
}

cmd_up() {
  need_root
  command -v curl >/dev/null || die "curl is missing: apt-get install curl"
  if [ "$TB_FRESH" != 1 ] && alive "$PIDS/slurmctld.pid" && alive "$PIDS/slurmrestd.pid" && [ -s "$INST/env" ] \
    && { [ "$TB_NODE_VM" != 1 ] || alive "$PIDS/node-vm.pid"; }; then
    log "already running; environment file: $INST/env"; return 0
  fi
  [ -s "$TARBALL" ] || cmd_build
  T0=$(now)
  cmd_down_quiet
  if [ "$TB_FRESH" = 1 ] || [ ! -s "$R/etc/strata-testbed-slurm-package" ] || [ ! -f "$INST/root-$VARIANT-r$RECIPE" ]; then
    rm -rf "$INST"; mkdir -p "$R"
    tar --numeric-owner --xattrs -I zstd -xpf "$TARBALL" -C "$R"
    touch "$INST/root-$VARIANT-r$RECIPE"
    log "root unpacked at +$(since "$T0")s"
  fi
  mkdir -p "$PIDS" "$LOGS"
  mounts_up "$R"
  render_conf
  in_root sh -c 'install -d -o slurm -g slurm /run/slurm; install -d -o munge -g munge -m 755 /run/munge; install -d -o mysql -g mysql /run/mysqld'
  launch munged munge /usr/sbin/munged -F
  launch mariadb mysql /usr/sbin/mariadbd
  waitfor munge 20 in_root sh -c 'munge -n | unmunge'
  waitfor mariadb 60 in_root mariadb-admin ping
  # Pre-create the DB: slurmdbd creating it itself trips a libmariadb reconnect bug (error 5027).
  if [ "$SLURM_VERSION" = 24.11 ]; then
    in_root mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmtb'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  else
    in_root mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED VIA unix_socket; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  fi
  launch slurmdbd slurm /usr/sbin/slurmdbd -D
  waitfor slurmdbd 60 in_root sacctmgr -n show cluster
  in_root sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER" || in_root sacctmgr -i add cluster "$CLUSTER" >/dev/null
  launch slurmctld slurm /usr/sbin/slurmctld -D
  waitfor slurmctld 60 in_root scontrol ping
  local n
  if [ "$TB_NODE_VM" = 1 ]; then
    node_vm_up
  else
    for n in $NODE_NAMES; do launch "slurmd-$n" root /usr/sbin/slurmd -D -N "$n"; done
  fi
  waitfor "slurmd x$TB_NODES" 120 bash -c "[ \$(${CH[*]} $R sinfo -h -N -o %t | grep -cE '^(idle|mix|alloc)') -eq $TB_NODES ]"
  # Accounts the tests and the demo submit under. Idempotent.
  if ! in_root sacctmgr -n -P show account testbed format=account | grep -qx testbed; then
    in_root sacctmgr -i add account testbed Description="strata test bed" Organization=testbed >/dev/null
    in_root sacctmgr -i add user alice,bob Account=testbed DefaultAccount=testbed >/dev/null
    in_root sacctmgr -i add user restd Account=testbed DefaultAccount=testbed AdminLevel=Administrator >/dev/null
  fi
  # slurmrestd refuses root and SlurmUser; SLURM_JWT=daemon makes it speak auth/jwt to slurmctld/slurmdbd.
  launch slurmrestd restd env SLURM_JWT=daemon /usr/sbin/slurmrestd -a rest_auth/jwt "127.0.0.1:$P_REST"
  in_root scontrol token username=root lifespan=604800 | sed 's/^SLURM_JWT=//' >"$INST/admin.jwt"
  chmod 600 "$INST/admin.jwt"
  local parsers="" p
  waitfor slurmrestd 30 bash -c "curl -sf -m 5 -H 'X-SLURM-USER-TOKEN: $(cat "$INST/admin.jwt")' http://127.0.0.1:$P_REST/openapi/v3 >/dev/null"
  for p in v0.0.40 v0.0.41 v0.0.42 v0.0.43 v0.0.44 v0.0.45 v0.0.46 v0.0.47; do
    rest_ping "$p" >/dev/null 2>&1 && parsers="$parsers $p"
  done
  parsers=${parsers# }
  mkdir -p "$INST/bin"
  cat >"$INST/bin/scontrol" <<SC
#!/bin/sh
# scontrol of test bed $TB_NAME; authenticates with SLURM_JWT when it is set (no munge identity needed).
exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \${SLURM_JWT:+SLURM_JWT=\$SLURM_JWT} chroot $R scontrol "\$@"
SC
  for n in sbatch squeue scancel sacctmgr sinfo sshare sacct sprio; do
    sed -e "s/scontrol/$n/g" "$INST/bin/scontrol" >"$INST/bin/$n"
  done
  chmod 755 "$INST"/bin/*
  local release; release=$(in_root sh -c 'slurmctld -V' | awk '{print $2}')
  cat >"$INST/env" <<ENV
# Slurm test bed $TB_NAME, written by test/testbed/slurm/testbed.sh at $(date -u +%FT%TZ)
STRATA_TB_NAME=$TB_NAME
STRATA_TB_SLURM_VERSION=$SLURM_VERSION
STRATA_TB_SLURM_RELEASE=$release
STRATA_TB_CLUSTER=$CLUSTER
STRATA_TB_REST_URL=http://127.0.0.1:$P_REST
STRATA_TB_METRICS_URL=$([ "$SLURM_VERSION" = 26.05 ] && echo "http://127.0.0.1:$P_CTLD/metrics")
STRATA_TB_PARSERS="$parsers"
STRATA_TB_API_VERSION=${parsers##* }
STRATA_TB_ADMIN_USER=root
STRATA_TB_ADMIN_TOKEN_FILE=$INST/admin.jwt
STRATA_TB_JWT_KEY=$R/etc/slurm/jwt_hs256.key
STRATA_TB_ROOT=$R
STRATA_TB_BIN=$INST/bin
STRATA_TB_SCONTROL=$INST/bin/scontrol
STRATA_TB_LOGS="$R/var/log/slurm $LOGS"
STRATA_TB_NODES="$NODE_NAMES"
STRATA_TB_GPUS_PER_NODE=$TB_GPUS
STRATA_TB_GPU_TYPE=h100
STRATA_TB_PARTITION=gpu
STRATA_TB_ACCOUNT=testbed
STRATA_TB_USERS="alice bob"
STRATA_TB_JOB_DIR=/var/lib/strata-jobs
STRATA_TB_SESSIONS=$([ "$TB_NODE_VM" = 1 ] && echo 0 || echo "$TB_SESSIONS")
STRATA_TB_NODE_ADDR=127.0.0.1
SLURM_CONF=$R/etc/slurm/slurm.conf
ENV
  if [ "$TB_NODE_VM" = 1 ]; then
    cat >"$INST/bin/node-exec" <<NX
#!/bin/sh
# Runs a command as root in the node VM of test bed $TB_NAME (stdin, output and exit code pass through).
exec $TB_CACHE/node/agent exec 127.0.0.1:$P_AGENT "\$@"
NX
    chmod 755 "$INST/bin/node-exec"
    cat >>"$INST/env" <<ENV
# The node bed: gpu1 runs in a qemu VM under its own kernel.
STRATA_TB_NODE_VM=1
STRATA_TB_NODE_AGENT=127.0.0.1:$P_AGENT
STRATA_TB_NODE_ACCEL=$(cat "$INST/vm/accel")
STRATA_TB_NODE_KERNEL=$(cat "$TB_CACHE/node/kernel-version")
STRATA_TB_NODE_SCRATCH=/scratch
STRATA_TB_NODE_BOOT_SECONDS=$(cat "$INST/vm/boot-seconds")
ENV
  fi
  log "up in $(since "$T0")s; Slurm $release, REST parsers: $parsers; env file: $INST/env"
}

stop_group() { # pidfile...: SIGTERM all, wait up to 30 s, SIGKILL stragglers (by PID only)
  local f p pids=() i alive
  for f in "$@"; do
    [ -s "$f" ] || continue; p=$(cat "$f")
    if kill -0 "$p" 2>/dev/null && [ "$(readlink "/proc/$p/root")" = "$R" ]; then kill -TERM "$p" && pids+=("$p"); fi
    rm -f "$f"
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  for i in $(seq 300); do
    alive=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && return 0; sleep 0.1
  done
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && { log "PID $p did not stop in 30 s: SIGKILL"; kill -KILL "$p" 2>/dev/null; }; done
  return 0
}

leftovers() { # PIDs of processes whose root is this instance's root (job steps outlive slurmd)
  local d
  for d in /proc/[0-9]*; do
    [ "$(readlink "$d/root" 2>/dev/null)" = "$R" ] && echo "${d#/proc/}"
  done
  return 0
}

cmd_down_quiet() {
  [ -d "$INST" ] || return 0
  if alive "$PIDS/slurmctld.pid"; then
    local ids; ids=$(timeout 10 "${CH[@]}" "$R" squeue -h -o %i 2>/dev/null || true)
    if [ -n "$ids" ]; then
      timeout 10 "${CH[@]}" "$R" scancel $ids 2>/dev/null || true
      for _ in $(seq 50); do [ -z "$(timeout 5 "${CH[@]}" "$R" squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
    fi
  fi
  stop_group "$PIDS/slurmrestd.pid" "$PIDS"/slurmd-*.pid "$PIDS/slurmctld.pid"
  if [ -s "$PIDS/node-vm.pid" ] || [ -s "$INST/vm/qemu.pid" ]; then bash "$NODE_VM" stop --inst "$INST"; rm -f "$PIDS/node-vm.pid"; fi
  stop_group "$PIDS/slurmdbd.pid"
  stop_group "$PIDS/mariadb.pid" "$PIDS/munged.pid"
  local rest; rest=$(leftovers)
  if [ -n "$rest" ]; then
    log "stopping processes left in the root: $(echo $rest)"
    kill -TERM $rest 2>/dev/null || true; sleep 1
    rest=$(leftovers); [ -z "$rest" ] || kill -KILL $rest 2>/dev/null || true
  fi
  mounts_down "$R"
}

cmd_down() {
  need_root
  local t0; t0=$(now)
  cmd_down_quiet
  rm -f "$INST/env"
  if [ "$PURGE" = 1 ]; then rm -rf "$INST"; log "purged $INST"; fi
  log "down in $(since "$t0")s"
}

cmd_status() {
  [ -d "$PIDS" ] || { echo "$TB_NAME: not set up ($INST)"; return 3; }
  local f rc=0 name
  for f in "$PIDS"/*.pid; do
    [ -e "$f" ] || { echo "$TB_NAME: stopped"; return 3; }
    name=$(basename "$f" .pid)
    if alive "$f"; then printf '%-16s running  pid %s\n' "$name" "$(cat "$f")"; else printf '%-16s DEAD\n' "$name"; rc=1; fi
  done
  if [ -s "$INST/env" ]; then
    # shellcheck disable=SC1091
    . "$INST/env"
    local p=${STRATA_TB_PARSERS##* }
    if rest_ping "$p" | grep -q '"responding": *true\|"pinged": *"UP"'; then echo "slurmrestd       answers on $STRATA_TB_REST_URL ($p)"; else echo "slurmrestd       NOT answering"; rc=1; fi
    echo "env file         $INST/env"
  fi
  return $rc
}

cmd_restart_ctld() {
  need_root
  [ -s "$INST/env" ] || die "not running (no $INST/env)"
  if alive "$PIDS/slurmctld.pid"; then log "slurmctld is running"; return 0; fi
  T0=$(now)
  launch slurmctld slurm /usr/sbin/slurmctld -D
  waitfor slurmctld 60 in_root scontrol ping
}

cmd_logs() {
  local f
  for f in "$R"/var/log/slurm/*.log "$R"/var/log/mysql/error.log "$LOGS"/*.out; do
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
  restart-ctld) cmd_restart_ctld ;;
  plugins) [ -d "$R/etc/slurm" ] || die "no instance at $INST"; install_plugins; log "installed $R/etc/slurm/job_submit.lua" ;;
  ""|-h|--help|help) usage ;;
  *) echo "testbed: unknown command $CMD (see --help)" >&2; exit 2 ;;
esac
