//go:build unix && !linux

package mcp

import "syscall"

// sysProcAttr puts the child in its own process group (no parent-death
// signal outside Linux: a child of a killed chatd sees its stdin close).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
