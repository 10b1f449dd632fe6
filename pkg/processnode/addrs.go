package processnode

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// ErrNoAddress is returned when every pod address of a node is taken.
var ErrNoAddress = errors.New("processnode: no free pod address")

// Where pod addresses come from. The API server refuses loopback addresses
// in EndpointSlices, so pods get addresses of 198.18.0.0/15, the range RFC
// 2544 sets aside for benchmarks, each in a network namespace of its own
// on a bridge of the node's (podNet; it needs CAP_NET_ADMIN). Without the
// privilege, pods share the host's network on addresses of 127.64.0.0/10,
// which are the loopback interface's on Linux with no setup at all, but
// which the EndpointSlice controller cannot publish.
var (
	loopback      = netip.MustParsePrefix("127.0.0.0/8")
	loopbackSpace = netip.MustParsePrefix("127.64.0.0/10")
	routedSpace   = netip.MustParsePrefix("198.18.0.0/15")
)

// addrPool hands out a node's pod addresses. Freed addresses go to the back
// of the line, so the one a pod just gave up is the last to be reused, and
// an endpoint a client still holds is unlikely to reach a new pod.
type addrPool struct {
	mu    sync.Mutex // guards free and inUse
	free  []netip.Addr
	inUse map[netip.Addr]bool
}

// newAddrPool offers at most size host addresses of prefix, an IPv4
// prefix of /8 or longer that is local to this machine. The prefix's first
// and last addresses, 127.0.0.1 and the addresses in reserved are never
// offered.
func newAddrPool(prefix netip.Prefix, size int, reserved ...netip.Addr) (*addrPool, error) {
	prefix = prefix.Masked()
	if !prefix.Addr().Is4() || prefix.Bits() < 8 {
		return nil, fmt.Errorf("processnode: pod addresses %s: want an IPv4 prefix of /8 or longer", prefix)
	}
	if size < 1 {
		return nil, fmt.Errorf("processnode: pod address pool of size %d", size)
	}
	p := &addrPool{inUse: map[netip.Addr]bool{}}
	first := prefix.Addr()
	last := lastAddr(prefix)
	for a := first.Next(); a.IsValid() && a.Less(last) && len(p.free) < size; a = a.Next() {
		if a != netip.MustParseAddr("127.0.0.1") && !slices.Contains(reserved, a) {
			p.free = append(p.free, a)
		}
	}
	if len(p.free) == 0 {
		return nil, fmt.Errorf("processnode: %s holds no host address", prefix)
	}
	return p, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func (p *addrPool) get() (netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 {
		return netip.Addr{}, fmt.Errorf("%w: all %d in use", ErrNoAddress, len(p.inUse))
	}
	a := p.free[0]
	p.free = p.free[1:]
	p.inUse[a] = true
	return a, nil
}

// put returns an address to the pool. Returning one that is not in use is
// an error, so a double free cannot hand one address to two pods.
func (p *addrPool) put(a netip.Addr) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inUse[a] {
		return fmt.Errorf("processnode: address %s returned but not in use", a)
	}
	delete(p.inUse, a)
	p.free = append(p.free, a)
	return nil
}

func (p *addrPool) used() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.inUse)
}

// claimPrefix takes the first /24 of space (routedSpace or loopbackSpace)
// that no other node on this machine holds, by an exclusive lock on a file
// named after it in dir. The lock lives as long as the returned file is
// open (or the process), so nodes in concurrent test binaries never share
// an address, and a crashed node's /24 is free again at once.
func claimPrefix(dir string, space netip.Prefix) (netip.Prefix, *os.File, error) {
	for i := range 1 << (24 - space.Bits()) {
		prefix := prefixAt(space, i)
		f, ok, err := lockPrefix(dir, prefix)
		if err != nil {
			return netip.Prefix{}, nil, err
		}
		if ok {
			return prefix, f, nil
		}
	}
	return netip.Prefix{}, nil, fmt.Errorf("%w: every /24 of %s is claimed by another node", ErrNoAddress, space)
}

// prefixAt is the i-th /24 of space.
func prefixAt(space netip.Prefix, i int) netip.Prefix {
	base := space.Addr().As4()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1] + byte(i>>8), byte(i), 0}), 24)
}

// lockPrefix tries to take prefix's lock file in dir; ok is false when
// another node holds it.
//
// The folder is shared by every user's nodes, as /tmp is: whoever makes it
// leaves it writable by all (sticky), and a lock is taken on a read-only
// descriptor, so a file another user made is locked too. Before, root's
// folder (0755) and files (0644, the umask's) made every other user's
// node fail with "permission denied" on the lock, not with what it lacks.
func lockPrefix(dir string, prefix netip.Prefix) (*os.File, bool, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, false, err
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm() != 0o777 && ownedByMe(fi) {
		_ = os.Chmod(dir, 0o777|os.ModeSticky)
	}
	name := filepath.Join(dir, prefix.Addr().String()+".lock")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDONLY, 0o666)
	if err != nil {
		return nil, false, err
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm() != 0o666 && ownedByMe(fi) {
		_ = f.Chmod(0o666)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false, nil
	}
	return f, true, nil
}

// ownedByMe reports whether this process's user owns fi's file.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// addressLockDir holds the nodes' claims on their /24s.
func addressLockDir() string { return filepath.Join(os.TempDir(), "gantry-processnode-addresses") }
