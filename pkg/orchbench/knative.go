package orchbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"gantry.dev/gantry/config/knative"
	"gantry.dev/gantry/pkg/knativeingress"
	"gantry.dev/gantry/pkg/knativeinstall"
	"gantry.dev/gantry/pkg/knativert"
	"gantry.dev/gantry/pkg/localcluster"
)

// churnTaint keeps Knative's pods off the kwok nodes, where nothing would
// run them; the interference's pods tolerate it (and select those nodes).
const churnTaint = "orchbench.gantry.dev/churn"

var (
	churnNodes       = map[string]string{"type": "kwok"}
	churnTolerations = []corev1.Toleration{{Key: churnTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
)

// knRun is a Knative run: the runner's samples and churn, plus the
// requests and triggers of each arm and case.
type knRun struct {
	*runner
	ingress  string
	dyn      dynamic.Interface
	requests map[churnKey]*RequestStats
	triggers map[churnKey]*TriggerStats
	// lastTriggers is the last iteration's count, for its progress line.
	lastTriggers int
	// floor gathers the floor responder's times per case
	// (knative_floor.go); phases where the triggers fell on the
	// interference's grid (knative_phase.go), whose pod creates churnLog
	// reads from the audit log.
	floor    map[churnKey]*floorSamples
	phases   map[churnKey]*phaseSamples
	churnLog *auditReader
	// clusterKubeconfig is the local control plane's, when the run
	// started one.
	clusterKubeconfig string
	// audit reads the local control plane's audit log (nil on a
	// --kubeconfig cluster); auditSamples are the stages timed in it.
	audit        *auditReader
	auditSamples []Sample
	auditMissed  map[missKey]int
	// auditParts and auditWriters split the audit stages per case
	// (knative_audit.go's auditParts and auditWriters); auditWatches are
	// the watches cut off before their timeout, by watcher
	// (auditWatchEnds), read by watchLog.
	auditParts, auditWriters, auditWatches map[churnKey]map[string][]float64
	watchLog                               *auditReader
	// apiserver gathers the API server's metrics per case
	// (knative_apiserver.go).
	apiserver map[churnKey]map[string]*metricDelta
	// kcmURL is the local control plane's kube-controller-manager, whose
	// metrics say where vanilla's scale-ups wait (knative_kcm.go); kcm
	// gathers them per case.
	kcmURL string
	kcm    map[churnKey]*ControllerManagerStats
	// round is the repetition both arms are in: a run of N repetitions
	// runs every arm N times, interleaved (vanilla, gantry, vanilla, ...),
	// each on a new control plane, so that the machine's load drifts over
	// both arms alike.
	round int
}

// runKnative is Run with Options.Knative: each arm on a control plane of
// its own with Knative (or both, one after the other, on the --kubeconfig
// cluster).
func runKnative(ctx context.Context, opts Options) (*Report, error) {
	r := &runner{opts: opts, missed: map[missKey]int{}, churned: map[churnKey]*Churn{}, patches: map[churnKey][]float64{},
		started: time.Now(), traces: newTraceStore(), parts: map[churnKey]map[string][]float64{}}
	k := &knRun{runner: r, requests: map[churnKey]*RequestStats{}, triggers: map[churnKey]*TriggerStats{}, auditMissed: map[missKey]int{}, kcm: map[churnKey]*ControllerManagerStats{},
		auditParts: map[churnKey]map[string][]float64{}, auditWriters: map[churnKey]map[string][]float64{}, auditWatches: map[churnKey]map[string][]float64{}, apiserver: map[churnKey]map[string]*metricDelta{},
		floor: map[churnKey]*floorSamples{}, phases: map[churnKey]*phaseSamples{}}
	// Repetitions are rounds: each runs every arm once, on a control
	// plane of its own, every case once; one --quick run's medians move
	// severalfold between identical runs, and interleaving the arms
	// spreads the machine's drifting load over both.
rounds:
	for k.round = 0; k.round < opts.Repetitions; k.round++ {
		for _, ctl := range opts.Controllers {
			if ctx.Err() != nil {
				break rounds
			}
			if err := k.arm(ctx, ctl); err != nil {
				if ctx.Err() != nil {
					break rounds
				}
				return nil, fmt.Errorf("knative %s (repetition %d): %w", ctl, k.round+1, err)
			}
		}
	}
	rep := newReport(opts, r.samples, r.missed)
	rep.Churn = r.churnList()
	rep.PatchRTT = []RunStats{}
	rep.Breakdown = r.breakdownList()
	rep.Requests = k.requestList()
	rep.Triggers = k.triggerList()
	rep.Audit, rep.AuditReductions = k.auditReport()
	rep.ControllerManager = k.kcmList()
	rep.AuditParts, rep.AuditWriters = k.auditPartList()
	rep.AuditWatches = k.auditWatchList()
	rep.APIServer = k.apiserverList()
	rep.Floor = k.floorList()
	rep.TriggerPhase = k.phaseList()
	rep.PerRepetition = append(perRepetition(opts, k.auditSamples, "audit", []Stage{StartsProcessing, PodsCreated}),
		perRepetition(opts, r.samples, "watch", []Stage{StartsProcessing, PodsCreated, PodsReady})...)
	rep.Interrupted = ctx.Err() != nil
	rep.Warnings = churnWarnings(rep.Churn)
	for _, w := range rep.Warnings {
		k.logf("WARNING: %s", w)
	}
	return rep, nil
}

// arm runs every case of one controller.
func (k *knRun) arm(ctx context.Context, ctl string) error {
	stop, err := k.connect(ctx, ctl)
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stopGantry func() error
	if isGantry(ctl) {
		start := k.startGantryKnative
		if len(k.opts.KN.ControllerCommand) > 0 {
			start = k.startGantryProcess
		}
		if stopGantry, err = start(ctx, ctl); err != nil {
			return err
		}
	}
	w, err := k.setupWorld(ctx, ctl)
	if err == nil {
		err = k.cases(ctx, w)
	}
	// Interrupted on a control plane of the run's own, the API cleanup is
	// moot: the control plane goes next, and a second counts.
	if w != nil && !(ctx.Err() != nil && k.opts.Kubeconfig == "") {
		if w.services != nil && ctx.Err() == nil {
			err = errors.Join(err, k.deleteServices(ctx, w, w.services))
		}
		k.teardownWorld(ctx, w.world)
	}
	if stopGantry != nil {
		err = errors.Join(err, stopGantry())
	}
	return err
}

func (k *knRun) cases(ctx context.Context, w *knWorld) error {
	for _, c := range k.opts.Cases {
		if err := k.iteration(ctx, w, c, k.round); err != nil || ctx.Err() != nil {
			return err
		}
	}
	return nil
}

// connect starts a local control plane with Knative, two kwok nodes for
// the interference and Gantry's ingress (or loads --kubeconfig), taints
// the kwok nodes, lets Services start at zero, and for Gantry installs the
// CRD, the controller's identity and Knative's access to RTResources. The
// returned func undoes what connect did.
func (k *knRun) connect(ctx context.Context, ctl string) (func(), error) {
	stop := func() {}
	if k.opts.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", k.opts.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig: %w", err)
		}
		k.cfg, k.ingress = cfg, k.opts.KN.Ingress
	} else {
		k.logf("%s: starting a local control plane with Knative Serving %s", ctl, knativeinstall.ServingVersion)
		c, err := localcluster.Start(ctx, localcluster.Options{
			Nodes: k.opts.Nodes, ProcessNodes: 1, Scheduler: true, ControllerManager: true,
			Knative: true, KnativeDomain: k.opts.KN.Domain, KnativeIngress: "127.0.0.1:0", StartIngress: startIngress,
			Programs: k.opts.KN.Programs, Progress: k.opts.Progress, AuditPolicy: auditPolicy,
		})
		if err != nil {
			return nil, err
		}
		// An interrupt stops the control plane at once, beside the run's
		// unwinding (run.go's connect).
		unwatch := context.AfterFunc(ctx, func() { _ = c.Stop() })
		stop = func() {
			unwatch()
			k.keepAuditLog(c.AuditLogPath(), ctl)
			k.logf("stopping the local control plane")
			_ = c.Stop()
		}
		k.cfg, k.ingress, k.clusterKubeconfig = c.RESTConfig(), c.KnativeIngressAddr(), c.KubeconfigPath()
		k.audit, k.watchLog, k.churnLog = &auditReader{path: c.AuditLogPath()}, &auditReader{path: c.AuditLogPath()}, &auditReader{path: c.AuditLogPath()}
		k.kcmURL = c.ControllerManagerURL()
	}
	k.cfg = rest.CopyConfig(k.cfg)
	k.cfg.WarningHandler = rest.NoWarnings{} // Knative's securityContext advice on every Service
	if err := k.prepare(ctx, ctl); err != nil {
		stop()
		return nil, err
	}
	return func() {
		if k.opts.Kubeconfig != "" {
			bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			k.untaint(bg)
		}
		stop()
	}, nil
}

