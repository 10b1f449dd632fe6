// Package e2etest holds what the tests against a real control plane
// share: a namespace of the test's own and polling until the cluster gets
// where the test expects. It does not import localcluster, so that
// package's own tests can use it too.
package e2etest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

const (
	// Timeout is how long Eventually waits. It turns a hang into a
	// failure; it is not what a test asserts, so it is generous enough
	// for a loaded machine under -race.
	Timeout = 90 * time.Second
	// Interval is how often Eventually checks.
	Interval = 100 * time.Millisecond
)

// Eventually polls cond until it holds and fails the test if it does not
// within Timeout. A cond error is retried, not fatal: the cluster may be
// mid-change. The last one is reported if the wait times out.
func Eventually(t testing.TB, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	// Not t.Context(): that is done before the cleanups run, and a cleanup
	// may wait for the cluster too.
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, Interval, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

// Namespace creates a namespace for the test, deleted when it ends, and
// waits for its default service account, without which the
// ServiceAccount admission plugin rejects pods. It returns the name.
func Namespace(t testing.TB, kube kubernetes.Interface) string {
	t.Helper()
	name := NamespaceName(t.Name())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	Eventually(t, "the default service account in "+name, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	return name
}

// maxNamePrefix keeps a namespace name, suffix included, well inside the
// 63 characters of a DNS label, with room for names built from it.
const maxNamePrefix = 50

// NamespaceName turns a test name into a namespace name: a DNS label
// that says which test made it, with a suffix from the clock so that a
// rerun does not meet the previous run's namespace while it terminates.
func NamespaceName(test string) string {
	// Subtest names bring "/", "_" for spaces and whatever their authors
	// wrote; a label has only lower-case letters, digits and "-".
	name := strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
			return r
		case 'A' <= r && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, test)
	if len(name) > maxNamePrefix {
		name = name[:maxNamePrefix]
	}
	return strings.TrimRight(name, "-") + "-" + strconv.FormatInt(time.Now().UnixNano()%100000, 10)
}
