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
	default:
		msg += "; functions are invoked at /function/NAME or /function/NAME.NAMESPACE"
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"error": msg})
}
