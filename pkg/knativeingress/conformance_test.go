package knativeingress

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry.dev/gantry/pkg/localcluster"
)

// conformanceEnv names the folder hack/knative-conformance/run.sh
// fills: conformance.test (Knative's KIngress conformance suite) and
// images/<name> (its test images as programs). Without it the suite is
// not run.
const conformanceEnv = "GANTRY_KNATIVE_CONFORMANCE"

// conformanceRepo is the image repository the suite is told its test
// images are in; the process node maps each to its program.
const conformanceRepo = "dev.local/kni"

// conformanceImages maps the suite's test images to the programs the
// build made, for the process node (nil without conformanceEnv).
func conformanceImages() map[string][]string {
	dir := os.Getenv(conformanceEnv)
	if dir == "" {
		return nil
	}
	m := map[string][]string{}
	for _, name := range []string{"runtime", "timeout", "wsserver", "grpc-ping", "httpproxy", "retry"} {
		m[conformanceRepo+"/"+name+":latest"] = []string{filepath.Join(dir, "images", name)}
	}
	return m
}

// conformanceNodePort and conformanceTLSNodePort are the external
// listeners' ports during the suite (plain HTTP and HTTPS): the suite
// dials --ingressendpoint at the node port of the Service its public
// load balancer names, for the port of the URL (80 or 443), so each
// listener's port is its node port.
const (
	conformanceNodePort    = 31080
	conformanceTLSNodePort = 31443
)

// TestKnativeIngressConformance runs Knative's KIngress conformance suite
// against this ingress, when $GANTRY_KNATIVE_CONFORMANCE says where it
// is built (hack/knative-conformance/run.sh), and logs every test's
// result.
func TestKnativeIngressConformance(t *testing.T) {
	dir := os.Getenv(conformanceEnv)
	if dir == "" {
		t.Skip("$" + conformanceEnv + " is not set: hack/knative-conformance/run.sh builds and runs the suite")
	}
	e := setup(t)
	ctx := context.Background()
	for _, ns := range []string{"serving-tests", DefaultSystemNamespace} {
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// The Services the load balancers name: the public one a NodePort
	// at the external listeners' ports, as the suite dials them: port 80
	// plain HTTP, port 443 HTTPS.
	pub := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "gantry-ingress"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: conformanceNodePort},
			{Name: "https", Port: 443, NodePort: conformanceTLSNodePort}}}}
	if _, err := e.kube.CoreV1().Services(DefaultSystemNamespace).Create(ctx, pub, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The private one: the cluster-local listener on the node's bridge
	// address, where pods reach the host, named by a Service whose
	// EndpointSlice points there (the pods' hosts files name it so).
	c := localcluster.Shared(t)
	_, bridge := c.ProcessNodes()[0].Bridge()
	if err := e.privateLB(ctx, bridge.String()); err != nil {
		t.Fatal(err)
	}
	// Redirects name port 443, where the suite's clients reach HTTPS.
	s, err := StartListeners(Config{Kube: e.kube, Dynamic: e.dyn, HTTPSPort: 443}, Listeners{
		External: fmt.Sprintf("127.0.0.1:%d", conformanceNodePort),
		Local:    net.JoinHostPort(bridge.String(), "80"),
		HTTPS:    fmt.Sprintf("127.0.0.1:%d", conformanceTLSNodePort)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
	})
	run := cmp.Or(os.Getenv(conformanceEnv+"_RUN"), "TestIngressConformance")
	args := []string{"-test.v", "-test.run", run, "-test.timeout", "30m",
		"-kubeconfig", c.KubeconfigPath(), "-ingressendpoint", "127.0.0.1",
		"-ingressClass", Class, "-dockerrepo", conformanceRepo, "-enable-beta", "-enable-alpha"}
	cmd := exec.Command(filepath.Join(dir, "conformance.test"), args...)
	cmd.Dir = t.TempDir()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	log, _ := os.Create(filepath.Join(dir, "conformance.log"))
	defer log.Close()
	// The suite's own tests are TestIngressConformance's direct subtests
	// (names like dispatch/path hold a slash), four spaces in; their
	// subtests are further in.
	result := regexp.MustCompile(`^    --- (PASS|FAIL|SKIP): TestIngressConformance/(\S+)`)
	var summary []string
	counts := map[string]int{}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(log, line)
		if m := result.FindStringSubmatch(line); m != nil {
			summary = append(summary, m[1]+" "+m[2])
			counts[m[1]]++
		}
	}
	werr := cmd.Wait()
	slices.Sort(summary)
	t.Logf("conformance (log: %s): %d passed, %d failed, %d skipped:\n%s", filepath.Join(dir, "conformance.log"),
		counts["PASS"], counts["FAIL"], counts["SKIP"], strings.Join(summary, "\n"))
	if werr != nil {
		t.Errorf("conformance suite: %v", werr)
	}
}

// privateLB makes the Service knative-serving/gantry-ingress-local
// (DefaultPrivateLB) with an endpoint at addr, port 80.
func (e *env) privateLB(ctx context.Context, addr string) error {
	name := strings.SplitN(DefaultPrivateLB, ".", 2)[0]
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	if _, err := e.kube.CoreV1().Services(DefaultSystemNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ready, portName, port := true, "http", int32(80)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
	}
	if _, err := e.kube.DiscoveryV1().EndpointSlices(DefaultSystemNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
