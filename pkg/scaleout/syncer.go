package scaleout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// The leader's side of the syncs: every Interval, a grant out to every
// other replica and its report back, one at a time per replica.

// syncer runs the leader's rounds. One replica's syncs never overlap, as
// Replica.Fold requires: a replica still busy from the last round is
// skipped this one.
type syncer struct {
	cfg    Config
	client *http.Client
	wg     sync.WaitGroup
	mu     sync.Mutex
	busy   map[string]bool
	m      *metrics
}

func (s *syncer) round(ctx context.Context, peers map[string]string) {
	if err := s.cfg.Replica.SetPeers(slices.Sorted(maps.Keys(peers))); err != nil {
		s.cfg.Logger.Error("too many gateway replicas", "err", err)
		return
	}
	s.m.peers.Set(float64(len(peers)))
	for id, addr := range peers {
		s.mu.Lock()
		if s.busy[id] {
			s.mu.Unlock()
			continue
		}
		s.busy[id] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { s.mu.Lock(); delete(s.busy, id); s.mu.Unlock() }()
			start := time.Now()
			err := s.sync(ctx, id, addr)
			s.m.syncTime.Observe(time.Since(start).Seconds())
			switch {
			case err == nil:
				s.m.syncs.WithLabelValues("ok").Inc()
			case ctx.Err() == nil:
				s.m.syncs.WithLabelValues("error").Inc()
				s.cfg.Logger.Warn("sync with a gateway replica failed", "replica", id, "addr", addr, "err", err)
			}
		}()
	}
}

// sync sends one replica its grant and folds in its report.
func (s *syncer) sync(ctx context.Context, id, addr string) error {
	g, ok := s.cfg.Replica.GrantFor(id)
	if !ok {
		return nil // no longer a replica, or no longer leading
	}
	body, err := json.Marshal(g)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+PeerSyncPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	s.cfg.Sign(req)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	var rep Report
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxReport)).Decode(&rep); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return s.cfg.Replica.Fold(id, rep)
}
