package rtcontroller

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLeadershipLost is returned when another replica took the lease: the
// process should exit so it never reconciles alongside the new leader.
var ErrLeadershipLost = errors.New("rtcontroller: leader lease lost")

// LeaderElection configures leader election on a Lease. The defaults bound a
// crash failover by LeaseDuration + RetryPeriod (with client-go's 1.2 jitter
// factor on the retry) to about 10 s.
type LeaderElection struct {
	Namespace     string // default "gantry-system"
	Name          string // default "gantry-controller"
	Identity      string // required, unique per replica
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// ReleaseOnCancel gives the lease up on a clean shutdown, so the next
	// replica takes over after one RetryPeriod instead of a LeaseDuration.
	ReleaseOnCancel bool
	// Watchdog, if set, makes /healthz fail when renewals stall.
	Watchdog *leaderelection.HealthzAdaptor
}

// ErrNoIdentity is returned for leader election without an identity.
var ErrNoIdentity = errors.New("rtcontroller: leader election needs an identity")

func (le LeaderElection) withDefaults() LeaderElection {
	if le.Namespace == "" {
		le.Namespace = "gantry-system"
	}
	if le.Name == "" {
		le.Name = "gantry-controller"
	}
	if le.LeaseDuration <= 0 {
		le.LeaseDuration = 8 * time.Second
	}
	if le.RenewDeadline <= 0 {
		le.RenewDeadline = 5 * time.Second
	}
	if le.RetryPeriod <= 0 {
		le.RetryPeriod = time.Second
	}
	return le
}

// RunLeaderElected fills the caches at once, then reconciles only while this
// replica holds the lease. It returns nil when ctx ends and
// ErrLeadershipLost if the lease is lost first.
func (c *Controller) RunLeaderElected(ctx context.Context, le LeaderElection) error {
	le = le.withDefaults()
	if le.Identity == "" {
		return ErrNoIdentity
	}
	defer c.shutdown()
	// A leader whose engine fails must give the lease up, or it would hold
	// it without reconciling and no standby could take over.
	ectx, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	elector, err := c.newElector(le, giveUp)
	if err != nil {
		return err
	}
	// The informers must stop before shutdown waits for them, also when
	// this returns on a lost lease while ctx is still live.
	ictx, stopInformers := context.WithCancel(ctx)
	defer stopInformers()
	if err := c.startInformers(ictx); err != nil {
		return err
	}
	elector.Run(ectx)
	switch {
	case ctx.Err() != nil:
		return nil
	case ectx.Err() != nil:
		return context.Cause(ectx)
	default:
		return ErrLeadershipLost
	}
}

// ErrEngineStopped wraps the error of an engine that stopped while this
// replica led.
var ErrEngineStopped = errors.New("rtcontroller: engine stopped while leading")

func (c *Controller) newElector(le LeaderElection, giveUp context.CancelCauseFunc) (*leaderelection.LeaderElector, error) {
	// Lease renewals use their own client: they must never queue behind
	// reconcile traffic.
	kube, err := kubernetes.NewForConfig(c.opts.Config)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: le.Name, ReleaseOnCancel: le.ReleaseOnCancel, WatchDog: le.Watchdog,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { c.lead(ctx, giveUp) },
			OnStoppedLeading: func() { c.setLeader(false) },
		},
	})
}

// lead reconciles while this replica holds the lease. If the engine returns
// before the lease ends, with or without an error, nothing would reconcile,
// so the replica gives the lease up.
func (c *Controller) lead(ctx context.Context, giveUp context.CancelCauseFunc) {
	c.log.Info("became leader; reconciling")
	err := c.reconcileWhileActive(ctx)
	if ctx.Err() != nil {
		return
	}
	c.log.Error("engine stopped while leading; giving the lease up", "err", err)
	if err == nil {
		giveUp(ErrEngineStopped)
		return
	}
	giveUp(fmt.Errorf("%w: %w", ErrEngineStopped, err))
}

func (c *Controller) setLeader(on bool) {
	c.leader.Store(on)
	if on {
		c.metrics.leader.Set(1)
	} else {
		c.metrics.leader.Set(0)
	}
}

// IsLeader reports whether this replica is the one reconciling: it holds the
// lease, or leader election is off and it runs alone.
func (c *Controller) IsLeader() bool { return c.leader.Load() }
