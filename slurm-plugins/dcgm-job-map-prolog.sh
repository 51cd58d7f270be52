#!/bin/sh
# Slurm Prolog (slurmd, as root, on each node of a job): tell dcgm-exporter
# which job holds which GPU of this node.
#
# dcgm-exporter started with --hpc-job-mapping-dir DIR (or
# DCGM_HPC_JOB_MAPPING_DIR=DIR) reads the files of DIR named by a GPU's
# index ("0", "1", ...), each holding the ids of the jobs on that GPU one
# a line, and labels that GPU's metrics hpc_job="<id>" (one series per job
# when jobs share a GPU). This script adds the job's id to the file of each
# GPU Slurm gave the job on this node; dcgm-job-map-epilog.sh takes it out.
# Install and configure: slurm-plugins/README.md.
#
# The GPUs are SLURM_JOB_GPUS (else CUDA_VISIBLE_DEVICES, else
# GPU_DEVICE_ORDINAL): Slurm's indices of the node's GPUs, which are
# NVML's and so dcgm-exporter's "gpu" label with AutoDetect=nvml in
# gres.conf. A job on a MIG instance is not mapped.
#
# It never fails: a prolog that fails drains the node, and a missing label
# is not worth a node. What goes wrong is said on stderr and to syslog.

# Slurm runs prologs without a search path.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
# The directory dcgm-exporter reads; STRATA_DCGM_JOB_MAP_DIR overrides it.
DIR=${STRATA_DCGM_JOB_MAP_DIR:-/run/dcgm-job-map}

say() {
	echo "strata dcgm-job-map prolog: job ${SLURM_JOB_ID:-?}: $*" >&2
	logger -t strata-dcgm-job-map -- "prolog: job ${SLURM_JOB_ID:-?}: $*" 2>/dev/null || :
}

job=${SLURM_JOB_ID:-}
case $job in
'' | *[!0-9]*)
	say "SLURM_JOB_ID is not a job id: nothing mapped"
	exit 0
	;;
esac
gpus=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-${GPU_DEVICE_ORDINAL:-}}}
[ -n "$gpus" ] || exit 0 # a job without GPUs here

# touch first: a redirection that fails on exec ends the shell, with an
# error status.
if ! mkdir -p "$DIR" 2>/dev/null || ! touch "$DIR/.lock" 2>/dev/null; then
	say "cannot write $DIR: nothing mapped"
	exit 0
fi
exec 9>>"$DIR/.lock"
# Prologs of jobs sharing a GPU run at once; each rewrites whole files.
if ! flock -w 10 9; then
	say "$DIR/.lock held for 10 s: nothing mapped"
	exit 0
fi

# add GPU: the job's id, once, at the end of the GPU's file, replaced
# whole (a rename), so dcgm-exporter never reads half a file. A file named
# with a dot is not a GPU index to dcgm-exporter.
add() {
	f=$DIR/$1
	tmp=$DIR/.$1.$job.$$
	if { if [ -f "$f" ]; then grep -vx -e "$job" "$f"; fi; echo "$job"; } >"$tmp" &&
		chmod 0644 "$tmp" && mv -f "$tmp" "$f"; then
		return 0
	fi
	rm -f "$tmp"
	say "cannot write $f: GPU $1 not mapped"
}

# index N: sets n to N without leading zeros (dcgm-exporter's "gpu" label
# has none), or to "" when N is not 1 or 2 digits (a node has fewer than
# 100 GPUs).
index() {
	n=$1
	case $n in
	'' | *[!0-9]* | ???*)
		n=
		return
		;;
	esac
	while :; do
		case $n in
		0?*) n=${n#0} ;;
		*) break ;;
		esac
	done
}

# The list is "0,1" or "0-3,6", split on commas and never globbed.
set -f
IFS=,
for g in $gpus; do
	index "${g%%-*}"
	lo=$n
	index "${g#*-}"
	hi=$n
	if [ -z "$lo" ] || [ -z "$hi" ] || [ "$lo" -gt "$hi" ]; then
		say "GPU index '$g' is not a number or a range: skipped"
		continue
	fi
	i=$lo
	while [ "$i" -le "$hi" ]; do
		add "$i"
		i=$((i + 1))
	done
done
exit 0
