package sacctmgr

import (
	"os/exec"
	"runtime"
	"syscall"
)

// tie makes cmd die with strata-policy: the kernel sends it SIGKILL when
// the thread that started it ends (PR_SET_PDEATHSIG). The caller holds
// that thread (runtime.LockOSThread) from before Start until Wait returns,
// so the thread ends only when the process does, a kill -9 included, and a
// sacctmgr whose apply died never commits a load or writes on its own.
func tie(cmd *exec.Cmd) (release func()) {
	runtime.LockOSThread()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return runtime.UnlockOSThread
}
