package liverun

import (
	"fmt"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"gantry.dev/gantry/pkg/stack"
)

// The stack file a child gateway is started with (`gantry serve --stack`):
// the same fields stack.Parse reads, written from a stack.Stack.
type stackFileYAML struct {
	Version   string                      `yaml:"version"`
	Functions map[string]functionFileYAML `yaml:"functions"`
	Apps      map[string]appFileYAML      `yaml:"apps,omitempty"`
}

type functionFileYAML struct {
	FProcess    string            `yaml:"fprocess"`
	Environment map[string]string `yaml:"environment,omitempty"`
	SLO         string            `yaml:"slo,omitempty"`
	Criticality int               `yaml:"criticality,omitempty"`
	Scale       scaleFileYAML     `yaml:"scale"`
	Concurrency int               `yaml:"concurrency,omitempty"`
	InputSize   inputSizeFileYAML `yaml:"input_size"`
	MaxQueue    int               `yaml:"max_queue,omitempty"`
	Timeout     string            `yaml:"timeout,omitempty"`
	ColdStart   string            `yaml:"cold_start,omitempty"`
}

type scaleFileYAML struct {
	Min int `yaml:"min"`
	Max int `yaml:"max"`
}

type inputSizeFileYAML struct {
	Header    string  `yaml:"header,omitempty"`
	Unit      string  `yaml:"unit,omitempty"`
	Min       float64 `yaml:"min"`
	Max       float64 `yaml:"max"`
	Sensitive bool    `yaml:"sensitive"`
}

type appFileYAML struct {
	Functions []string `yaml:"functions"`
	SLO       string   `yaml:"slo,omitempty"`
}

// marshalStack writes s in the stack file's format.
func marshalStack(s *stack.Stack) ([]byte, error) {
	out := stackFileYAML{Version: "1.0", Functions: map[string]functionFileYAML{}}
	for _, f := range s.Functions {
		out.Functions[f.Name] = functionFileYAML{FProcess: f.Command, Environment: f.Env, SLO: durationText(f.SLO),
			Criticality: f.Criticality, Scale: scaleFileYAML{Min: f.MinScale, Max: f.MaxScale},
			Concurrency: f.Concurrency, MaxQueue: f.MaxQueue, Timeout: durationText(f.Timeout),
			ColdStart: durationText(f.ColdStart),
			InputSize: inputSizeFileYAML{Header: f.SizeHeader, Unit: f.SizeUnit, Min: f.MinSize, Max: f.MaxSize, Sensitive: f.SizeSensitive}}
	}
	if len(s.Apps) > 0 {
		out.Apps = map[string]appFileYAML{}
		for _, a := range s.Apps {
			out.Apps[a.Name] = appFileYAML{Functions: a.Functions, SLO: durationText(a.SLO)}
		}
	}
	return yaml.Marshal(out)
}

func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// writeStackFile writes s into a temporary file, checked by parsing it
// back, and returns its path.
func writeStackFile(s *stack.Stack) (string, error) {
	data, err := marshalStack(s)
	if err != nil {
		return "", err
	}
	if _, err := stack.Parse("generated stack", data); err != nil {
		return "", fmt.Errorf("generated stack does not parse: %w", err)
	}
	f, err := os.CreateTemp("", "gantry-up-stack-*.yml")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
