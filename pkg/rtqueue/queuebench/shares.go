package queuebench

// Share splits one metric's gap between client-go's workqueue and the
// whole Gantry engine, at one scenario, worker count and GOMAXPROCS, into
// the steps that switch one mechanism on at a time:
//
//	ordering  = clientgo       - gantry-order    (priority order)
//	reserve   = gantry-order   - gantry-reserve  (a worker kept free)
//	real time = gantry-reserve - gantry          (SCHED_FIFO threads)
//
// The three steps add up to the gap exactly. The shares are each step over
// the gap; a negative step is a mechanism that cost more than it won in
// this run (or noise).
type Share struct {
	Scenario   string `json:"scenario"`
	Workers    int    `json:"workers"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// Metric is the Result field split: p50_us, p99_us or done_p99_us.
	Metric     string  `json:"metric"`
	ClientGoUs float64 `json:"clientgo_us"`
	GantryUs   float64 `json:"gantry_us"`
	GapUs      float64 `json:"gap_us"`
	OrderingUs float64 `json:"ordering_us"`
	ReserveUs  float64 `json:"reserve_us"`
	RealTimeUs float64 `json:"real_time_us"`
	// The steps over the gap; 0 when the gap is 0.
	Ordering float64 `json:"ordering_share"`
	Reserve  float64 `json:"reserve_share"`
	RealTime float64 `json:"real_time_share"`
}

// shareMetrics are the figures split, in output order.
var shareMetrics = []struct {
	name string
	get  func(Result) float64
}{
	{"p50_us", func(r Result) float64 { return r.P50us }},
	{"p99_us", func(r Result) float64 { return r.P99us }},
	{"done_p99_us", func(r Result) float64 { return r.DoneP99us }},
}

// Shares computes the split for every scenario, worker count and
// GOMAXPROCS whose results include clientgo, gantry-order, gantry-reserve
// and gantry.
func Shares(results []Result) []Share {
	type group struct {
		scenario      string
		workers, proc int
	}
	byGroup := map[group]map[string]Result{}
	var order []group
	for _, r := range results {
		g := group{r.Scenario, r.Workers, r.GOMAXPROCS}
		if byGroup[g] == nil {
			byGroup[g] = map[string]Result{}
			order = append(order, g)
		}
		byGroup[g][r.Queue] = r
	}
	out := []Share{}
	for _, g := range order {
		m := byGroup[g]
		cg, ok1 := m[QueueClientGo]
		ord, ok2 := m[QueueGantryOrder]
		res, ok3 := m[QueueGantryReserve]
		rt, ok4 := m[QueueGantry]
		if !ok1 || !ok2 || !ok3 || !ok4 {
			continue
		}
		for _, metric := range shareMetrics {
			s := Share{Scenario: g.scenario, Workers: g.workers, GOMAXPROCS: g.proc, Metric: metric.name,
				ClientGoUs: metric.get(cg), GantryUs: metric.get(rt)}
			s.GapUs = s.ClientGoUs - s.GantryUs
			s.OrderingUs = s.ClientGoUs - metric.get(ord)
			s.ReserveUs = metric.get(ord) - metric.get(res)
			s.RealTimeUs = metric.get(res) - s.GantryUs
			if s.GapUs != 0 {
				s.Ordering, s.Reserve, s.RealTime = s.OrderingUs/s.GapUs, s.ReserveUs/s.GapUs, s.RealTimeUs/s.GapUs
			}
			out = append(out, s)
		}
	}
	return out
}
