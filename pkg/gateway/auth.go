package gateway

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Auth holds the credentials the management routes accept: HTTP basic auth
// (OpenFaaS's admin user and password) or a bearer token.
type Auth struct {
	user, password string
	token          string
}

// maxSecretFile bounds a credentials file.
const maxSecretFile = 4096

// LoadAuth reads a "user:password" file and/or a token file; either path
// may be empty, not both.
func LoadAuth(basicFile, tokenFile string) (*Auth, error) {
	if basicFile == "" && tokenFile == "" {
		return nil, errors.New("no credentials file")
	}
	a := &Auth{}
	if basicFile != "" {
		s, err := readSecret(basicFile)
		if err != nil {
			return nil, err
		}
		user, pass, ok := strings.Cut(s, ":")
		if !ok || user == "" || pass == "" {
			return nil, fmt.Errorf("%s: want one line user:password", basicFile)
		}
		a.user, a.password = user, pass
	}
	if tokenFile != "" {
		s, err := readSecret(tokenFile)
		if err != nil {
			return nil, err
		}
		if s == "" {
			return nil, fmt.Errorf("%s: empty token", tokenFile)
		}
		a.token = s
	}
	return a, nil
}

// NewAuth builds credentials directly (tests, embedding).
func NewAuth(user, password, token string) *Auth {
	return &Auth{user: user, password: password, token: token}
}

func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s: larger than %d bytes", path, maxSecretFile)
	}
	return strings.TrimSpace(string(b)), nil
}

func (a *Auth) allows(r *http.Request) bool {
	if user, pass, ok := r.BasicAuth(); ok && a.user != "" {
		return equal(user, a.user) && equal(pass, a.password)
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && a.token != "" {
		return equal(strings.TrimSpace(tok), a.token)
	}
	return false
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// wrap refuses unauthenticated requests with 401; a nil Auth lets all in.
func (a *Auth) wrap(h http.HandlerFunc) http.Handler {
	if a == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.allows(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="gantry"`)
			http.Error(w, "unauthorized: management routes need basic auth or a bearer token", http.StatusUnauthorized)
			return
		}
		h(w, r)
	})
}
