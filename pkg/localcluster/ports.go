package localcluster

import (
	"fmt"
	"net"
)

// ports are the loopback ports the components listen on.
type ports struct {
	etcdClient, etcdPeer, apiserver, controllerManager, scheduler, kwok int
}

// pickPorts chooses free loopback ports, and checks a port the caller chose
// (apiserver, 0 for any) is free. All listeners stay open until every port is
// chosen, so no two components get the same one.
func pickPorts(apiserver int) (ports, error) {
	var p ports
	if apiserver != 0 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", apiserver))
		if err != nil {
			return p, fmt.Errorf("localcluster: kube-apiserver port %d on 127.0.0.1: %w (%v); choose another Options.Port, or 0 for a free one", apiserver, ErrPortInUse, err)
		}
		l.Close()
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, dst := range []*int{&p.etcdClient, &p.etcdPeer, &p.apiserver, &p.controllerManager, &p.scheduler, &p.kwok} {
		if dst == &p.apiserver && apiserver != 0 {
			p.apiserver = apiserver
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return p, fmt.Errorf("localcluster: no free loopback port: %w", err)
		}
		held = append(held, l)
		*dst = l.Addr().(*net.TCPAddr).Port
	}
	return p, nil
}
