// Package knativert backs the Revisions of critical Knative Services with
// RTResources, with no change to Knative.
//
// A Revision carrying the annotation
// autoscaling.knative.dev/application-criticality-level is "critical".
// Knative's revision reconciler still creates its Deployment and its
// PodAutoscaler; two pieces of Gantry take over from there:
//
//   - a mutating admission webhook (webhook.go) that sets a critical
//     Revision's Deployment to 0 replicas when it is created, and points
//     its PodAutoscaler's scaleTargetRef at the RTResource on every create
//     and update, so Knative's KPA scales the RTResource through /scale;
//   - a reconciler (reconciler.go) that creates the RTResource, owned by
//     the Revision, from the Deployment's template (queue-proxy, labels and
//     annotations included) and keeps it in step with that template and
//     with the Revision's criticality, while the KPA owns its replicas.
//
// The knative.dev modules are not dependencies: Revisions and
// PodAutoscalers are read as unstructured objects, and only the few fields
// Gantry needs are named here. docs/knative.md ("RTResources for critical
// Revisions") says why this has no fight with Knative's controllers.
package knativert
