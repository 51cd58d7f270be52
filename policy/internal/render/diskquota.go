package render

import (
	"bytes"
	"fmt"
	"regexp"

	"github.com/strata-hpc/strata/policy/internal/spec"
)

func init() {
	register(File{Name: "disk-quota.sh", Dir: DirStrata, Mode: 0o755,
		Doc: "sets the projects' XFS and Lustre quotas (dry run unless --apply)", Render: DiskQuotaScript})
}

// diskQuotaHead is the script up to the projects: its usage, the
// functions that set one quota, and the argument parsing. It is POSIX sh.
const diskQuotaHead = `#!/bin/sh
# disk-quota.sh: the disk quotas of the projects of cluster %[1]s, written by
# strata-policy render from the policy. Do not edit it: the next render
# overwrites it; change the disk: blocks of the policy instead.
#
# Usage: disk-quota.sh [--dry-run | --apply]
#
# By default (--dry-run) it prints the commands that set each project's
# quota and runs none of them: it only looks (test -d, df). With --apply,
# as root, it runs them. For each project it checks that the directory
# exists, finds the mount point of its file system (df --output=target),
# then
#   XFS:    xfs_quota -x -c 'project -s -p DIR ID' MOUNT   (tags the tree)
#           xfs_quota -x -c 'limit -p bsoft=Sg bhard=Hg ihard=N ID' MOUNT
#   Lustre: lfs project -p ID -s -r DIR                     (tags the tree)
#           lfs setquota -p ID -b SG -B HG -I N MOUNT
# with the limits in GiB (g and G are 1024-based in both tools); a limit of
# 0 is none. Tagging walks the whole tree, which takes a while on a large
# one. A project whose directory is missing or whose command fails is
# reported and the others go on; the exit status is then 1 (2 for a wrong
# argument).
#
# Project ids are disk.project_id of the policy, or, where it names none,
# derived from the project's account (2^30 + FNV-1a(account) mod 2^30), so
# that an id does not change when other projects come and go.
#
# With --apply it records each quota it set (file system, id, mount point,
# account) in $STRATA_DISK_QUOTA_STATE (/var/lib/strata/disk-quota.state).
# A quota recorded there that the policy no longer has (a project removed,
# or its id or file system changed) loses its limits (all set to 0, no
# limit); its directory and files are left as they are. Only quotas this
# script recorded are ever cleared. Running it again with the same policy
# sets the same limits and changes nothing.
set -eu

usage() {
	sed -n '2,/^set -eu$/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

mode=dry-run
state=${STRATA_DISK_QUOTA_STATE:-/var/lib/strata/disk-quota.state}
case $# in
0) ;;
1)
	case $1 in
	--apply) mode=apply ;;
	--dry-run) ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		echo "disk-quota.sh: unknown argument $1 (see --help)" >&2
		exit 2
		;;
	esac
	;;
*)
	echo "disk-quota.sh: at most one argument, --dry-run or --apply (see --help)" >&2
	exit 2
	;;
esac

# run prints a command as a shell reads it and, with --apply, runs it.
run() {
	line=
	for a in "$@"; do
		case $a in
		*[!A-Za-z0-9_./=:,@%%+-]* | '') a="'$a'" ;;
		esac
		line="$line $a"
	done
	echo "+$line"
	[ "$mode" = dry-run ] || "$@"
}

# mount_of ACCOUNT DIR prints the mount point of the file system of DIR,
# after checking that DIR exists.
mount_of() {
	if [ ! -d "$2" ]; then
		echo "disk-quota.sh: $1: directory $2 does not exist: create it, then run again" >&2
		return 1
	fi
	if ! out=$(df --output=target "$2"); then
		echo "disk-quota.sh: $1: cannot find the file system of $2" >&2
		return 1
	fi
	printf '%%s\n' "$out" | sed -n '$p'
}

# set_now holds a line "FS ID MOUNT ACCOUNT" per quota set in this run,
# after a first empty line.
set_now='
'
record() {
	set_now="$set_now$1 $2 $3 $4
"
}

# xfs ACCOUNT ID DIR SOFT_GIB HARD_GIB INODES
xfs() {
	mnt=$(mount_of "$1" "$3") || return 1
	run xfs_quota -x -c "project -s -p $3 $2" "$mnt" || return 1
	run xfs_quota -x -c "limit -p bsoft=$4g bhard=$5g ihard=$6 $2" "$mnt" || return 1
	record xfs "$2" "$mnt" "$1"
}

# lustre ACCOUNT ID DIR SOFT_GIB HARD_GIB INODES
lustre() {
	mnt=$(mount_of "$1" "$3") || return 1
	run lfs project -p "$2" -s -r "$3" || return 1
	run lfs setquota -p "$2" -b "$4G" -B "$5G" -I "$6" "$mnt" || return 1
	record lustre "$2" "$mnt" "$1"
}

# unlimit FS ID MOUNT: the limits of a quota the policy no longer has, all
# set to none; the files keep their project id and stay where they are.
unlimit() {
	case $1 in
	xfs) run xfs_quota -x -c "limit -p bsoft=0 bhard=0 isoft=0 ihard=0 $2" "$3" ;;
	lustre) run lfs setquota -p "$2" -b 0 -B 0 -i 0 -I 0 "$3" ;;
	*)
		echo "disk-quota.sh: $state: unknown file system $1" >&2
		return 1
		;;
	esac
}

if [ "$mode" = dry-run ]; then
	echo "disk-quota.sh: dry run: the commands below are not run; run with --apply to set the quotas" >&2
fi
failed=
`

