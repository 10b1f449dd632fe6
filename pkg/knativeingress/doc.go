// Package knativeingress makes Gantry a Knative networking layer: it
// reconciles Knative's KIngress (networking.internal.knative.dev/v1alpha1
// Ingress) of the class gantry.ingress.networking.knative.dev and serves
// it. `gantry serve --knative-ingress` runs it beside the gateway.
//
// # Routing
//
// Every change to an Ingress or to config-network rebuilds one routing
// table from all Ingresses of the class (the annotation
// networking.knative.dev/ingress.class, else config-network's
// ingress-class) and swaps it in atomically; a request is routed by one
// table from start to end, so updates drop nothing. A request matches the
// first path (a literal prefix, plus exact header matches) of the rules
// naming its Host (lower case, port stripped), then of the rules without
// hosts; older Ingresses come first. The path's appendHeaders are set,
// one split is chosen by its percent, its appendHeaders are set too, the
// Host becomes rewriteHost if the path has one, and the request goes to
// a ready endpoint of the split's Service port, round robin: the port is
// found on the Service by number or name and its endpoints in the
// EndpointSlices labelled with the Service's name (there is no
// kube-proxy, so ClusterIPs are never dialled). A port whose appProtocol
// is kubernetes.io/h2c (or named http2 or h2c, Knative's names) is
// spoken to in HTTP/2 without TLS; others in HTTP/1.1, websockets
// included. Clients may speak HTTP/1.1 or h2c.
//
// An ExternalName Service as a backend is taken to name this ingress's
// own load balancer, as the ones Knative makes for DomainMapping and
// rewriteHost do: the request is routed once more, by the cluster-local
// table under its (rewritten) Host.
//
// Visibility: the external listener (External) serves only ExternalIP
// rules and answers 404 for a cluster-local host; the cluster-local
// listener (Local) serves every rule. A cluster-local host
// name.ns.svc.cluster.local is also served as name.ns.svc and name.ns.
//
// # TLS and httpOption
//
// With an HTTPS listener (Listeners.HTTPS; Config.HTTPSPort is the port
// clients reach it at), the ExternalIP rules are also served over TLS,
// HTTP/2 and HTTP/1.1 offered to clients (backends are spoken to as over
// plain HTTP). Each spec.tls entry puts the key pair of its Secret (type
// kubernetes.io/tls, tls.crt and tls.key; in secretNamespace, else the
// Ingress's namespace) in the table for its hosts, which must be hosts of
// the Ingress's ExternalIP rules (none: all of them), and the certificate
// must be valid for each. The listener picks the certificate by the
// client's server name (SNI); a name without one fails the handshake (no
// default certificate), and a request whose Host the connection's
// certificate does not serve is answered 421. Secrets of type
// kubernetes.io/tls are watched: a rotated Secret is served on the next
// connection, without a restart. A missing Secret (reason
// TLSSecretMissing) or one without a usable key pair for the hosts
// (TLSSecretInvalid) leaves the Ingress unrouted and not Ready, with the
// Secret and the error in the message; nothing falls back to another
// certificate.
//
// httpOption Enabled (or unset) serves plain HTTP; Redirected answers
// the ExternalIP rules' requests on the external plain-HTTP listener with
// 301 to the same host and request URI over https (at HTTPSPort, left out
// when 443), as Knative's Envoy-based ingresses do for external
// visibility; the cluster-local listener serves in-cluster clients
// without redirecting. Without an HTTPS listener an Ingress with spec.tls
// or Redirected is refused (NotSupported).
//
// Answers of the ingress itself: 404 with no matching rule, 503 with
// Retry-After when the Service, its port or a ready endpoint is missing,
// 502 when the endpoint fails, 504 past Config.Timeout.
//
// # Status
//
// After the swap, each Ingress gets the status Knative's Route waits for
// (Ingress.IsReady: observedGeneration equal to the generation and Ready
// true): LoadBalancerReady, NetworkConfigured and Ready true, and
// publicLoadBalancer / privateLoadBalancer set from the configured
// addresses (Knative's Route builds its placeholder Service from the
// private one; clients find the HTTPS listener at port 443 of the
// Service the public one names, the only TLS port Knative's API knows).
// An Ingress this package cannot serve (splits not adding up to 100, bad
// names, TLS without an HTTPS listener, an unknown httpOption) is not
// routed, and NetworkConfigured and Ready are False with the reason
// NotSupported (or the TLS Secret's reason) and the error as message.
//
// # Probes
//
// Knative Serving v0.50 does not probe third-party ingresses: the prober
// in knative.dev/networking pkg/status is a library each networking layer
// uses against its own proxies, to learn when a configuration reached
// them. Here the table is in this process, so an Ingress is Ready once
// the table that routes it is swapped in. The probe contract still holds
// for whoever probes: a request with K-Network-Hash: override gets that
// header replaced by the hash of the Ingress version routing it (Hash,
// Knative's ComputeHash), which Knative's probe handlers echo back.
package knativeingress
