package gateway

import (
	"fmt"
	"net/http"
	"strings"
)

// noRoute answers a request no route serves, a known path asked with
// another method included, with the reason and the routes there are.
func (g *Gateway) noRoute(w http.ResponseWriter, r *http.Request) {
	msg := fmt.Sprintf("no route %s %s on this gateway", r.Method, r.URL.Path)
	switch {
	case strings.HasPrefix(r.URL.Path, "/system/"):
		msg += "; its system routes are /system/functions, /system/function/NAME, /system/scale-function/NAME, " +
			"/system/namespaces, /system/namespace/NAME, /system/apps, /system/info"
	case strings.HasPrefix(r.URL.Path, "/async-function/"):
		// The catch-all route wins over the mux's own 405 for this path.
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf(
			"%s %s: asynchronous invocations are POST /async-function/NAME[.NAMESPACE][/PATH]", r.Method, r.URL.Path)})
		return
	default:
		msg += "; functions are invoked at /function/NAME or /function/NAME.NAMESPACE"
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"error": msg})
}