func (k *knRun) prepare(ctx context.Context, ctl string) error {
	if err := k.clients(); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(k.cfg)
	if err != nil {
		return err
	}
	k.dyn = dyn
	if err := k.taint(ctx); err != nil {
		return err
	}
	// Services start at zero (initial-scale 0), as the paper's are scaled
	// to zero before each iteration; Knative refuses that unless allowed.
	data := map[string]string{"allow-zero-initial-scale": "true"}
	if g := k.opts.KN.ScaleToZeroGrace; g > 0 {
		data["scale-to-zero-grace-period"] = g.String()
	}
	patch, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	if _, err := k.kube.CoreV1().ConfigMaps(knativeinstall.Namespace).Patch(ctx, "config-autoscaler", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("allow Knative Services to start at zero: %w", err)
	}
	if !isGantry(ctl) {
		return nil
	}
	if err := installCRD(ctx, k.cfg, k.opts.CRDPath); err != nil {
		return err
	}
	if err := installIdentity(ctx, k.cfg, k.opts.ConfigDir); err != nil {
		return fmt.Errorf("install the controller's RBAC and APF objects: %w", err)
	}
	return installKnativeRBAC(ctx, k.cfg)
}

func startIngress(kube kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger, addr string) (localcluster.Ingress, error) {
	srv, err := knativeingress.Start(knativeingress.Config{Kube: kube, Dynamic: dyn, Logger: log}, addr, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return srv, nil
}

// taint keeps Knative's pods off the kwok nodes; the interference needs
// at least one.
func (k *knRun) taint(ctx context.Context) error {
	nodes, err := k.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return err
	}
	if len(nodes.Items) == 0 {
		return errors.New("the interference needs kwok nodes (label type=kwok): start the cluster with `gantry cluster up --knative --nodes 2`")
	}
	for _, n := range nodes.Items {
		if hasTaint(n.Spec.Taints) {
			continue
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: churnTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		if _, err := k.kube.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("taint node %s: %w", n.Name, err)
		}
	}
	return nil
}

