package policy

import (
	"fmt"
	"time"
)

type loadKind uint8

const (
	loadNone   loadKind = iota
	loadEWMA            // Cypress, Kraken
	loadLinReg          // Fifer
	loadOracle          // perfect foresight
)

type sizingKind uint8

const (
	sizeNone   sizingKind = iota // Atoll: no proactive containers
	sizeIS                       // IS batching of a predicted queue
	sizeStatic                   // floor(SLO / mean exec) per container
)

type reactKind uint8

const (
	reactPerRequest reactKind = iota // Atoll: one container per waiting request
	reactOverload                    // Cypress: wait > cold start ⇒ IS-batch the late requests
	reactBottleneck                  // Fifer: max queueing delay > SLO/2
)

// parts is a policy assembled from the mechanisms of the papers. Every named
// policy is one value of it, so the differences between policies are data.
type parts struct {
	order     Order
	load      loadKind
	sizing    sizingKind
	react     reactKind
	lookAhead bool
	// execQuantile > 0 packs on that quantile of the execution time
	// instead of the mean.
	execQuantile float64
	// headroomZ adds z·sqrt(N) to a predicted count of N requests: the
	// count of a Poisson window is itself random.
	headroomZ float64
	// empiricalMix builds the predicted queue from the most recent input
	// sizes instead of class shares and class-average sizes.
	empiricalMix bool
	// stream sizes containers for the predicted requests spread over the
	// coming window at Poisson arrival times, each with its own release
	// and deadline, instead of a standing queue of one SLO's worth.
	stream bool
	// panic scales every function up in proportion when the arrival rate
	// over the last few ticks runs above the rate the window was sized
	// for, instead of waiting for the next window (Knative's panic mode,
	// applied to IS-batched targets).
	panic bool
	// panicZ is the panic rule's threshold in standard deviations of a
	// Poisson count; panicCUSUM adds a CUSUM for smaller lasting rises;
	// panicMinSpan measures the rate over at least the nominal tick;
	// panicHold holds the containers a panic asks for this long.
	panicZ       float64
	panicCUSUM   bool
	panicMinSpan bool
	panicHold    time.Duration
	// keepWindows > 1 makes idling detection keep the largest target of
	// the last keepWindows windows, so a container is retired only once
	// the target has stayed below the live count that long (a keep-alive).
	keepWindows int
	// chainExtra adds this fraction of containers per downstream function
	// (Kraken's weighting of functions many paths pass through).
	chainExtra float64
	// loadQuantileZ > 0 caps the stream's count at the offered load a
	// (predicted rate × mean execution time) plus loadQuantileZ·sqrt(D·a),
	// D the measured dispersion of the window counts (variance over mean,
	// at least 1): a quantile of the busy containers of a Poisson stream
	// (M/G/inf), widened as the load's variance grows. Bursty load keeps
	// the stream's count.
	loadQuantileZ float64
	// steadyRetire makes idling detection, while the load is steady
	// (dispersion below steadyDispersion), retire half the excess over the
	// current target each window instead of a quarter of the excess over
	// the kept target.
	steadyRetire bool
	// truth makes the policy read Spec.Truth instead of learning.
	truth bool
	// noChain sizes every function after the first by static batching on
	// its mean execution time instead of carrying the predicted input
	// sizes down the chain (Cypress figure 2's "No CP").
	noChain bool
	// instances, when set, is SimFaaS's instance model (see Instances).
	instances *Instances
	// sloSizing sizes each function at every window as an M/G/n queue
	// for the SLO target (sizing.go), at the predicted rate plus the warm
	// buffer, instead of packing a predicted stream.
	sloSizing bool
	// ageRetire retires, at every tick, the idle containers above the
	// target that have been idle past the rent-or-buy limit (retire.go),
	// instead of idling detection at window boundaries.
	ageRetire bool
	// arrivalBurst detects bursts on arrival (burst.go) and adds the
	// excess load to the target, instead of the panic rule's tick test
	// and multiplied, held target.
	arrivalBurst bool
	// countRefused counts a request refused at the head's full queue as
	// an arrival (burst.go, Refused): demand the queue turned away is
	// demand all the same, and without it a full queue hides an overload
	// from the rate and the burst detector.
	countRefused bool
	// steadyExcess retires, on steady load, the idle containers above the
	// target once the live count has stayed above it for the rent-or-buy
	// limit, whatever their own idle age (steady.go).
	steadyExcess bool
	// loadTrend adds, on steady load, the trend of the predicted rate
	// (steady_trend.go): an EWMA lags a ramp.
	loadTrend bool
	// steadyMean makes the steadiness test read a slow dispersion that
	// is the plain mean of the windows seen while they are fewer than
	// about 40, not an EWMA started at the first window (steady.go).
	steadyMean bool
	// rateFloor floors the rate prediction's error the sizing averages
	// over at the EWMA's own sampling error (sizing.go, predictionSD).
	rateFloor bool
	// trendOwnGate gates the trend on the dispersion of its own
	// prediction's errors, not the EWMA's (steady_trend.go).
	trendOwnGate bool
	// periodic pre-warms a step that recurs at a period before it comes
	// (periodic.go); it needs arrivalBurst, whose excess it sets.
	periodic bool
	// seasonal predicts, while a period holds, the rate one period ago;
	// seasonalLevel scales it by the level's drift over the period, and
	// seasonalDisp sizes for its own errors (seasonal.go).
	seasonal, seasonalLevel, seasonalDisp bool
	// stepEnd retires the idle containers above the target at once when
	// the seasonal prediction steps down and the next onset is a period
	// away (seasonal.go).
	stepEnd bool
	// noBurstAlarm and noWarmBuffer undo, for the ablations, one half of
	// arrivalBurst each: the on-arrival alarm and its excess, or the warm
	// buffer the sizing adds.
	noBurstAlarm, noWarmBuffer bool
	// startupRoom adds room to the sizing's rate before the load's
	// dispersion is measured (startup_room.go); gantry-startup-room only.
	startupRoom bool
	// dispRecover clips each window's sample of the slow dispersion at a
	// multiple of the estimate (disp_recover.go); gantry-disp-recover only.
	dispRecover bool
	// dispSkipBursts leaves the windows a burst alarm was acted on out of
	// the slow dispersion the sizing's rate error reads (burst.go,
	// sizingDispersionSample); gantry-disp-no-bursts only.
	dispSkipBursts bool
	// unsteadyAlarms, when positive, is the burst detectors' false
	// alarms an hour while the load is not steady (burst.go,
	// falseAlarms); gantry-bursty-alarms only.
	unsteadyAlarms float64
	// jointChain sizes a chain's functions jointly: each gets a fraction
	// of every request's end-to-end slack and ε over the chain's length
	// (chain_sizing.go), instead of its own SLO share and ε.
	jointChain bool
	// shareRound time-shares a small target's rounding between n - 1
	// and n containers within a budget of ε (sizing_share.go).
	shareRound bool
	// missBudget feeds the misses the driver reports back into the
	// sizing's ε (miss_budget.go); gantry-miss-budget only, not kept.
	missBudget bool
	// startupSizing sizes the functions whose requests queue at every
	// tick before the first window closes (startup_sizing.go).
	startupSizing bool
	// fastFall follows a fall of the window counts faster than a rise
	// (rate_fall.go).
	fastFall bool
	// batchOne sizes one container per request predicted to arrive within
	// a function SLO, whatever its input size (the paper's No Batch).
	batchOne bool
}

