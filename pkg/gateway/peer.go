package gateway

import "net/http"

// Sign adds these credentials to a request to another replica's
// management routes (the scale-out layer's syncs, mounted through
// Config.Routes); a nil Auth adds none.
func (a *Auth) Sign(r *http.Request) {
	switch {
	case a == nil:
	case a.token != "":
		r.Header.Set("Authorization", "Bearer "+a.token)
	case a.user != "":
		r.SetBasicAuth(a.user, a.password)
	}
}
