package sim

// Energy model constants, per node and per core of a dual-socket 48-core
// server like the paper's Cascade Lake nodes (2 x 205 W TDP). A node that
// hosts no container is powered down and draws nothing; see
// docs/simulator.md for the reasoning.
const (
	NodeIdleWatts      = 120.0 // a powered node with every core idle
	CoreBusyWatts      = 7.0   // extra draw of a core running a request
	ContainerIdleWatts = 0.5   // extra draw of a warm or starting container (memory, runtime)
)

type containerState uint8

const (
	csFree     containerState = iota // slot unused
	csStarting                       // in its cold start
	csIdle                           // warm, in its function's idle pool
	csBusy                           // running request req
)

type container struct {
	fn    int32
	node  int32
	req   int32
	state containerState
	fresh bool // has not served a request since its cold start
	// seq is the container's creation order; idleGen counts its idle
	// periods, so a stale entry of the newest-first pool can be told.
	seq     uint64
	idleGen uint32
	// freed orders containers by when they last became idle (the
	// contract's policy.Idle.FreedSeq), for the choice of a victim.
	freed uint64
	// draining containers gave their room up to a more critical
	// function: they stop when their request finishes.
	draining bool
	spawnAt  int64
	readyAt  int64
	// idleAt is when it became idle; startAt when its request started.
	idleAt, startAt int64
	// plan is 1 + its planned container under a followed plan (0: none);
	// planNext counts the planned jobs it has started.
	plan, planNext int32
}

type node struct {
	freeCores, freeMemMB, containers int
}

// cluster places containers on nodes first-fit (lowest node index first),
// which packs load onto few powered nodes, and integrates energy.
type cluster struct {
	nodes      []node
	memPerCtr  int
	firstSpace int // no node below this index has room

	powered, busy, live int
	peakLive            int
	energyJ             float64
	nodeEnergyJ         float64 // the powered-node part of energyJ
	lastT               int64
}

func newCluster(cfg *Config) *cluster {
	c := &cluster{nodes: make([]node, cfg.Nodes), memPerCtr: cfg.ContainerMemoryMB}
	for i := range c.nodes {
		c.nodes[i] = node{freeCores: cfg.CoresPerNode, freeMemMB: cfg.MemoryPerNodeMB}
	}
	return c
}

func (c *cluster) watts() float64 {
	return float64(c.powered)*NodeIdleWatts + float64(c.busy)*CoreBusyWatts +
		float64(c.live)*ContainerIdleWatts
}

// advance integrates power up to t; call it before any state change.
func (c *cluster) advance(t int64) {
	if t > c.lastT {
		dt := float64(t-c.lastT) / 1e9
		c.energyJ += c.watts() * dt
		c.nodeEnergyJ += float64(c.powered) * NodeIdleWatts * dt
		c.lastT = t
	}
}

// place reserves a core for a new container and returns its node, or -1
// when the cluster is full.
func (c *cluster) place(t int64) int32 {
	for i := c.firstSpace; i < len(c.nodes); i++ {
		n := &c.nodes[i]
		if n.freeCores > 0 && n.freeMemMB >= c.memPerCtr {
			c.advance(t)
			n.freeCores--
			n.freeMemMB -= c.memPerCtr
			if n.containers == 0 {
				c.powered++
			}
			n.containers++
			c.live++
			c.peakLive = max(c.peakLive, c.live)
			c.firstSpace = i
			return int32(i)
		}
	}
	c.firstSpace = len(c.nodes)
	return -1
}

func (c *cluster) release(t int64, i int32) {
	c.advance(t)
	n := &c.nodes[i]
	n.freeCores++
	n.freeMemMB += c.memPerCtr
	n.containers--
	if n.containers == 0 {
		c.powered--
	}
	c.live--
	c.firstSpace = min(c.firstSpace, int(i))
}

func (c *cluster) setBusy(t int64, delta int) {
	c.advance(t)
	c.busy += delta
}