// CommercialKeepAlive is how long the commercial baseline keeps an idle
// instance after its last request: our choice, shorter than the paper
// matrix's 10-minute runs so that instances do expire within them.
const CommercialKeepAlive = 2 * time.Minute

var catalog = map[string]parts{
	// atoll is the paper's No Batch (Atoll): one container per request in
	// flight, sized for the predicted load (a container for every request
	// predicted within one function SLO), the same for every input-size
	// mix; a request that finds no idle container gets its own.
	"atoll": {order: FIFO, load: loadEWMA, sizing: sizeStatic, react: reactPerRequest, batchOne: true},
	// commercial is a commercial platform as SimFaaS models it: a request
	// runs on the newest idle instance, or on a new instance of its own
	// after a cold start; an instance expires a fixed time after its last
	// request; nothing queues.
	"commercial": {order: FIFO, load: loadNone, sizing: sizeNone, react: reactPerRequest,
		instances: &Instances{NewestFirst: true, KeepAlive: CommercialKeepAlive}},
	"kraken":  {order: FIFO, load: loadEWMA, sizing: sizeStatic, react: reactBottleneck, chainExtra: 0.1},
	"fifer":   {order: FIFO, load: loadLinReg, sizing: sizeStatic, react: reactBottleneck},
	"isbatch": {order: FIFO, load: loadEWMA, sizing: sizeIS, react: reactOverload},
	"cypress": {order: HeaviestFirst, load: loadEWMA, sizing: sizeIS, react: reactOverload, lookAhead: true},
	// oracle-predicted is gantry's sizing fed the trace's expected rate
	// (its busiest second) and the true models: what is left between it
	// and gantry is the cost of learning and predicting. It never sees
	// the real arrivals; "oracle" (oracle.go) does.
	"oracle-predicted": {order: LeastSlack, load: loadOracle, sizing: sizeIS, react: reactOverload, lookAhead: true,
		stream: true, truth: true},
	"gantry": {order: LeastSlack, load: loadEWMA, sizing: sizeIS, react: reactOverload, lookAhead: true,
		execQuantile: 0.75, empiricalMix: true, stream: true,
		sloSizing: true, ageRetire: true, arrivalBurst: true, countRefused: true,
		steadyExcess: true, noWarmBuffer: true, loadTrend: true, // the warm buffer: burst.go, warmBuffer
		steadyMean: true, rateFloor: true, trendOwnGate: true, periodic: true, seasonal: true,
		seasonalLevel: true, seasonalDisp: true, stepEnd: true, jointChain: true, shareRound: true, startupSizing: true},
}

