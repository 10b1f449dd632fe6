// Package knativeinstall installs Knative Serving, unpatched, on a local
// control plane: it reads the manifests `make knative` assembled
// (hack/build-knative.sh: serving's config/core plus the networking and
// caching files the module zip lacks), renders them for this platform, and
// applies them; Knative's own Deployments then run on a process node
// (pkg/processnode), whose image map sends each `ko://` image to the binary
// the build made.
//
// Rendering changes only configuration, never Knative's code:
//
//   - config-network: ingress class gantry.ingress.networking.knative.dev
//     (Gantry's KIngress, `gantry serve --knative-ingress`) and
//     mesh-compatibility-mode disabled, so the autoscaler scrapes pod
//     addresses directly;
//   - config-domain: Settings.Domain as the cluster's domain, so a Service
//     is reached as NAME.NAMESPACE.DOMAIN through the ingress;
//   - the Deployments in knative-serving get a nodeSelector for the process
//     nodes (type=process), so kwok's fake nodes never get them.
//
// The images stay as Knative writes them (`ko://knative.dev/serving/cmd/X`,
// queue-sidecar-image included): Images maps each to its binary.
//
// Install applies in three steps: the namespace and the CRDs (waiting until
// each is Established), then everything else but the webhook
// configurations, then those, last, since they refer admission to a webhook
// that must be running first. WaitReady returns once the four Deployments
// are Available and the webhook admits a dry-run Knative Service.
package knativeinstall
