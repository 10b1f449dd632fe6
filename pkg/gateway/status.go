package gateway

import "gantry.dev/gantry/pkg/stack"

// stateFields are the FunctionStatus fields that secrets.go and limits.go
// fill: OpenFaaS's secrets, limits, requests and readOnlyRootFilesystem as
// deployed, and Gantry's account of which limits hold.
type stateFields struct {
	Secrets                []string         `json:"secrets,omitempty"`
	Limits                 *resourcesJSON   `json:"limits,omitempty"`
	Requests               *resourcesJSON   `json:"requests,omitempty"`
	ReadOnlyRootFilesystem bool             `json:"readOnlyRootFilesystem,omitempty"`
	Enforcement            *enforcementJSON `json:"gantryLimits,omitempty"`
}

func (g *Gateway) stateFieldsOf(f stack.Function) stateFields {
	return stateFields{Secrets: f.Secrets, Limits: toResources(f.Limits), Requests: toResources(f.Requests),
		ReadOnlyRootFilesystem: f.ReadOnlyRootFS, Enforcement: g.enforcement(f)}
}
