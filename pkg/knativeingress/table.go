package knativeingress

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Bounds on what one Ingress may ask for, checked before anything is
// built from it.
const (
	maxRules    = 1000
	maxHosts    = 1000
	maxPaths    = 1000
	maxSplits   = 100
	maxHeaders  = 100
	maxValueLen = 4096
)

// route is one compiled path of a rule, what a request that matches it
// gets: headers set, one split chosen by weight.
type route struct {
	ingress string // namespace/name, for errors and logs
	hash    string // the Ingress version's hash (Hash)
	prefix  string
	match   []header // exact matches, all must hold
	set     []header // the path's appendHeaders
	rewrite string   // rewriteHost
	splits  []split
	// redirect: the external plain-HTTP listener answers 301 to https
	// (httpOption Redirected, on an ExternalIP rule).
	redirect bool
}

// split is a backend with the upper bound of its share in [0, 100).
type split struct {
	backend Backend
	upTo    int
	set     []header
}

type header struct{ name, value string }

// table is a routing table: what the listeners route by, swapped whole.
type table struct {
	external hostRoutes
	local    hostRoutes
	// certs are the HTTPS listener's certificates by host (SNI server
	// name, lower case); the first Ingress to claim a host wins.
	certs map[string]*tls.Certificate
}

// hostRoutes are routes by host, then the rules without hosts, which
// route every host.
type hostRoutes struct {
	byHost map[string][]*route
	any    []*route
}

func newTable() *table {
	return &table{external: hostRoutes{byHost: map[string][]*route{}}, local: hostRoutes{byHost: map[string][]*route{}},
		certs: map[string]*tls.Certificate{}}
}

// add compiles ing into t, its certificates from certs (nil: there is no
// HTTPS listener, and an Ingress asking for TLS or a redirect to it is
// refused). On error t is unchanged: an Ingress is routed whole or not
// at all.
func (t *table) add(ing *Ingress, clusterDomain string, certs certSource) error {
	hash, err := Hash(ing)
	if err != nil {
		return err
	}
	redirect, err := checkSpec(&ing.Spec, certs != nil)
	if err != nil {
		return err
	}
	type entry struct {
		local bool
		hosts []string
		r     []*route
	}
	var entries []entry
	var extHosts []string // the ExternalIP rules' hosts, which TLS serves
	anyHost := false      // an ExternalIP rule without hosts
	key := ing.Namespace + "/" + ing.Name
	for i, rule := range ing.Spec.Rules {
		local, err := visibility(rule.Visibility)
		if err != nil {
			return fmt.Errorf("rules[%d]: %w", i, err)
		}
		hosts, err := ruleHosts(rule.Hosts, local, clusterDomain)
		if err != nil {
			return fmt.Errorf("rules[%d]: %w", i, err)
		}
		if rule.HTTP == nil || len(rule.HTTP.Paths) == 0 {
			return fmt.Errorf("rules[%d]: no http paths", i)
		}
		var rs []*route
		for j := range rule.HTTP.Paths {
			r, err := compilePath(&rule.HTTP.Paths[j])
			if err != nil {
				return fmt.Errorf("rules[%d].http.paths[%d]: %w", i, j, err)
			}
			r.ingress, r.hash, r.redirect = key, hash, redirect && !local
			rs = append(rs, r)
		}
		entries = append(entries, entry{local: local, hosts: hosts, r: rs})
		if !local {
			extHosts = append(extHosts, hosts...)
			anyHost = anyHost || len(hosts) == 0
		}
	}
	slices.Sort(extHosts)
	tlsCerts, err := compileTLS(ing, slices.Compact(extHosts), anyHost, certs)
	if err != nil {
		return err
	}
	for h, c := range tlsCerts {
		if _, ok := t.certs[h]; !ok {
			t.certs[h] = c
		}
	}
	for _, e := range entries {
		// The cluster-local listener serves every rule, the external one
		// only ExternalIP rules.
		t.local.add(e.hosts, e.r)
		if !e.local {
			t.external.add(e.hosts, e.r)
		}
	}
	return nil
}

func (h *hostRoutes) add(hosts []string, rs []*route) {
	if len(hosts) == 0 {
		h.any = append(h.any, rs...)
		return
	}
	for _, host := range hosts {
		h.byHost[host] = append(h.byHost[host], rs...)
	}
}

// checkSpec checks the spec's shape and says whether its ExternalIP rules
// redirect plain HTTP to HTTPS (httpOption Redirected; "" and Enabled
// serve plain HTTP), which needs an HTTPS listener.
func checkSpec(s *Spec, https bool) (redirect bool, err error) {
	switch {
	case len(s.Rules) == 0:
		return false, errors.New("spec.rules: none")
	case len(s.Rules) > maxRules:
		return false, fmt.Errorf("spec.rules: %d, at most %d", len(s.Rules), maxRules)
	}
	switch s.HTTPOption {
	case "", HTTPOptionEnabled:
		return false, nil
	case HTTPOptionRedirected:
		if !https {
			return false, errors.New("spec.httpOption Redirected: this ingress has no HTTPS listener to redirect to (gantry serve --knative-ingress-https-addr)")
		}
		return true, nil
	}
	return false, fmt.Errorf("spec.httpOption %q: want %s or %s", s.HTTPOption, HTTPOptionEnabled, HTTPOptionRedirected)
}

func visibility(v string) (local bool, err error) {
	switch v {
	case "", ExternalIP:
		return false, nil
	case ClusterLocal:
		return true, nil
	}
	return false, fmt.Errorf("visibility %q: want %s or %s", v, ExternalIP, ClusterLocal)
}

