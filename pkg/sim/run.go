package sim

import (
	"errors"
	"fmt"
)

// Run simulates one configuration to completion.
func Run(cfg Config) (Result, error) {
	cfg.applyDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	return Result{}, fmt.Errorf("%w", errors.New("sim: engine lands in the next commit"))
}
