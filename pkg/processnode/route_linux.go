package processnode

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"syscall"
	"time"
)

// addLocalRoute makes every address of prefix local, as 127.0.0.0/8 is:
// "ip route replace local PREFIX dev lo". Replace, so a route a crashed
// node left behind is taken over rather than an error.
func addLocalRoute(prefix netip.Prefix) error {
	return ipRoute("replace", prefix)
}

// delLocalRoute removes the route addLocalRoute added.
func delLocalRoute(prefix netip.Prefix) error {
	return ipRoute("del", prefix)
}

func ipRoute(verb string, prefix netip.Prefix) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "route", verb, "local", prefix.String(), "dev", "lo")
	// Its own process group: a terminal's Ctrl-C, which stops the node,
	// must not also kill the command that removes the route.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip route %s local %s dev lo: %w: %s", verb, prefix, err, out)
	}
	return nil
}
