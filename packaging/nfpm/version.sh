#!/bin/sh
# Prints the package version of the checkout, from git describe, in a form
# that dpkg and rpm both order correctly (the release, "-1", is separate):
#
#   tag v1.2.0, on it              1.2.0
#   tag v1.2.0-rc1, on it          1.2.0~rc1       (~ sorts before 1.2.0)
#   5 commits after tag v1.2.0     1.2.0+git5.1a2b3c4d
#   no tag yet, 37 commits         0.0.0~git37.1a2b3c4d
#   any of these, files changed    ... with .dirty at the end
#
# Only tags of the form v<digits>... count; the first - of a tag becomes ~.
# STRATA_VERSION_CLEAN=1 leaves .dirty out (make dist packs HEAD, not the
# changed files).
#
# Outside a git checkout (a tarball of make dist), the "package:" line of
# the VERSION file make dist wrote; with neither, it fails saying so.
set -eu
cd "${1:-.}"
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" != "$(pwd -P)" ]; then
  if [ -f VERSION ] && v=$(sed -n 's/^package: //p' VERSION) && [ -n "$v" ]; then
    printf '%s\n' "$v"
    exit 0
  fi
  echo "version.sh: $(pwd -P) is neither a git checkout nor a tarball of make dist (no VERSION file with a package: line): cannot tell the version" >&2
  exit 1
fi
hash=$(git rev-parse --short=8 HEAD)
dirty=
if [ "${STRATA_VERSION_CLEAN:-}" != 1 ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then dirty=.dirty; fi
if desc=$(git describe --tags --long --match 'v[0-9]*' 2>/dev/null); then
  # v1.2.0-rc1-5-g1a2b3c4: the tag, the commits since, the hash
  n=${desc%-g*}; n=${n##*-}
  tag=${desc%-*-g*}; tag=${tag#v}
  case $tag in *-*) tag=$(printf '%s' "$tag" | sed 's/-/~/') ;; esac
  if [ "$n" = 0 ]; then
    printf '%s%s\n' "$tag" "$dirty"
  else
    printf '%s+git%s.%s%s\n' "$tag" "$n" "$hash" "$dirty"
  fi
else
  printf '0.0.0~git%s.%s%s\n' "$(git rev-list --count HEAD)" "$hash" "$dirty"
fi
