package gateway

import "gantry.dev/gantry/pkg/stack"

// stateFields are the FunctionStatus fields limits.go fills: which of the
// function's limits and requests hold locally, and what the memory
// watchdog killed.
type stateFields struct {
	Enforcement *enforcementJSON `json:"gantryLimits,omitempty"`
}

func (g *Gateway) stateFieldsOf(f stack.Function) stateFields {
	return stateFields{Enforcement: g.enforcement(f)}
}