// untaint removes the taint from a --kubeconfig cluster's nodes.
func (k *knRun) untaint(ctx context.Context) {
	nodes, err := k.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return
	}
	for _, n := range nodes.Items {
		var keep []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != churnTaint {
				keep = append(keep, t)
			}
		}
		if len(keep) != len(n.Spec.Taints) {
			n.Spec.Taints = keep
			_, _ = k.kube.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{})
		}
	}
}

func hasTaint(ts []corev1.Taint) bool {
	for _, t := range ts {
		if t.Key == churnTaint {
			return true
		}
	}
	return false
}

// installKnativeRBAC applies config/knative/rbac.yaml and waits until
// Knative's autoscaler may scale RTResources (the ClusterRole aggregation
// controller folds the rules into knative-serving-admin).
func installKnativeRBAC(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, doc := range bytes.Split(knative.RBAC, []byte("\n---\n")) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return fmt.Errorf("config/knative/rbac.yaml: %w", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	if err := applyAll(ctx, dyn, objs); err != nil {
		return err
	}
	sar, err := authClient(cfg)
	if err != nil {
		return err
	}
	return poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		r, err := sar.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + knativeinstall.Namespace + ":controller",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + knativeinstall.Namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "gantry.dev", Resource: "rtresources", Subresource: "scale",
				Verb: "patch", Namespace: "any"}}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	})
}

