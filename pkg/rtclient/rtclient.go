// Package rtclient is the typed REST client for RTResources that the
// controller, the Kubernetes backend and the benchmarks share. It lives
// beside api/v1alpha1 rather than in it: controller-gen generates deep
// copies for every type in that package.
package rtclient

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/gentype"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// Scheme knows the built-in types and RTResource: requests encode the
// built-in option types, and events and owner references need both.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := gantryv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Client is a typed client for RTResources in one namespace ("" for all,
// list and watch only).
type Client = gentype.ClientWithList[*gantryv1.RTResource, *gantryv1.RTResourceList]

// Clients makes typed RTResource clients on one REST client, so that every
// namespace's client shares its connections and rate limiter.
type Clients struct {
	rest   rest.Interface
	params runtime.ParameterCodec
}

// New builds a REST client for gantry.dev/v1alpha1 from a copy of cfg,
// keeping cfg's rate limiter.
func New(cfg *rest.Config, scheme *runtime.Scheme) (*Clients, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gantryv1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("rtresource client: %w", err)
	}
	return &Clients{rest: rc, params: runtime.NewParameterCodec(scheme)}, nil
}

// Namespace returns the client for one namespace.
func (c *Clients) Namespace(ns string) *Client {
	return gentype.NewClientWithList[*gantryv1.RTResource, *gantryv1.RTResourceList](
		gantryv1.Resource, c.rest, c.params, ns,
		func() *gantryv1.RTResource { return &gantryv1.RTResource{} },
		func() *gantryv1.RTResourceList { return &gantryv1.RTResourceList{} })
}

// REST exposes the underlying REST client, for subresources such as scale.
func (c *Clients) REST() rest.Interface { return c.rest }
