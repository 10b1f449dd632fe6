package scaleout

import "time"

// What travels between replicas at a sync: the leader's Grant out, the
// follower's Report back, as JSON over the follower's PeerSyncPath.

// Bounds on what one sync carries, checked before anything is kept.
const (
	// maxPeerSamples bounds the arrivals, and separately the executions, a
	// follower keeps per function for the leader. Arrivals past it are
	// counted in Lost; executions past it are not kept (the profiler has
	// plenty).
	maxPeerSamples = 20000
	// maxUnacked bounds the batches a follower keeps for a leader that has
	// not acknowledged them; the oldest goes first, its arrivals counted.
	maxUnacked = 16
	// maxGrantInstances bounds the instances one Grant names.
	maxGrantInstances = 100000
	// maxPeers bounds the replicas a leader syncs with.
	maxPeers = 256
	// maxGrant bounds a sync's body: a grant names instances and slot
	// counts.
	maxGrant = 16 << 20
)

// MaxReport bounds a follower's answer: a full queue of the largest
// bound with its samples fits many times over.
const MaxReport = 64 << 20

// Grant is what the leader sends a follower at a sync.
type Grant struct {
	// Ack is the Seq of the newest Report the leader has folded in; the
	// follower forgets the samples up to it and sends the rest again.
	Ack uint64 `json:"ack"`
	// Slots maps an instance (its ID) to the slots the follower may use
	// on it. An instance not named has none.
	Slots map[string]int `json:"slots"`
}

// Report is what a follower answers a Grant with.
type Report struct {
	// Seq numbers the newest samples in the report.
	Seq       uint64                     `json:"seq"`
	Functions map[string]*FunctionReport `json:"functions"`
	// Granted echoes the grant the follower applies now, instances it has
	// not seen yet included: it may use those slots as soon as it does.
	Granted map[string]int `json:"granted,omitempty"`
}

// FunctionReport is one function at one follower.
type FunctionReport struct {
	// Arrivals are the input sizes of the requests accepted since the
	// samples the leader acknowledged; Lost counts those whose size was
	// not kept (past maxPeerSamples).
	Arrivals []float64 `json:"arrivals,omitempty"`
	Lost     int       `json:"lost,omitempty"`
	// Executions are the executions finished since then.
	Executions []Execution `json:"executions,omitempty"`
	// Queue and Running are the function's requests right now.
	Queue   []PeerItem `json:"queue,omitempty"`
	Running []PeerItem `json:"running,omitempty"`
	// Held maps each instance to the slots the follower holds on it: the
	// most of its grant and what it runs there.
	Held map[string]int `json:"held,omitempty"`
}

// Execution is one profiler sample; it converts to and from
// dispatch.Sample, which has the same fields.
type Execution struct {
	Size   float64       `json:"size"`
	Exec   time.Duration `json:"exec"`
	Output float64       `json:"output"`
}

// PeerItem is one request at a follower; it converts to and from
// dispatch.Item, which has the same fields.
type PeerItem struct {
	Size float64 `json:"size"`
	// Age is the time queued, or running.
	Age      time.Duration `json:"age"`
	Instance string        `json:"instance,omitempty"`
}
