package stack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// MaxFileSize bounds a stack file; it is read whole.
const MaxFileSize = 4 << 20

// The YAML shape. OpenFaaS build fields (lang, handler, build_args, …) are
// accepted so a user's stack.yml parses unchanged; every deployment field
// (namespace, secrets, limits, requests, constraints,
// readonly_root_filesystem) reaches the function, and the backend honours
// or refuses it. environment_file names files relative to the stack file
// that faas-cli reads itself; Gantry refuses it rather than ignore it.
type fileYAML struct {
	Version       string                  `yaml:"version"`
	Provider      providerYAML            `yaml:"provider"`
	Functions     map[string]functionYAML `yaml:"functions"`
	Apps          map[string]appYAML      `yaml:"apps"`
	Configuration map[string]any          `yaml:"configuration"`
}

type providerYAML struct {
	Name    string `yaml:"name"`
	Gateway string `yaml:"gateway"`
	Network string `yaml:"network"`
}

type functionYAML struct {
	Lang             string            `yaml:"lang"`
	Handler          string            `yaml:"handler"`
	Image            string            `yaml:"image"`
	FProcess         string            `yaml:"fprocess"`
	Command          string            `yaml:"command"`
	Environment      map[string]string `yaml:"environment"`
	EnvironmentFile  []string          `yaml:"environment_file"`
	Secrets          []string          `yaml:"secrets"`
	Labels           map[string]string `yaml:"labels"`
	Annotations      map[string]string `yaml:"annotations"`
	Limits           Resources         `yaml:"limits"`
	Requests         Resources         `yaml:"requests"`
	Constraints      []string          `yaml:"constraints"`
	BuildArgs        map[string]string `yaml:"build_args"`
	BuildOptions     []string          `yaml:"build_options"`
	ReadOnlyRootFS   bool              `yaml:"readonly_root_filesystem"`
	Namespace        string            `yaml:"namespace"`
	SkipBuild        bool              `yaml:"skip_build"`
	SLO              string            `yaml:"slo"`
	Criticality      int               `yaml:"criticality"`
	Scale            scaleYAML         `yaml:"scale"`
	Concurrency      int               `yaml:"concurrency"`
	InputSize        inputSizeYAML     `yaml:"input_size"`
	MaxQueue         int               `yaml:"max_queue"`
	SLOTarget        float64           `yaml:"slo_target"`
	Timeout          string            `yaml:"timeout"`
	ColdStart        string            `yaml:"cold_start"`
	AsyncDeadline    string            `yaml:"async_deadline"`
	Kind             string            `yaml:"kind"`
	Idempotent       bool              `yaml:"idempotent"`
	SocketActivation bool              `yaml:"socket_activation"`
}

type scaleYAML struct {
	Min int `yaml:"min"`
	Max int `yaml:"max"`
}

type inputSizeYAML struct {
	Header    string  `yaml:"header"`
	Unit      string  `yaml:"unit"`
	Min       float64 `yaml:"min"`
	Max       float64 `yaml:"max"`
	Sensitive *bool   `yaml:"sensitive"`
}

type appYAML struct {
	Functions []string `yaml:"functions"`
	SLO       string   `yaml:"slo"`
}

// ParseFile reads and parses a stack file; errors name the file and line.
func ParseFile(path string) (*Stack, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes", path, ErrInvalid, MaxFileSize)
	}
	return Parse(path, data)
}

// Parse parses a stack file's contents; name is used in errors.
func Parse(name string, data []byte) (*Stack, error) {
	var raw fileYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w: empty stack file", name, ErrInvalid)
		}
		return nil, fmt.Errorf("%s: %w: %s", name, ErrInvalid, yamlError(err))
	}
	lines, err := declarationLines(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrInvalid, err)
	}
	s, err := build(raw, lines)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, lineOf(err), err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, failingLine(s, err), err)
	}
	return s, nil
}

// yamlTypes names the YAML shape's types as a user knows them: the
// decoder's "field sloo not found in type stack.functionYAML" named Go
// types of this package.
var yamlTypes = strings.NewReplacer(
	"not found in type stack.fileYAML", "is not a stack-file field (version, provider, functions, apps, configuration)",
	"not found in type stack.providerYAML", "is not a field of provider (name, gateway, network)",
	"not found in type stack.functionYAML", "is not a field of a function",
	"not found in type stack.scaleYAML", "is not a field of scale (min, max)",
	"not found in type stack.inputSizeYAML", "is not a field of input_size (header, unit, min, max, sensitive)",
	"not found in type stack.appYAML", "is not a field of an app (functions, slo)",
	"map[string]stack.functionYAML", "functions (NAME: {fprocess: ...})",
	"map[string]stack.appYAML", "apps (NAME: {functions: [...]})",
	"stack.functionYAML", "a function",
	"stack.fileYAML", "a stack file",
	"stack.appYAML", "an app",
)

func yamlError(err error) string { return yamlTypes.Replace(err.Error()) }

