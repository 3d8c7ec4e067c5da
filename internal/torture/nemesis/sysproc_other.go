//go:build !linux

package nemesis

import "syscall"

// childAttr has no parent-death signal outside Linux: a started cluster
// process outlives a harness that dies without stopping it.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
