package stack

// faas-cli expands environment variables in a stack file before it reads
// it, so stack files carry image: ${REGISTRY:-docker.io}/fn:${TAG:-latest}
// and environment values from the shell. Gantry expands the same ${...}
// forms from the environment `gantry serve` runs in, in every field but
// the command: fprocess runs under /bin/sh -c, whose own expansion at the
// instance's start sees the instance's variables ($PORT among them).

import (
	"fmt"
	"os"
	"strings"
)

// expandEnv expands ${NAME}, ${NAME:-DEFAULT} (DEFAULT when NAME is unset
// or empty) and ${NAME-DEFAULT} (when unset) in s. An unset variable
// without a default, or another form, is an error rather than an empty
// string: an image or a secret name that silently lost a part does not
// deploy what the file says.
func expandEnv(s string) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var out strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			out.WriteString(s)
			return out.String(), nil
		}
		out.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q: ${ without a closing }", s)
		}
		v, err := expandOne(s[i+2 : i+end])
		if err != nil {
			return "", err
		}
		out.WriteString(v)
		s = s[i+end+1:]
	}
}

// expandOne is the value of one ${...} body.
func expandOne(body string) (string, error) {
	name, def, hasDef, emptyToo := body, "", false, false
	if k := strings.IndexAny(body, ":-"); k >= 0 {
		name = body[:k]
		switch rest := body[k:]; {
		case strings.HasPrefix(rest, ":-"):
			def, hasDef, emptyToo = rest[2:], true, true
		case strings.HasPrefix(rest, "-"):
			def, hasDef = rest[1:], true
		default:
			return "", fmt.Errorf("${%s}: only ${NAME}, ${NAME:-DEFAULT} and ${NAME-DEFAULT} are expanded", body)
		}
	}
	if !envName(name) {
		return "", fmt.Errorf("${%s}: %q is not a variable name", body, name)
	}
	v, set := os.LookupEnv(name)
	switch {
	case set && (v != "" || !emptyToo):
		return v, nil
	case hasDef:
		return def, nil
	}
	return "", fmt.Errorf("${%s}: variable %s is not set and has no default (${%s:-DEFAULT})", body, name, name)
}

func envName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// expandFields expands every field of a function declaration but its
// command, in place.
func (y *functionYAML) expandFields() error {
	strs := []*string{&y.Image, &y.Namespace, &y.Limits.Memory, &y.Limits.CPU, &y.Requests.Memory, &y.Requests.CPU,
		&y.SLO, &y.Timeout, &y.ColdStart, &y.AsyncDeadline, &y.Kind, &y.InputSize.Header, &y.InputSize.Unit}
	for i := range y.Secrets {
		strs = append(strs, &y.Secrets[i])
	}
	for i := range y.Constraints {
		strs = append(strs, &y.Constraints[i])
	}
	for _, p := range strs {
		v, err := expandEnv(*p)
		if err != nil {
			return err
		}
		*p = v
	}
	for _, m := range []map[string]string{y.Environment, y.Labels, y.Annotations} {
		for k, v := range m {
			e, err := expandEnv(v)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			m[k] = e
		}
	}
	return nil
}
