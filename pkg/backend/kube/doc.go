// Package kube is the Kubernetes backend: it runs each function's
// instances as the pods of an RTResource (or, for kind: deployment, an
// apps/v1 Deployment) in one namespace, and implements backend.Backend so
// the dispatcher drives it exactly as it drives the local process runtime.
//
// # Objects
//
// Deploy creates or updates, per function, a workload named after it and
// a headless Service of the same name selecting its pods by
// gantry.dev/function=NAME. The workload carries the criticality
// (spec.criticality on an RTResource, so the RTResource controller orders
// its work by it), the image, the command under /bin/sh -c, the
// environment plus $PORT, the container port, and a readiness probe on
// GET /_/health. Every object is labelled app.kubernetes.io/managed-by=gantry,
// and the backend never overwrites or deletes an object without that label.
//
// # Decisions out, readiness back
//
// The backend keeps, per function, the starts the dispatcher asked for and
// has not yet answered (pending) and the instances it reported Ready. The
// replica count it writes through the /scale subresource is their sum
// (never below the declared minimum), so the cluster holds exactly what
// the dispatcher counts as live. Start and
// Stop only book and wake the function's worker (a client-go work queue,
// which serialises one function's calls and coalesces a burst of Starts
// into one write); they never block on the API, and no event is delivered
// from inside them.
//
// Readiness comes from the Service's EndpointSlices (an informer on
// discovery/v1). Each routable endpoint (ready, not terminating, naming a
// pod) that is not yet an instance answers the oldest pending start with
// Ready{ID: pod name, Addr: ip:port}. A reported instance whose endpoint
// disappears or stops being ready is Exited with ErrEndpointGone, and
// leaves the replica count, so its controller removes the pod. A start
// that no endpoint answers within ReadyTimeout is Failed, and one whose
// workload cannot be scaled (gone, forbidden) is Failed at once. So every
// Start(n) ends in exactly n Ready-or-Failed events.
//
// Stop retires the instance's pod before lowering the count: a
// Deployment's ReplicaSet controller honours the
// controller.kubernetes.io/pod-deletion-cost annotation, so the pod gets
// the lowest cost; the RTResource controller does not read it, so the pod
// is deleted. Exited(nil) follows when its endpoint goes; if it is still
// routable after StopGrace, the pod is deleted outright.
//
// # Follow and lead
//
// A scaled-out gateway runs several replicas, each with its own backend,
// in front of the same pods; one, elected elsewhere, decides. The others
// are created with Options.Follow: they write nothing to the cluster
// (Deploy only registers the function so its endpoints are watched, and
// Undeploy and Close leave the objects alone, whatever OnClose says),
// report every routable endpoint Ready at once with no cold start, and
// report one that goes Exited(nil), since the leader retired it. Start
// fails with ErrFollower; Stop is ignored, and the instance's Exited
// comes when the leader removes its pod.
//
// Lead switches a follower to leading, once: it writes every function's
// objects as Deploy would, then the workers write the counts. The
// instances adopted while following stay reported and are counted, so
// the pods serving stay; pods still starting for the old leader are not
// counted, and go. From then on the backend behaves as one that never
// followed: new endpoints only answer starts.
//
// Events are delivered in order on one goroutine of the backend's own,
// never under its lock.
package kube
