#!/bin/sh
# Slurm Epilog (slurmd, as root, on each node of a job): take the job's id
# out of the GPU files dcgm-job-map-prolog.sh wrote for dcgm-exporter
# (--hpc-job-mapping-dir), and remove a file left without a job, so that
# the GPU's metrics lose their hpc_job label. See slurm-plugins/README.md.
#
# It reads every GPU file of the directory rather than the job's GPU
# variables: a file of this job is cleared whatever Slurm sets here.
#
# It never fails: an epilog that fails drains the node. What goes wrong is
# said on stderr and to syslog.

# Slurm runs epilogs without a search path.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
# The directory dcgm-exporter reads; STRATA_DCGM_JOB_MAP_DIR overrides it.
DIR=${STRATA_DCGM_JOB_MAP_DIR:-/run/dcgm-job-map}

say() {
	echo "strata dcgm-job-map epilog: job ${SLURM_JOB_ID:-?}: $*" >&2
	logger -t strata-dcgm-job-map -- "epilog: job ${SLURM_JOB_ID:-?}: $*" 2>/dev/null || :
}

job=${SLURM_JOB_ID:-}
case $job in
'' | *[!0-9]*)
	say "SLURM_JOB_ID is not a job id: nothing unmapped"
	exit 0
	;;
esac
[ -d "$DIR" ] || exit 0 # no prolog ever mapped a job here

# touch first: a redirection that fails on exec ends the shell, with an
# error status.
if ! touch "$DIR/.lock" 2>/dev/null; then
	say "cannot write $DIR: nothing unmapped"
	exit 0
fi
exec 9>>"$DIR/.lock"
if ! flock -w 10 9; then
	say "$DIR/.lock held for 10 s: nothing unmapped"
	exit 0
fi

for f in "$DIR"/*; do
	g=${f##*/}
	case $g in
	'' | *[!0-9]*) continue ;;
	esac
	[ -f "$f" ] || continue
	grep -qx -e "$job" "$f" || continue
	tmp=$DIR/.$g.$job.$$
	grep -vx -e "$job" "$f" >"$tmp"
	case $? in
	0) if ! { chmod 0644 "$tmp" && mv -f "$tmp" "$f"; }; then say "cannot write $f"; fi ;;
	1) rm -f "$f" || say "cannot remove $f" ;; # no other job on the GPU
	*) say "cannot read $f" ;;
	esac
	rm -f "$tmp"
done
exit 0
