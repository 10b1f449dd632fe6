package gateway

import "gantry.dev/gantry/pkg/stack"

// stateFields are the OpenFaaS FunctionStatus fields this file's
// neighbours fill: secrets (secrets.go).
type stateFields struct {
	Secrets []string `json:"secrets,omitempty"`
}

func stateFieldsOf(f stack.Function) stateFields {
	return stateFields{Secrets: f.Secrets}
}