// ruleHosts are the hosts a rule serves, lower case. A cluster-local host
// name.ns.svc.<domain> is also served by its short forms name.ns.svc and
// name.ns, as in-cluster clients may use them (Knative's ExpandedHosts).
func ruleHosts(hosts []string, local bool, clusterDomain string) ([]string, error) {
	if len(hosts) > maxHosts {
		return nil, fmt.Errorf("hosts: %d, at most %d", len(hosts), maxHosts)
	}
	var out []string
	for _, h := range hosts {
		h = strings.ToLower(h)
		if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 {
			return nil, fmt.Errorf("host %q: %s", h, strings.Join(errs, "; "))
		}
		out = append(out, h)
		if !local {
			continue
		}
		for _, suffix := range []string{"." + clusterDomain, ".svc." + clusterDomain} {
			if short, ok := strings.CutSuffix(h, suffix); ok && topLevelOK(short) {
				out = append(out, short)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// topLevelOK says whether a short host's last label could be a top-level
// domain (not all digits), as Knative's isValidTopLevelDomain does.
func topLevelOK(host string) bool {
	tld := host[strings.LastIndexByte(host, '.')+1:]
	return tld != "" && strings.ContainsFunc(tld, func(c rune) bool { return c == '-' || c > '9' })
}

func compilePath(p *Path) (*route, error) {
	r := &route{prefix: p.Path, rewrite: strings.ToLower(p.RewriteHost)}
	if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
		return nil, fmt.Errorf("path %q: must begin with /", p.Path)
	}
	if r.rewrite != "" {
		if errs := validation.IsDNS1123Subdomain(r.rewrite); len(errs) > 0 {
			return nil, fmt.Errorf("rewriteHost %q: %s", r.rewrite, strings.Join(errs, "; "))
		}
	}
	var err error
	if r.match, err = headers("headers", matchValues(p.Headers)); err != nil {
		return nil, err
	}
	if r.set, err = headers("appendHeaders", p.AppendHeaders); err != nil {
		return nil, err
	}
	r.splits, err = compileSplits(p.Splits)
	return r, err
}

func matchValues(m map[string]HeaderMatch) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.Exact
	}
	return out
}

// headers checks and sorts a header map, in canonical names.
func headers(field string, m map[string]string) ([]header, error) {
	if len(m) > maxHeaders {
		return nil, fmt.Errorf("%s: %d, at most %d", field, len(m), maxHeaders)
	}
	var out []header
	for k, v := range m {
		if errs := validation.IsHTTPHeaderName(k); len(errs) > 0 {
			return nil, fmt.Errorf("%s: %q: %s", field, k, strings.Join(errs, "; "))
		}
		if len(v) > maxValueLen || strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("%s: %s: value longer than %d bytes or with a line break", field, k, maxValueLen)
		}
		out = append(out, header{http.CanonicalHeaderKey(k), v})
	}
	slices.SortFunc(out, func(a, b header) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// compileSplits checks the splits' shares (one split alone takes 100; else
// they add up to 100, as Knative's validation requires) and backends.
func compileSplits(ss []Split) ([]split, error) {
	switch {
	case len(ss) == 0:
		return nil, errors.New("splits: none")
	case len(ss) > maxSplits:
		return nil, fmt.Errorf("splits: %d, at most %d", len(ss), maxSplits)
	}
	out := make([]split, 0, len(ss))
	total := 0
	for i, s := range ss {
		pct := s.Percent
		if len(ss) == 1 && pct == 0 {
			pct = 100
		}
		if pct < 0 || pct > 100 {
			return nil, fmt.Errorf("splits[%d].percent %d: want 0 to 100", i, pct)
		}
		if err := checkBackend(s.Backend); err != nil {
			return nil, fmt.Errorf("splits[%d]: %w", i, err)
		}
		set, err := headers(fmt.Sprintf("splits[%d].appendHeaders", i), s.AppendHeaders)
		if err != nil {
			return nil, err
		}
		total += pct
		out = append(out, split{backend: s.Backend, upTo: total, set: set})
	}
	if total != 100 {
		return nil, fmt.Errorf("splits: percents add up to %d, want 100", total)
	}
	return out, nil
}

func checkBackend(b Backend) error {
	if errs := validation.IsDNS1123Label(b.ServiceNamespace); len(errs) > 0 {
		return fmt.Errorf("serviceNamespace %q: %s", b.ServiceNamespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1035Label(b.ServiceName); len(errs) > 0 {
		return fmt.Errorf("serviceName %q: %s", b.ServiceName, strings.Join(errs, "; "))
	}
	p := b.ServicePort
	if p.StrVal == "" && (p.IntVal < 1 || p.IntVal > 65535) {
		return fmt.Errorf("servicePort %s: want a port number or name", p.String())
	}
	return nil
}

// match is the first route for host (lower case, no port) whose prefix
// and headers r matches, then the first of the rules without hosts; nil
// when none does.
func (h *hostRoutes) match(host string, r *http.Request) *route {
	for _, list := range [][]*route{h.byHost[host], h.any} {
		for _, rt := range list {
			if rt.matches(r) {
				return rt
			}
		}
	}
	return nil
}

func (rt *route) matches(r *http.Request) bool {
	if !strings.HasPrefix(r.URL.Path, rt.prefix) {
		return false
	}
	for _, m := range rt.match {
		if r.Header.Get(m.name) != m.value {
			return false
		}
	}
	return true
}

// pick chooses a split by weight.
func (rt *route) pick() *split {
	n := rand.IntN(100)
	for i := range rt.splits {
		if n < rt.splits[i].upTo {
			return &rt.splits[i]
		}
	}
	return &rt.splits[len(rt.splits)-1]
}
