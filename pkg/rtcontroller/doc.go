// Package rtcontroller reconciles RTResources with ReplicaSet semantics and
// feeds its reconciles through a priority work queue, so that orchestration
// work for a critical object starts before queued work for less critical ones.
//
// The package splits into a pure part and a driver. plan.go and status.go
// turn (object, cached pods, now) into decisions and a status without I/O;
// controller.go and sync.go own informers, API calls, expectations and
// workers. ratelimit.go orders the controller's own API requests by
// criticality on the client side.
package rtcontroller
