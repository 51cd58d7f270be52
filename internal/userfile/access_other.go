//go:build unix && !linux

package userfile

// readACL: POSIX ACLs are read on Linux only; elsewhere the mode bits
// alone decide.
func readACL(int) ([]aclEntry, error) { return nil, nil }