// diskScriptPathRE matches the paths the script takes: absolute, and
// nothing the shell or xfs_quota's -c command would read as syntax.
var diskScriptPathRE = regexp.MustCompile(`^/[A-Za-z0-9._+@/-]*$`)

// DiskQuotaScript renders disk-quota.sh: one line per project with a disk
// quota, in the order of the policy, that sets its XFS or Lustre project
// quota (see the script's own comments), after a comment with the
// project's values and where its project id comes from. The policy's
// validation guarantees what the script relies on: paths of letters,
// digits and ._-+@/ only (they go unquoted into xfs_quota's -c command),
// and project ids unique and from 1 to 2^31-1.
func DiskQuotaScript(p *spec.Policy) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, diskQuotaHead, p.Cluster.Name)
	n := 0
	for _, t := range p.Tenants {
		for _, pr := range t.Projects {
			d := pr.Disk
			if d == nil {
				continue
			}
			account := p.Account(t.Name, pr.Name)
			// Parse refuses both; a policy built in code might not, and
			// the script must not run what a path says.
			if !diskScriptPathRE.MatchString(d.Path) {
				return nil, fmt.Errorf("project %s: disk path %q: only letters, digits and ._-+@/ can go into the quota commands", account, d.Path)
			}
			if d.ProjectID < 0 || d.ProjectID > spec.MaxDerivedProjectID {
				return nil, fmt.Errorf("project %s: disk project id %d is not from 1 to %d", account, d.ProjectID, spec.MaxDerivedProjectID)
			}
			id, from := d.ProjectID, "project_id of the policy"
			if id == 0 || id == spec.DiskProjectID(account) {
				id, from = spec.DiskProjectID(account), "derived from the account"
			}
			fn := "xfs"
			if d.Filesystem == spec.FilesystemLustre {
				fn = "lustre"
			}
			n++
			soft, files := "no soft limit", "no file limit"
			if d.SoftGB > 0 {
				soft = fmt.Sprintf("soft %d GiB", d.SoftGB)
			}
			if d.Inodes > 0 {
				files = fmt.Sprintf("%d files", d.Inodes)
			}
			fmt.Fprintf(&b, "\n# %s: %s %s, %s, hard %d GiB, %s, project id %d (%s)\n",
				account, d.Filesystem, d.Path, soft, d.HardGB, files, id, from)
			fmt.Fprintf(&b, "%s %s %d %s %d %d %d || failed=\"$failed %s\"\n",
				fn, account, id, d.Path, d.SoftGB, d.HardGB, d.Inodes, account)
		}
	}
	if n == 0 {
		b.WriteString("\n# No project has a disk: block.\n")
	}
	fmt.Fprintf(&b, `
# The quotas recorded by an earlier run that this policy no longer has lose
# their limits; a project that failed above keeps its record, to be tried
# again. Then the record is rewritten (--apply only).
keep=
cleared=0
if [ -f "$state" ]; then
	while read -r fs id mnt acct; do
		case $fs in '' | '#'*) continue ;; esac
		line="$fs $id $mnt $acct"
		case "$set_now" in *"
$fs $id $mnt "*) continue ;; esac
		case "$failed " in
		*" $acct "*)
			keep="$keep$line
"
			continue
			;;
		esac
		echo "disk-quota.sh: $acct: project $id on $mnt is no longer in the policy: its limits are removed, its files kept" >&2
		if unlimit "$fs" "$id" "$mnt"; then
			cleared=$((cleared + 1))
		else
			failed="$failed $acct"
			keep="$keep$line
"
		fi
	done <"$state"
fi
if [ "$mode" = apply ]; then
	if ! { mkdir -p "${state%%/*}" &&
		{ echo "# disk-quota.sh: the project quotas it set (file system, id, mount point, account); do not edit"
			printf '%%s%%s' "$set_now" "$keep" | sed '/^$/d'; } >"$state.tmp" &&
		mv "$state.tmp" "$state"; }; then
		echo "disk-quota.sh: cannot write $state" >&2
		failed="$failed $state"
	fi
fi

if [ -n "$failed" ]; then
	echo "disk-quota.sh: failed:$failed" >&2
	exit 1
fi
echo "disk-quota.sh: %d project quotas, $cleared removed ($mode)" >&2
`, n)
	return b.Bytes(), nil
}
