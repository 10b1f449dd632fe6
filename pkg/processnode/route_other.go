//go:build !linux

package processnode

import (
	"errors"
	"net/netip"
)

func addLocalRoute(netip.Prefix) error { return errors.New("local routes need Linux") }

func delLocalRoute(netip.Prefix) error { return nil }
