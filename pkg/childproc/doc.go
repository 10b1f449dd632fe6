// Package childproc starts child processes that die with this process: each
// child leads a process group of its own, so one signal reaches everything
// it started, and on Linux the kernel kills it when this process dies, even
// by SIGKILL, so a crashed test or node leaves nothing running.
package childproc