// gantryPanic is gantry's panic rule and window-boundary idling detection,
// which the SLO sizing, the idle-age retirement and the on-arrival burst
// detector replaced; the ablations below put them back one at a time.
func gantryPanic(p *parts) {
	p.panic, p.panicZ, p.panicCUSUM, p.panicMinSpan, p.panicHold = true, 3, true, true, 20*time.Second
}

// gantryStream is gantry before the SLO sizing, the idle-age retirement
// and the burst detector: the stream packing capped at a + sqrt(D·a), the
// panic rule with its hold, idling detection at window boundaries.
func gantryStream(p *parts) {
	p.sloSizing, p.ageRetire, p.arrivalBurst, p.countRefused = false, false, false, false
	gantryPanic(p)
	p.keepWindows, p.loadQuantileZ, p.steadyRetire = 3, 1, true
}

// ablations are gantry with one of its changes over Cypress undone; they
// measure what each change buys (docs/simulator.md). New accepts them,
// Names does not list them.
var ablations = map[string]func(p *parts){
	"gantry-stream": gantryStream,
	// One new rule off at a time.
	"gantry-no-slo-sizing":    func(p *parts) { p.sloSizing = false; p.loadQuantileZ = 1 },
	"gantry-no-age-retire":    func(p *parts) { p.ageRetire = false; p.keepWindows = 3; p.steadyRetire = true },
	"gantry-no-steady-excess": func(p *parts) { p.steadyExcess = false },
	"gantry-no-trend":         func(p *parts) { p.loadTrend = false },
	"gantry-no-steady-mean":   func(p *parts) { p.steadyMean = false },
	"gantry-no-rate-floor":    func(p *parts) { p.rateFloor = false },
	"gantry-no-joint-chain":   func(p *parts) { p.jointChain = false },
	"gantry-no-share-round":   func(p *parts) { p.shareRound = false },
	"gantry-no-own-gate":      func(p *parts) { p.trendOwnGate = false },
	"gantry-no-burst":         func(p *parts) { p.arrivalBurst = false },
	"gantry-no-refused":       func(p *parts) { p.countRefused = false },
	"gantry-no-burst-alarm":   func(p *parts) { p.noBurstAlarm = true },
	"gantry-no-periodic":      func(p *parts) { p.periodic = false },
	"gantry-no-seasonal":      func(p *parts) { p.seasonal = false },
	"gantry-no-season-level":  func(p *parts) { p.seasonalLevel = false },
	"gantry-no-season-disp":   func(p *parts) { p.seasonalDisp = false },
	"gantry-no-step-end":      func(p *parts) { p.stepEnd = false },
	"gantry-miss-budget":      func(p *parts) { p.missBudget = true }, // tried, not kept in gantry (miss_budget.go)
	"gantry-no-startup-size":  func(p *parts) { p.startupSizing = false },
	"gantry-fast-fall":        func(p *parts) { p.fastFall = true },     // tried, not kept in gantry (rate_fall.go)
	"gantry-no-warm-buffer":   func(p *parts) { p.noWarmBuffer = true }, // gantry itself since 2 December, not in Ablations
	"gantry-warm-buffer":      func(p *parts) { p.noWarmBuffer = false },
	"gantry-disp-no-bursts":   func(p *parts) { p.dispSkipBursts = true },                         // tried, not kept in gantry (burst.go)
	"gantry-bursty-alarms":    func(p *parts) { p.dispSkipBursts = true; p.unsteadyAlarms = 360 }, // and alarms sooner on unsteady load; not in gantry
	"gantry-startup-room":     func(p *parts) { p.startupRoom = true },                            // tried, not kept in gantry (startup_room.go)
	"gantry-disp-recover":     func(p *parts) { p.dispRecover = true },                            // tried, not kept in gantry (disp_recover.go)
	"gantry-panic":            func(p *parts) { p.arrivalBurst = false; gantryPanic(p) },
	"gantry-no-panic":         func(p *parts) { gantryStream(p); p.panic = false },
	"gantry-no-stream":        func(p *parts) { p.stream = false; p.empiricalMix = false },
	"gantry-mean-exec":        func(p *parts) { p.execQuantile = 0 },
	"gantry-heaviest-first":   func(p *parts) { p.order = HeaviestFirst },
	// gantry-panic-2sigma is the panic rule before its false-alarm, span
	// and hold rules: one tick's count above two standard deviations.
	"gantry-panic-2sigma": func(p *parts) {
		gantryStream(p)
		p.panicZ, p.panicCUSUM, p.panicMinSpan, p.panicHold, p.keepWindows = 2, false, false, 0, 1
	},
	// The rules of gantry-stream, each undone on it.
	"gantry-no-keep":          func(p *parts) { gantryStream(p); p.keepWindows = 1 },
	"gantry-no-cusum":         func(p *parts) { gantryStream(p); p.panicCUSUM = false },
	"gantry-no-hold":          func(p *parts) { gantryStream(p); p.panicHold = 0 },
	"gantry-no-min-span":      func(p *parts) { gantryStream(p); p.panicMinSpan = false },
	"gantry-no-load-quantile": func(p *parts) { gantryStream(p); p.loadQuantileZ = 0 },
	"gantry-no-steady-retire": func(p *parts) { gantryStream(p); p.steadyRetire = false },
}

