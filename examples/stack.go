// Package examples holds the example functions' stack file, embedded so that
// `gantry up` needs nothing beside the binary.
package examples

import _ "embed"

// Stack is examples/stack.yml.
//
//go:embed stack.yml
var Stack []byte
