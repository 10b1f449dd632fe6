package scaleout

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"gantry.dev/gantry/pkg/stack"
)

// PeerSyncPath is the route a follower replica answers the leader's syncs
// on.
const PeerSyncPath = "/system/peer/sync"

// Routes are the management routes a replica serves the leader on, for
// the gateway to mount behind its credentials (gateway.Config.Routes).
func (r *Replica) Routes() map[string]http.Handler {
	return map[string]http.Handler{"POST " + PeerSyncPath: http.HandlerFunc(r.serveSync)}
}

// serveSync is a follower's side of the leader's sync: the grant in, the
// report out.
func (r *Replica) serveSync(w http.ResponseWriter, req *http.Request) {
	var g Grant
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxGrant)).Decode(&g); err != nil {
		http.Error(w, fmt.Sprintf("%v: grant: %v", stack.ErrInvalid, err), http.StatusBadRequest)
		return
	}
	rep, err := r.Sync(g)
	if err != nil {
		http.Error(w, err.Error(), syncStatus(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(rep)
}

// syncStatus is the HTTP status of a sync the follower refuses.
func syncStatus(err error) int {
	switch {
	case errors.Is(err, stack.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotFollower):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}