// chainAblations are Cypress with chained prediction or look-ahead taken
// away: the three schemes of the paper's figure 2, where "cypress" itself
// is CP+LAS. New accepts them, Names does not list them.
var chainAblations = map[string]func(p *parts){
	"cypress-no-cp": func(p *parts) { p.noChain = true; p.lookAhead = false },
	"cypress-cp":    func(p *parts) { p.lookAhead = false },
}

// ChainAblations lists the figure-2 schemes in the paper's order: No CP,
// CP, CP+LAS.
func ChainAblations() []string { return []string{"cypress-no-cp", "cypress-cp", "cypress"} }

// Ablations lists the gantry ablation policies, sorted.
func Ablations() []string {
	return []string{"gantry-bursty-alarms", "gantry-disp-no-bursts", "gantry-disp-recover", "gantry-fast-fall", "gantry-heaviest-first", "gantry-mean-exec", "gantry-miss-budget", "gantry-no-age-retire", "gantry-no-burst", "gantry-no-burst-alarm", "gantry-no-cusum",
		"gantry-no-hold", "gantry-no-joint-chain", "gantry-no-keep", "gantry-no-load-quantile", "gantry-no-min-span", "gantry-no-own-gate", "gantry-no-panic",
		"gantry-no-periodic", "gantry-no-rate-floor", "gantry-no-refused", "gantry-no-season-disp", "gantry-no-season-level", "gantry-no-seasonal", "gantry-no-share-round", "gantry-no-slo-sizing", "gantry-no-steady-excess",
		"gantry-no-startup-size", "gantry-no-step-end",
		"gantry-no-steady-mean", "gantry-no-steady-retire", "gantry-no-stream", "gantry-no-trend", "gantry-panic", "gantry-panic-2sigma",
		"gantry-startup-room", "gantry-stream", "gantry-warm-buffer"}
}

// New builds the named policy (or ablation) for an app.
func New(name string, spec Spec) (Policy, error) {
	if name == "oracle" {
		return newOracle(spec)
	}
	if name == "knative" {
		if len(spec.Functions) == 0 {
			return nil, fmt.Errorf("%w: no functions", ErrBadSpec)
		}
		return newKnative(spec), nil
	}
	p, ok := partsFor(name)
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownPolicy, name, Names())
	}
	return newCore(name, p, spec)
}

// partsFor is the mechanisms of a named policy built from parts, or of an
// ablation of one.
func partsFor(name string) (parts, bool) {
	if undo, ok := ablations[name]; ok {
		p := catalog["gantry"]
		undo(&p)
		return p, true
	}
	if undo, ok := chainAblations[name]; ok {
		p := catalog["cypress"]
		undo(&p)
		return p, true
	}
	p, ok := catalog[name]
	return p, ok
}
