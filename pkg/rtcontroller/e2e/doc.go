// Package e2e holds the RTResource controller's end-to-end tests. They run the
// controller in-process against a real kube-apiserver, kube-controller-manager
// (for garbage collection), kube-scheduler and kwok nodes from
// pkg/localcluster, one cluster for the whole package. Under -short they skip.
package e2e
