package processnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The files an in-cluster pod of TestKnativeShapedPod reads.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// inClusterMain is a pod's program that checks what a Knative component
// needs of its node, printing one "name: value" line per finding: its own
// pod through client-go's in-cluster config (the token and CA at their
// mountPath, KUBERNETES_SERVICE_HOST/PORT, the API relay); a config map,
// secret and downward-API volume at their mountPaths (and that they are
// read-only, the emptyDir not), under $MOUNTS; the downward-API env; and $RESOLVE, a
// Service's name, through its hosts file, fetching / from it at $PORT.
func inClusterMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := rest.InClusterConfig()
	if err != nil {
		fmt.Println("in-cluster config:", err)
		return 1
	}
	fmt.Println("api host:", cfg.Host)
	ns, err := os.ReadFile(filepath.Join(saDir, "namespace"))
	if err != nil {
		fmt.Println("namespace file:", err)
		return 1
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Println("client:", err)
		return 1
	}
	self, err := kc.CoreV1().Pods(string(ns)).Get(ctx, os.Getenv("POD_NAME"), metav1.GetOptions{})
	if err != nil {
		fmt.Println("get own pod:", err)
		return 1
	}
	fmt.Println("own pod uid:", self.UID)
	mnt := os.Getenv("MOUNTS")
	for _, f := range []string{"cfg/greeting", "sec/password", "podinfo/labels", "podinfo/cpu-limit"} {
		b, err := os.ReadFile(filepath.Join(mnt, f))
		fmt.Printf("file %s: %q %v\n", f, b, err)
	}
	for _, d := range []string{"cfg", "scratch"} {
		err := os.WriteFile(filepath.Join(mnt, d, "x"), []byte("x"), 0o644)
		fmt.Printf("write %s: erofs=%v ok=%v\n", d, errors.Is(err, syscall.EROFS), err == nil)
	}
	for _, k := range []string{"POD_NAME", "POD_NAMESPACE", "POD_UID", "POD_IP", "POD_IPS", "HOST_IP", "NODE_NAME", "SA_NAME", "LABEL_APP", "ANNOTATION_NOTE", "MEM_REQUEST_MI"} {
		fmt.Printf("env %s: %s\n", k, os.Getenv(k))
	}
	name := os.Getenv("RESOLVE")
	var addrs []string
	for {
		if addrs, err = net.LookupHost(name); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Printf("resolve %s: %v %v\n", name, addrs, err)
	if err != nil {
		return 1
	}
	// The name is the Service's ClusterIP from the start; the proxy
	// forwards once the backend is ready, and closes connections before.
	var resp *http.Response
	for {
		resp, err = (&http.Client{Timeout: 10 * time.Second}).Get("http://" + net.JoinHostPort(name, os.Getenv("PORT")) + "/")
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		fmt.Println("fetch:", err)
		return 1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("fetch: %d %s\n", resp.StatusCode, strings.TrimSpace(string(b)))
	return 0
}
