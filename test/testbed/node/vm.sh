#!/usr/bin/env bash
# The node bed's virtual machine: one Slurm compute node under its own kernel
# (Debian's 6.1 cloud kernel) in qemu, booted from the test bed's cached Debian
# root, with cgroup v2, fake GPUs as distinct character devices and an XFS
# scratch disk mounted with prjquota. testbed.sh --node-vm drives it; see
# README.md beside this file.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: vm.sh <command> [options]

Commands:
  kernel    fetch Debian's 6.1 cloud kernel and build the initramfs (cached)
  image     build the node's disk image from the cached root of --variant (cached)
  probe     find out whether this machine boots the kernel under KVM (cached)
  start     boot the VM for instance --inst (needs kernel and image); with --systemd
            its PID 1 is the root's systemd, not the bed's guest-init
  stop      stop the VM of --inst (by the PID qemu recorded)
  exec      run a command in the running VM as root:  vm.sh exec --inst DIR -- CMD...

Options (or the variables in brackets):
  --variant V    cached root: root-V-r<recipe>.tar.zst in TB_CACHE, e.g. 2605-sessions
  --inst DIR     the instance folder (TB_STATE/<name>); the VM's files go to DIR/vm
  --node N       the node's name (gpu1)                                    [NODE_VM_NAME]
  --cpus N       vCPUs (1 or 2)                                            [NODE_VM_CPUS, 2]
  --mem MB       memory                                                    [NODE_VM_MEM, 1024]
  --gpus N       fake GPUs                                                 [NODE_VM_GPUS, 4]
  --slurmd-port P  forwarded from 127.0.0.1:P on the host to slurmd in the guest
  --agent-port P   forwarded from 127.0.0.1:P to the guest's exec agent
  --accel A      tcg, kvm or auto (the probe decides)                      [NODE_VM_ACCEL, auto]
  --systemd      boot /lib/systemd/systemd into strata-node.target: the network and
                 the exec agent, none of the root's services, no slurmd port, no
                 scratch disk (a private instance for tests of units and packages)
USAGE
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
CMD=${1:-}; [ $# -gt 0 ] && shift
TB_CACHE=${TB_CACHE:-/var/cache/strata/testbed}
NC=$TB_CACHE/node
VARIANT=${VARIANT:-}
INST=${INST:-}
NODE_VM_NAME=${NODE_VM_NAME:-gpu1}
NODE_VM_CPUS=${NODE_VM_CPUS:-2}
NODE_VM_MEM=${NODE_VM_MEM:-1024}
NODE_VM_GPUS=${NODE_VM_GPUS:-4}
NODE_VM_ACCEL=${NODE_VM_ACCEL:-auto}
NODE_VM_SYSTEMD=${NODE_VM_SYSTEMD:-0}
SLURMD_PORT=${SLURMD_PORT:-}
AGENT_PORT=${AGENT_PORT:-}
while [ $# -gt 0 ]; do
  case $1 in
    --variant) VARIANT=$2; shift 2 ;;
    --inst) INST=$2; shift 2 ;;
    --node) NODE_VM_NAME=$2; shift 2 ;;
    --cpus) NODE_VM_CPUS=$2; shift 2 ;;
    --mem) NODE_VM_MEM=$2; shift 2 ;;
    --gpus) NODE_VM_GPUS=$2; shift 2 ;;
    --slurmd-port) SLURMD_PORT=$2; shift 2 ;;
    --agent-port) AGENT_PORT=$2; shift 2 ;;
    --accel) NODE_VM_ACCEL=$2; shift 2 ;;
    --systemd) NODE_VM_SYSTEMD=1; shift ;;
    --) shift; break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "vm.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

# Bump NODE_RECIPE when the image's packages, the guest init or the agent's protocol change
# (the agent is built into the image); INITRD_RECIPE when initramfs-init or MODS change (the
# images stay).
NODE_RECIPE=1
INITRD_RECIPE=2
# The guest's extra packages: xfs_quota/xfs_io for the quota script, crun for containers.
NODE_PACKAGES="xfsprogs crun"
MODS="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk failover net_failover virtio_net libcrc32c xfs"

