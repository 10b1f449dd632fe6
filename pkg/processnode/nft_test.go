package processnode

import (
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// counters is a netfilter table of the test's own: each named rule counts
// the packets that match it, so a test can check where packets went. It
// talks to the kernel over netlink: no nft binary is needed.
type counters struct {
	conn  *nftables.Conn
	table *nftables.Table
	rules map[string]*nftables.Chain // a rule's name -> its chain
}

// match is a condition of a counting rule.
type match []expr.Any

// newCounters makes the table in the network namespace whose file is
// nsPath ("" for the host's), and removes it when the test ends.
func newCounters(t *testing.T, nsPath string) *counters {
	t.Helper()
	var opts []nftables.ConnOption
	if nsPath != "" {
		f, err := os.Open(nsPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		opts = append(opts, nftables.WithNetNSFd(int(f.Fd())))
	}
	conn, err := nftables.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := &counters{conn: conn, rules: map[string]*nftables.Chain{},
		table: conn.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: fmt.Sprintf("gantry_test_%d", os.Getpid())})}
	t.Cleanup(func() {
		conn.DelTable(c.table)
		if err := conn.Flush(); err != nil {
			t.Errorf("removing the test's netfilter table: %v", err)
		}
	})
	return c
}

// add adds a chain on hook holding one rule named name: all of ms, then a
// counter.
func (c *counters) add(name string, hook *nftables.ChainHook, ms ...match) {
	ch := c.conn.AddChain(&nftables.Chain{Name: name, Table: c.table, Type: nftables.ChainTypeFilter,
		Hooknum: hook, Priority: nftables.ChainPriorityFilter})
	var exprs []expr.Any
	for _, m := range ms {
		exprs = append(exprs, m...)
	}
	c.conn.AddRule(&nftables.Rule{Table: c.table, Chain: ch, Exprs: append(exprs, &expr.Counter{})})
	c.rules[name] = ch
}

func (c *counters) commit(t *testing.T) {
	t.Helper()
	if err := c.conn.Flush(); err != nil {
		t.Fatalf("netfilter counters: %v (needs CAP_NET_ADMIN)", err)
	}
}

// packets is the count of the rule named name.
func (c *counters) packets(t *testing.T, name string) uint64 {
	t.Helper()
	rules, err := c.conn.GetRules(c.table, c.rules[name])
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, r := range rules {
		for _, e := range r.Exprs {
			if ctr, ok := e.(*expr.Counter); ok {
				n += ctr.Packets
			}
		}
	}
	return n
}

// ifName matches the packet's input (in) or output interface's name.
func ifName(in bool, name string, equal bool) match {
	key := expr.MetaKeyOIFNAME
	if in {
		key = expr.MetaKeyIIFNAME
	}
	b := make([]byte, 16)
	copy(b, name)
	op := expr.CmpOpEq
	if !equal {
		op = expr.CmpOpNeq
	}
	return match{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: b}}
}

// ifPrefix matches a packet whose input (in) or output interface name
// starts with prefix, or does not: nftables compares only the bytes given.
func ifPrefix(in bool, prefix string, equal bool) match {
	key := expr.MetaKeyOIFNAME
	if in {
		key = expr.MetaKeyIIFNAME
	}
	op := expr.CmpOpEq
	if !equal {
		op = expr.CmpOpNeq
	}
	return match{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: []byte(prefix)}}
}

// addrIn matches an IPv4 packet whose source (src) or destination address
// is in p, or not in it.
func addrIn(src bool, p netip.Prefix, in bool) match {
	off := uint32(16)
	if src {
		off = 12
	}
	var m [4]byte
	for i := range p.Bits() {
		m[i/8] |= 0x80 >> (i % 8)
	}
	a := p.Masked().Addr().As4()
	op := expr.CmpOpEq
	if !in {
		op = expr.CmpOpNeq
	}
	return match{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: m[:], Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: a[:]},
	}
}
