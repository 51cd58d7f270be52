//go:build unix && !linux

package userfile

// resolveBeneath walks: openat2 is Linux's.
func resolveBeneath(rootfd int, name string, flags int) (int, error) {
	return walk(rootfd, name, flags)
}
