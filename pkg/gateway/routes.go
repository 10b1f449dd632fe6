package gateway

import (
	"fmt"
	"net/http"
	"strings"
)

// noRoute answers a request no route serves, a known path asked with
// another method included, with the reason and the routes there are.
func (g *Gateway) noRoute(w http.ResponseWriter, r *http.Request) {
	if allow := g.allowed(r); len(allow) > 0 {
		// The path is served, with other methods: 405 and Allow, as
		// HTTP has it, so a client sees its method is the mistake.
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf(
			"%s is not allowed on %s; it takes %s", r.Method, r.URL.Path, strings.Join(allow, ", "))})
		return
	}
	msg := fmt.Sprintf("no route %s %s on this gateway", r.Method, r.URL.Path)
	switch {
	case strings.HasPrefix(r.URL.Path, "/system/"):
		msg += "; its system routes are /system/functions, /system/function/NAME, /system/scale-function/NAME, " +
			"/system/namespaces, /system/namespace/NAME, /system/apps, /system/info, /system/logs, /system/secrets"
	default:
		msg += "; functions are invoked at /function/NAME or /function/NAME.NAMESPACE"
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"error": msg})
}

// allowed lists the methods another route serves r's path with.
func (g *Gateway) allowed(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := g.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}
