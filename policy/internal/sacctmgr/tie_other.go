//go:build !linux

package sacctmgr

import "os/exec"

// tie does nothing where there is no parent-death signal: a sacctmgr
// outlives a strata-policy killed with SIGKILL there (SIGTERM and SIGINT
// still end it, through the context).
func tie(*exec.Cmd) (release func()) { return func() {} }
