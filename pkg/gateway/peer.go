package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// PeerSyncPath is the route a follower replica answers the leader's syncs
// on.
const PeerSyncPath = "/system/peer/sync"

// maxGrant bounds a sync's body: a grant names instances and slot counts.
const maxGrant = 16 << 20

// peerSync is a follower replica's side of the leader's sync
// (pkg/scaleout): the grant in, the report out.
func (g *Gateway) peerSync(w http.ResponseWriter, r *http.Request) {
	var gr dispatch.Grant
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxGrant)).Decode(&gr); err != nil {
		writeError(w, fmt.Errorf("%w: grant: %v", stack.ErrInvalid, err))
		return
	}
	rep, err := g.d.Sync(gr)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// Sign adds these credentials to a request to another replica's
// management routes; a nil Auth adds none.
func (a *Auth) Sign(r *http.Request) {
	switch {
	case a == nil:
	case a.token != "":
		r.Header.Set("Authorization", "Bearer "+a.token)
	case a.user != "":
		r.SetBasicAuth(a.user, a.password)
	}
}