// declLines maps "functions/NAME" and "apps/NAME" to the line each
// declaration starts on, and records the file's order of declarations.
type declLines struct {
	at        map[string]int
	functions []string
	apps      []string
}

func declarationLines(data []byte) (declLines, error) {
	out := declLines{at: map[string]int{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return out, err
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return out, errors.New("the top level must be a mapping")
	}
	top := doc.Content[0].Content
	for i := 0; i+1 < len(top); i += 2 {
		section := top[i].Value
		if section != "functions" && section != "apps" {
			continue
		}
		body := top[i+1].Content
		for j := 0; j+1 < len(body); j += 2 {
			name := body[j].Value
			out.at[section+"/"+name] = body[j].Line
			if section == "functions" {
				out.functions = append(out.functions, name)
			} else {
				out.apps = append(out.apps, name)
			}
		}
	}
	return out, nil
}

// lineError carries the line a declaration error belongs to.
type lineError struct {
	line int
	err  error
}

func (e lineError) Error() string { return e.err.Error() }
func (e lineError) Unwrap() error { return e.err }

func lineOf(err error) int {
	var le lineError
	if errors.As(err, &le) {
		return le.line
	}
	return 1
}

// failingLine finds the declaration a validation error names.
func failingLine(s *Stack, err error) int {
	msg := err.Error()
	for _, f := range s.Functions {
		if strings.Contains(msg, fmt.Sprintf("function %q", f.Name)) || strings.Contains(msg, fmt.Sprintf("name %q", f.Name)) {
			return f.Line
		}
	}
	for _, a := range s.Apps {
		if strings.Contains(msg, fmt.Sprintf("app %q", a.Name)) || strings.Contains(msg, fmt.Sprintf("name %q", a.Name)) {
			return a.Line
		}
	}
	return 1
}

func build(raw fileYAML, lines declLines) (*Stack, error) {
	s := &Stack{}
	for _, name := range lines.functions {
		line := lines.at["functions/"+name]
		f, err := buildFunction(name, raw.Functions[name])
		if err != nil {
			return nil, lineError{line, err}
		}
		f.Line = line
		s.Functions = append(s.Functions, f)
	}
	for _, name := range lines.apps {
		line := lines.at["apps/"+name]
		a := raw.Apps[name]
		slo, err := parseDuration(a.SLO)
		if err != nil {
			return nil, lineError{line, fmt.Errorf("%w: app %q: slo: %v", ErrInvalid, name, err)}
		}
		s.Apps = append(s.Apps, App{Name: name, Functions: a.Functions, SLO: slo, Line: line})
	}
	return s, nil
}

func buildFunction(name string, y functionYAML) (Function, error) {
	bad := func(format string, args ...any) (Function, error) {
		return Function{}, fmt.Errorf("%w: function %q: %s", ErrInvalid, name, fmt.Sprintf(format, args...))
	}
	if len(y.EnvironmentFile) > 0 {
		return bad("environment_file is not supported; put values in environment")
	}
	if err := y.expandFields(); err != nil {
		return bad("%v", err)
	}
	if y.FProcess != "" && y.Command != "" && y.FProcess != y.Command {
		return bad("fprocess and command disagree; give one")
	}
	f := Function{Name: name, Command: firstNonEmpty(y.Command, y.FProcess), Image: y.Image,
		Env: y.Environment, Labels: y.Labels, Annotations: y.Annotations,
		Criticality: y.Criticality, MinScale: y.Scale.Min, MaxScale: y.Scale.Max,
		Concurrency: y.Concurrency, SizeHeader: y.InputSize.Header, SizeUnit: y.InputSize.Unit,
		MinSize: y.InputSize.Min, MaxSize: y.InputSize.Max, SizeSensitive: true,
		MaxQueue: y.MaxQueue, SLOTarget: y.SLOTarget, Kind: y.Kind, Namespace: y.Namespace, Secrets: y.Secrets,
		Constraints: y.Constraints, Limits: y.Limits, Requests: y.Requests,
		ReadOnlyRootFilesystem: y.ReadOnlyRootFS, Idempotent: y.Idempotent,
		SocketActivation: y.SocketActivation}
	if y.InputSize.Sensitive != nil {
		f.SizeSensitive = *y.InputSize.Sensitive
	}
	var err error
	for _, d := range []struct {
		field string
		src   string
		dst   *time.Duration
	}{{"slo", y.SLO, &f.SLO}, {"timeout", y.Timeout, &f.Timeout}, {"cold_start", y.ColdStart, &f.ColdStart}, {"async_deadline", y.AsyncDeadline, &f.AsyncDeadline}} {
		if *d.dst, err = parseDuration(d.src); err != nil {
			return bad("%s: %v", d.field, err)
		}
		if d.src != "" && *d.dst == 0 {
			// 0 is what a field left out holds: Defaults would replace it
			// unseen.
			return bad("%s: %q must be above 0; leave it out for the default", d.field, d.src)
		}
	}
	if err := f.applyMeta(); err != nil {
		return Function{}, err
	}
	f.Defaults()
	return f, nil
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
