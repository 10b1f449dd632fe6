// Package knative carries the manifests that back critical Knative
// Revisions with RTResources, so the controller and tests use the very
// files `go tool kustomize build config/knative` renders.
package knative

import _ "embed"

// Webhook is webhook.yaml: the MutatingWebhookConfiguration and its
// Service.
//
//go:embed webhook.yaml
var Webhook []byte

// RBAC is rbac.yaml: the controller's ClusterRole and binding, and the
// ClusterRole Knative's components aggregate.
//
//go:embed rbac.yaml
var RBAC []byte
