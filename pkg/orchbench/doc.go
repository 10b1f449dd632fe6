// Package orchbench is `gantry bench orchestration`: PREEMPT-FaaS's RQ1
// on a real control plane. N critical services are scaled from zero to K
// replicas with the JSON patch Knative's autoscaler sends, while
// single-pod objects are created and deleted in another namespace, and
// three stages of every scale-up are timed from the moment the patch
// returns: starts processing, pods created, pods running and ready.
//
// The same procedure runs once per controller under test: "vanilla"
// (Deployments, reconciled by the real kube-controller-manager), "gantry"
// (RTResources, reconciled by the in-process Gantry controller), and its
// variants ("gantry-fifo", "gantry-5"). Every time is read on this
// process's monotonic clock when a watch event arrives, never from object
// timestamps (which have one-second granularity); docs/benchmarks.md
// describes each stage's method and resolution.
package orchbench
