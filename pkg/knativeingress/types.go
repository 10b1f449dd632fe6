package knativeingress

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// GVR is the KIngress resource: networking.internal.knative.dev/v1alpha1
// ingresses, as knative.dev/networking's config/ingress.yaml defines it.
var GVR = schema.GroupVersionResource{Group: "networking.internal.knative.dev", Version: "v1alpha1", Resource: "ingresses"}

// NetworkingVersion is the knative.dev/networking module that
// knative.dev/serving v0.50.0 requires: the KIngress contract this package
// implements, and the module the tests take the CRD from.
const NetworkingVersion = "v0.0.0-20260727162500-c7a7b772cac9"

// Class is the ingress class Gantry serves.
const Class = "gantry.ingress.networking.knative.dev"

// The annotations naming an Ingress's class (the second is the
// alternative spelling Knative also reads), and config-network's keys for
// the default class ("ingress-class" wins over the older "ingress.class").
const (
	ClassAnnotation    = "networking.knative.dev/ingress.class"
	ClassAnnotationAlt = "networking.knative.dev/ingress-class"
	configNetwork      = "config-network"
	configClassKey     = "ingress-class"
	configClassKeyOld  = "ingress.class"
)

// The headers of Knative's network probes (knative.dev/networking
// pkg/http/header): a request carrying hashHeader "override" has it
// replaced by the hash of the Ingress version that routed it.
const (
	hashHeader   = "K-Network-Hash"
	hashOverride = "override"
)

// The values of spec.httpOption.
const (
	HTTPOptionEnabled    = "Enabled"
	HTTPOptionRedirected = "Redirected"
)

// Visibility of a rule.
const (
	ExternalIP   = "ExternalIP"
	ClusterLocal = "ClusterLocal"
)

// The types below mirror knative.dev/networking's v1alpha1 Ingress spec
// field for field, in the same order with the same JSON names, so that
// json.Marshal of a Spec is byte for byte what Knative's ComputeHash
// marshals (see Hash). The module itself is not a dependency.

// Ingress is a KIngress as this package reads it.
type Ingress struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec `json:"spec,omitempty"`
}

// Spec is an Ingress's spec.
type Spec struct {
	TLS        []TLS  `json:"tls,omitempty"`
	Rules      []Rule `json:"rules,omitempty"`
	HTTPOption string `json:"httpOption,omitempty"`
}

// TLS is a spec.tls entry: the certificate in the Secret
// SecretNamespace/SecretName (of type kubernetes.io/tls) serves Hosts on
// the HTTPS listener.
type TLS struct {
	Hosts           []string `json:"hosts,omitempty"`
	SecretName      string   `json:"secretName,omitempty"`
	SecretNamespace string   `json:"secretNamespace,omitempty"`
}

// Rule routes some hosts.
type Rule struct {
	Hosts      []string  `json:"hosts,omitempty"`
	Visibility string    `json:"visibility,omitempty"`
	HTTP       *RuleHTTP `json:"http,omitempty"`
}

// RuleHTTP holds a rule's paths.
type RuleHTTP struct {
	Paths []Path `json:"paths"`
}

// Path is one route of a rule: a path prefix and exact header matches
// select it; it sends to weighted splits.
type Path struct {
	Path          string                 `json:"path,omitempty"`
	RewriteHost   string                 `json:"rewriteHost,omitempty"`
	Headers       map[string]HeaderMatch `json:"headers,omitempty"`
	Splits        []Split                `json:"splits"`
	AppendHeaders map[string]string      `json:"appendHeaders,omitempty"`
}

// Split is a weighted backend.
type Split struct {
	Backend       `json:",inline"`
	Percent       int               `json:"percent,omitempty"`
	AppendHeaders map[string]string `json:"appendHeaders,omitempty"`
}

// Backend is a Service port.
type Backend struct {
	ServiceNamespace string             `json:"serviceNamespace"`
	ServiceName      string             `json:"serviceName"`
	ServicePort      intstr.IntOrString `json:"servicePort"`
}

// HeaderMatch matches a header's value exactly.
type HeaderMatch struct {
	Exact string `json:"exact"`
}

// fromUnstructured reads an Ingress from the informer's object. The spec
// is read strictly: a field this package does not know (a newer
// Knative's) is an error, so the Ingress is refused rather than served
// with the field ignored.
func fromUnstructured(obj map[string]any) (*Ingress, error) {
	var ing Ingress
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &ing); err != nil {
		return nil, fmt.Errorf("decode ingress: %w", err)
	}
	if spec, ok := obj["spec"].(map[string]any); ok {
		ing.Spec = Spec{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(spec, &ing.Spec, true); err != nil {
			return nil, fmt.Errorf("spec: %w", err)
		}
	}
	return &ing, nil
}

// Hash is Knative's hash of an Ingress version (knative.dev/networking
// pkg/ingress ComputeHash): SHA-256 of the spec's JSON, the namespace and
// the name, in hex. Probes ask for it with K-Network-Hash: override.
func Hash(ing *Ingress) (string, error) {
	b, err := json.Marshal(ing.Spec)
	if err != nil {
		return "", err
	}
	b = append(b, ing.Namespace...)
	b = append(b, ing.Name...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// ClassOf is the Ingress's class by its annotations, else def.
func ClassOf(ing *Ingress, def string) string {
	if c := ing.Annotations[ClassAnnotation]; c != "" {
		return c
	}
	if c := ing.Annotations[ClassAnnotationAlt]; c != "" {
		return c
	}
	return def
}
