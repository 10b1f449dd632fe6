//go:build !linux

package rtcontroller

// goSibling runs f on a goroutine: scheduling policies are Linux's.
func goSibling(f func()) { go f() }
