package nemesis

import "syscall"

// childAttr makes the kernel kill a started cluster process when the
// harness dies (Linux's parent-death signal), so no node outlives a run.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
