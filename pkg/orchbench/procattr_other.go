//go:build !linux

package orchbench

import "syscall"

func childProcAttr() *syscall.SysProcAttr { return nil }