// startGantryKnative runs the RTResource controller and Gantry's Knative
// controller in this process, as `gantry controller --knative
// --knative-webhook-url` does: the webhook on loopback, registered with
// its URL. The returned func removes the webhook's registration (with no
// server behind it, it would refuse Knative's writes) and stops both.
func (k *knRun) startGantryKnative(ctx context.Context, ctl string) (func() error, error) {
	ctx, cancel := context.WithCancel(ctx)
	rtDone := k.startGantry(ctx, ctl)
	c, err := knativert.New(knativert.Options{Config: asController(k.cfg), Logger: slog.New(slog.DiscardHandler), Component: "gantry-orchbench"})
	if err != nil {
		cancel()
		<-rtDone
		return nil, err
	}
	cert, ca, err := knativert.Certificate(knativert.ServeOptions{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		cancel()
		<-rtDone
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		<-rtDone
		return nil, err
	}
	url := "https://" + ln.Addr().String() + knativert.WebhookPath
	if err := knativert.Register(ctx, k.kube, url, ca); err != nil {
		ln.Close()
		cancel()
		<-rtDone
		return nil, err
	}
	done := make(chan error, 2)
	go func() { done <- knativert.Serve(ctx, ln, c.Webhook(), cert) }()
	go func() { done <- c.Run(ctx) }()
	k.logf("%s: the Gantry controller and its Knative webhook (%s) run in this process", ctl, url)
	return func() error {
		bg, cancelBG := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancelBG()
		err := k.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(bg, knativert.WebhookConfigurationName, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		cancel()
		for range 2 {
			if e := <-done; e != nil && !errors.Is(e, context.Canceled) {
				err = errors.Join(err, e)
			}
		}
		if e := <-rtDone; e != nil && !errors.Is(e, context.Canceled) {
			err = errors.Join(err, fmt.Errorf("gantry controller: %w", e))
		}
		return err
	}, nil
}

// knWorld is one arm's namespaces and watches.
type knWorld struct {
	*world
	tracker *knTracker
	// services are the arm's Services once created (not FreshServices).
	services []string
	// floor is the floor's responder (nil with KN.Floor off).
	floor *floorResponder
}

func (k *knRun) setupWorld(ctx context.Context, ctl string) (*knWorld, error) {
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1000000)
	w := &knWorld{world: &world{ctl: ctl, svcNS: "orchbench-kn-" + ctl + "-" + suffix, churnNS: "orchbench-kn-churn-" + ctl + "-" + suffix},
		tracker: newKnTracker(!isGantry(ctl))}
	deps := deployments{kube: k.kube, churnNS: w.churnNS, churnNodes: churnNodes, churnTolerations: churnTolerations}
	if isGantry(ctl) {
		w.target = rtresources{rts: k.rts, churnNS: w.churnNS, churnNodes: churnNodes, churnTolerations: churnTolerations}
	} else {
		w.target = deps
	}
	for _, ns := range []string{w.svcNS, w.churnNS} {
		if err := k.createNamespace(ctx, ns); err != nil {
			return w, err
		}
	}
	if k.opts.KN.Floor && k.audit == nil {
		k.logf("   %s: no floor: it is timed in the audit log of a control plane the run starts, not on --kubeconfig's", ctl)
	}
	if k.opts.KN.Floor && k.audit != nil {
		f, err := newFloorResponder(ctx, k.cfg, w.svcNS, k.opts.Services)
		if err != nil {
			return w, err
		}
		w.floor, w.tracker.onTrigger = f, f.offer
		go f.run(ctx)
	}
	return w, k.startKnWatches(ctx, w)
}

// hostOf is a Service's host name at the ingress.
func (k *knRun) hostOf(ns, name string) string { return name + "." + ns + "." + k.opts.KN.Domain }

// revisionOf is the first Revision of a Service, which Knative names so.
func revisionOf(svc string) string { return svc + "-00001" }

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// keepAuditLog copies an arm's audit log into KN.AuditDir, if set.
func (k *knRun) keepAuditLog(path, ctl string) {
	if k.opts.KN.AuditDir == "" {
		return
	}
	dst := filepath.Join(k.opts.KN.AuditDir, fmt.Sprintf("audit-%s-%d.log", ctl, k.round))
	if err := copyFile(path, dst); err != nil {
		k.logf("keep the audit log: %v", err)
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