log() { printf '[node-vm] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

kver() { # the newest cached kernel's version
  local v; v=$(cat "$NC/kernel-version" 2>/dev/null) || return 1; echo "$v"
}

locked() { # name cmd...: one at a time per machine (two beds start together)
  local name=$1; shift
  mkdir -p "$NC"
  ( flock 9; "$@" ) 9>"$NC/.lock-$name"
}

initrd_path() { echo "$NC/initrd-$1-i$INITRD_RECIPE.cpio.gz"; }

cmd_kernel() {
  mkdir -p "$NC"
  if [ -s "$NC/kernel-version" ] && [ -s "$(initrd_path "$(kver)")" ]; then return 0; fi
  local t0; t0=$(now)
  command -v busybox >/dev/null && busybox --list | grep -qx switch_root \
    || die "busybox (static) is missing: apt-get install busybox-static"
  ldd "$(command -v busybox)" >/dev/null 2>&1 && die "busybox is not the static build: apt-get install busybox-static"
  local pkg=""
  # A new initramfs for the cached kernel keeps that kernel (and its probe), while the mirror serves it.
  if [ -s "$NC/kernel-version" ] && [ -s "$NC/vmlinuz-$(kver)" ] && apt-cache show "linux-image-$(kver)" >/dev/null 2>&1; then
    pkg=linux-image-$(kver)
  fi
  [ -n "$pkg" ] || pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-cloud-amd64$' | awk '{print $1}' | sort -V | tail -1)
  [ -n "$pkg" ] || die "apt-cache knows no linux-image-6.1.0-*-cloud-amd64 (apt-get update; Debian 12's main suite serves it)"
  local k=$NC/k.$$
  rm -rf "$k"; mkdir -p "$k"
  (cd "$NC" && apt-get download "$pkg" >/dev/null 2>&1) || die "apt-get download $pkg failed"
  dpkg-deb -x "$NC/${pkg}_"*.deb "$k"
  local v=${pkg#linux-image-}
  cp "$k/boot/vmlinuz-$v" "$NC/vmlinuz-$v.tmp"; mv "$NC/vmlinuz-$v.tmp" "$NC/vmlinuz-$v"
  # The initramfs: static busybox and the modules that reach the root disk, the
  # network and XFS (the guest's root has no kmod: everything is loaded here).
  local ir=$k/initramfs m f
  mkdir -p "$ir"/{bin,dev,proc,sys,newroot,lib/modules}
  cp "$(command -v busybox)" "$ir/bin/busybox"
  for m in $MODS; do
    f=$(find "$k/lib/modules/$v" -name "$m.ko" | head -1)
    [ -n "$f" ] || die "module $m not in $pkg"
    cp "$f" "$ir/lib/modules/"
  done
  cp "$HERE/initramfs-init" "$ir/init"; chmod 755 "$ir/init"
  printf '%s\n' $MODS >"$ir/lib/modules/order"
  (cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1) >"$(initrd_path "$v").tmp"
  mv "$(initrd_path "$v").tmp" "$(initrd_path "$v")"
  echo "$v" >"$NC/kernel-version"
  rm -rf "$k" "$NC/${pkg}_"*.deb
  log "kernel $v and initramfs cached in $NC after $(since "$t0")s"
}

image_path() { echo "$NC/node-$VARIANT-r$NODE_RECIPE.ext4"; }

cmd_image() {
  [ -n "$VARIANT" ] || die "--variant is required"
  local img; img=$(image_path)
  [ -s "$img" ] && return 0
  local tarball; tarball=$(ls "$TB_CACHE"/root-"$VARIANT"-r*.tar.zst 2>/dev/null | sort -V | tail -1)
  [ -n "$tarball" ] || die "no cached root $TB_CACHE/root-$VARIANT-r*.tar.zst: run testbed.sh build first"
  local t0 b; t0=$(now); b=$NC/image-$VARIANT.$$
  trap 'for m in run dev/pts proc; do mountpoint -q "'"$b"'/$m" && umount "'"$b"'/$m"; done; rm -rf "'"$b"'"' EXIT
  mkdir -p "$b"
  tar --numeric-owner --xattrs -I zstd -xpf "$tarball" -C "$b"
  log "root unpacked at +$(since "$t0")s"
  mount -t proc proc "$b/proc"; mount -t tmpfs tmpfs "$b/run"
  mkdir -p "$b/dev/pts"; mount -t devpts -o newinstance devpts "$b/dev/pts"
  cp /etc/resolv.conf "$b/etc/resolv.conf"
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$b" sh -c "export DEBIAN_FRONTEND=noninteractive;
     apt-get -q update && apt-get install -y -q --no-install-recommends $NODE_PACKAGES && apt-get clean && rm -rf /var/lib/apt/lists/*" \
    >"$NC/image-$VARIANT.log" 2>&1 || { tail -20 "$NC/image-$VARIANT.log" >&2; die "apt-get install $NODE_PACKAGES failed (log: $NC/image-$VARIANT.log)"; }
  for m in run dev/pts proc; do umount "$b/$m"; done
  log "packages installed at +$(since "$t0")s"
  # What the node does not need: the database and the session servers' pages stay out of the image.
  rm -rf "$b/var/lib/mysql" "$b/usr/share/jupyter/lab/staging"
  install -m 755 "$(command -v busybox)" "$b/usr/local/sbin/busybox"
  install -m 755 "$HERE/guest-init" "$b/usr/local/sbin/strata-node-init"
  (cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$b/usr/local/sbin/strata-node-agent" ./test/testbed/node/agent) \
    || die "go build of the node agent failed"
  mkdir -p "$b/scratch"
  local size; size=$(du -sm "$b" | cut -f1)
  log "root ready (${size} MB, node agent built) at +$(since "$t0")s"
  rm -f "$img.tmp"; truncate -s "$(( size * 13 / 10 + 1024 ))M" "$img.tmp"
  mkfs.ext4 -q -F -L strata-node -E root_owner=0:0 -d "$b" "$img.tmp" || die "mkfs.ext4 -d failed"
  mv "$img.tmp" "$img"
  rm -rf "$b"; trap - EXIT
  log "image $img ($(du -h "$img" | cut -f1) used) after $(since "$t0")s"
}

qemu_base() { # accel: the command line shared by the probe and the node
  local accel=$1 v; v=$(kver)
  QEMU=(qemu-system-x86_64 -nodefaults -no-user-config -nographic -machine q35 -m "$NODE_VM_MEM"
    -kernel "$NC/vmlinuz-$v" -initrd "$(initrd_path "$v")" -serial stdio)
  if [ "$accel" = kvm ]; then QEMU+=(-accel kvm -cpu host); else QEMU+=(-accel tcg,thread=multi,tb-size=256 -cpu max); fi
}

cmd_probe() { # prints kvm or tcg
  cmd_kernel
  local f=$NC/accel-$(kver)
  if [ -s "$f" ]; then cat "$f"; return 0; fi
  local a=tcg out
  if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
    qemu_base kvm
    out=$(timeout 60 "${QEMU[@]}" -smp 1 -append "console=ttyS0 panic=-1 strata.probe" 2>&1 || true)
    if grep -q STRATA-PROBE-OK <<<"$out"; then a=kvm; else log "KVM probe: the kernel did not reach its init under KVM ($(tail -c 200 <<<"$out" | tr '\n' ' '))"; fi
  fi
  echo "$a" >"$f"; echo "$a"
}

vm_dir() { [ -n "$INST" ] || die "--inst is required"; echo "$INST/vm"; }

agent() { # cmd...: run in the guest
  "$NC/agent" exec "127.0.0.1:$AGENT_PORT" "$@"
}

cmd_start() {
  local d; d=$(vm_dir)
  [ -n "$AGENT_PORT" ] || die "--agent-port is required"
  [ -n "$SLURMD_PORT" ] || [ "$NODE_VM_SYSTEMD" = 1 ] || die "--slurmd-port is required (but with --systemd)"
  locked kernel cmd_kernel; locked "image-$VARIANT" cmd_image
  local accel=$NODE_VM_ACCEL
  [ "$accel" = auto ] && accel=$(locked kernel cmd_probe)
  locked agent sh -c "cd '$REPO' && go build -o '$NC/agent.tmp' ./test/testbed/node/agent && mv '$NC/agent.tmp' '$NC/agent'" \
    || die "go build of the node agent failed"
  mkdir -p "$d"
  cmd_stop_quiet
  qemu_base "$accel"
  QEMU+=(-smp "$NODE_VM_CPUS" -name "strata-$NODE_VM_NAME"
    -drive "file=$(image_path),format=raw,if=virtio,snapshot=on,cache=unsafe")
  # user networking: the guest reaches the host's loopback as 10.0.2.2, and only
  # 127.0.0.1 on the host is forwarded to it (slurmd and the exec agent).
  local fwd="hostfwd=tcp:127.0.0.1:$AGENT_PORT-:$AGENT_PORT"
  local append="console=ttyS0 panic=-1 quiet strata.node=$NODE_VM_NAME strata.agent=$AGENT_PORT"
  if [ "$NODE_VM_SYSTEMD" = 1 ]; then
    # systemd's own boot: no slurmd, no fake GPUs, no scratch disk.
    append+=" strata.init=systemd systemd.unit=strata-node.target systemd.show_status=1"
  else
    # The XFS scratch disk: sparse, made on the host (mkfs.xfs needs no mount), fresh at every start.
    command -v mkfs.xfs >/dev/null || die "mkfs.xfs is missing: apt-get install xfsprogs"
    rm -f "$d/scratch.xfs"; truncate -s 2G "$d/scratch.xfs"; mkfs.xfs -q "$d/scratch.xfs"
    QEMU+=(-drive "file=$d/scratch.xfs,format=raw,if=virtio,cache=unsafe")
    fwd="hostfwd=tcp:127.0.0.1:$SLURMD_PORT-:$SLURMD_PORT,$fwd"
    append+=" strata.gpus=$NODE_VM_GPUS"
  fi
  QEMU+=(-netdev "user,id=n0,net=10.0.2.0/24,host=10.0.2.2,$fwd"
    -device virtio-net-pci,netdev=n0
    -append "$append"
    -pidfile "$d/qemu.pid")
  local t0; t0=$(now)
  TMPDIR=$d setsid "${QEMU[@]}" >"$d/console.log" 2>&1 </dev/null &
  echo "$accel" >"$d/accel"
  local end=$(( $(date +%s) + ${NODE_VM_BOOT_TIMEOUT:-240} ))
  until agent true >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$end" ] || ! kill -0 $! 2>/dev/null; then
      tail -30 "$d/console.log" >&2; die "the VM did not answer within ${NODE_VM_BOOT_TIMEOUT:-240}s (console: $d/console.log)"
    fi
    sleep 1
  done
  if [ "$NODE_VM_SYSTEMD" = 1 ]; then
    # The agent answers once strata-node.target's units have started; PID 1 must be systemd.
    [ "$(agent cat /proc/1/comm 2>/dev/null)" = systemd ] || { tail -30 "$d/console.log" >&2; die "the VM's PID 1 is not systemd (console: $d/console.log)"; }
    echo systemd >"$d/init"
  else
    echo guest-init >"$d/init"
  fi
  log "VM up ($accel, $NODE_VM_CPUS vCPU, $NODE_VM_MEM MB, $(cat "$d/init")) after $(since "$t0")s"
  echo "$(since "$t0")" >"$d/boot-seconds"
}

cmd_stop_quiet() {
  local d p; d=$(vm_dir)
  [ -s "$d/qemu.pid" ] || return 0
  p=$(cat "$d/qemu.pid")
  if kill -0 "$p" 2>/dev/null && grep -q qemu-system "/proc/$p/cmdline" 2>/dev/null; then
    kill -TERM "$p"
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p"
  fi
  rm -f "$d/qemu.pid"
}

case $CMD in
  kernel) locked kernel cmd_kernel ;;
  image) locked kernel cmd_kernel; locked "image-$VARIANT" cmd_image ;;
  probe) locked kernel cmd_probe ;;
  start) cmd_start ;;
  stop) cmd_stop_quiet ;;
  exec) [ -n "$AGENT_PORT" ] || die "--agent-port is required"; agent "$@" ;;
  ""|-h|--help|help) usage ;;
  *) echo "vm.sh: unknown command $CMD (see --help)" >&2; exit 2 ;;
esac
