package kube

// Logs of a function's pods, read as kubectl logs reads them: through the
// API server's pods/log subresource, which asks the node's kubelet (a
// process node serves it from the runs it records, pkg/processnode). A pod
// that is gone took its output with it, as on any Kubernetes.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"gantry.dev/gantry/pkg/funclogs"
	"gantry.dev/gantry/pkg/stack"
)

// Bounds of a logs request.
const (
	// maxLogPods bounds the pods read at once.
	maxLogPods = stack.MaxInstances
	// maxReadLines bounds the lines one pod contributes to an answer that
	// does not follow, when no tail is asked: the gateway's own rings keep
	// as many.
	maxReadLines = funclogs.MaxLines
	// podPoll is how often a follow looks for pods that started since.
	podPoll = time.Second
)

// ErrNoFunction is returned by Logs for a function with no pods and no
// declaration here.
var ErrNoFunction = errors.New("function not found")

// Logs hands emit the lines of function ref's pods (NAME or
// NAME.NAMESPACE), as OpenFaaS's log provider on Kubernetes does: q.Tail
// last lines of all of them (0: up to maxReadLines a pod) at or after
// q.Since, of q.Instance's pod alone if set, oldest first. With follow,
// it then streams each pod's new lines as they come, pods that start
// meanwhile included, until ctx ends; a pod that goes ends its stream.
// emit is never called concurrently; an error from it ends Logs.
func (b *Backend) Logs(ctx context.Context, ref string, q funclogs.Query, follow bool, emit func(funclogs.Line) error) error {
	name, fns := stack.SplitRef(ref)
	ns, err := b.kubeNamespace(fns)
	if err != nil {
		return err
	}
	pods, err := b.functionPods(ctx, ns, name, q.Instance)
	if err != nil {
		return err
	}
	if !follow {
		return b.logsOnce(ctx, ns, ref, pods, q, emit)
	}
	return b.followLogs(ctx, ns, name, ref, pods, q, emit)
}

// functionPods lists the function's pods (one, with instance), oldest
// first.
func (b *Backend) functionPods(ctx context.Context, ns, name, instance string) ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := b.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: LabelFunction + "=" + name + "," + LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of %s in namespace %s: %w", name, ns, err)
	}
	pods := list.Items
	if instance != "" {
		pods = slices.DeleteFunc(pods, func(p corev1.Pod) bool { return p.Name != instance })
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	if len(pods) > maxLogPods {
		pods = pods[len(pods)-maxLogPods:]
	}
	return pods, nil
}

func logOptions(q funclogs.Query, follow bool, tail int) *corev1.PodLogOptions {
	o := &corev1.PodLogOptions{Container: ContainerName, Timestamps: true, Follow: follow}
	if tail > 0 {
		o.TailLines = ptr.To(int64(tail))
	}
	if !q.Since.IsZero() {
		o.SinceTime = &metav1.Time{Time: q.Since}
	}
	return o
}

// logsOnce reads every pod's lines, merges them by time and keeps the last
// q.Tail.
func (b *Backend) logsOnce(ctx context.Context, ns, ref string, pods []corev1.Pod, q funclogs.Query, emit func(funclogs.Line) error) error {
	tail := q.Tail
	if tail <= 0 || tail > maxReadLines {
		tail = maxReadLines
	}
	var all []funclogs.Line
	for _, p := range pods {
		if !podStarted(&p) {
			continue
		}
		err := b.readPodLog(ctx, ns, ref, p.Name, logOptions(q, false, tail), func(l funclogs.Line) error {
			all = append(all, l)
			return nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	slices.SortStableFunc(all, func(a, b funclogs.Line) int { return a.Time.Compare(b.Time) })
	if q.Tail > 0 && len(all) > q.Tail {
		all = all[len(all)-q.Tail:]
	}
	for _, l := range all {
		if err := emit(l); err != nil {
			return err
		}
	}
	return nil
}

// podStarted reports whether the pod's container has run, so that its
// node has logs to give; the API server answers 400 before that.
func podStarted(p *corev1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == ContainerName {
			return c.State.Running != nil || c.State.Terminated != nil || c.LastTerminationState.Terminated != nil
		}
	}
	return false
}

// followLogs streams every pod's lines, one goroutine a pod, and looks for
// new pods every podPoll.
func (b *Backend) followLogs(ctx context.Context, ns, name, ref string, pods []corev1.Pod, q funclogs.Query, emit func(funclogs.Line) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex // serialises emit and guards emitErr
		emitErr error
		wg      sync.WaitGroup
	)
	defer wg.Wait()
	send := func(l funclogs.Line) error {
		mu.Lock()
		defer mu.Unlock()
		if emitErr != nil {
			return emitErr
		}
		if emitErr = emit(l); emitErr != nil {
			cancel()
		}
		return emitErr
	}
	streaming := map[string]bool{}
	for first := true; ; first = false {
		for _, p := range pods {
			if streaming[p.Name] || !podStarted(&p) || len(streaming) >= maxLogPods {
				continue
			}
			streaming[p.Name] = true
			opts := logOptions(q, true, q.Tail)
			if !first {
				// A pod that started while following: all its lines.
				opts.TailLines = nil
			}
			wg.Add(1)
			go func(pod string) {
				defer wg.Done()
				_ = b.readPodLog(ctx, ns, ref, pod, opts, send)
			}(p.Name)
		}
		t := time.NewTimer(podPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			mu.Lock()
			defer mu.Unlock()
			return emitErr
		case <-t.C:
		}
		var err error
		if pods, err = b.functionPods(ctx, ns, name, q.Instance); err != nil && ctx.Err() == nil {
			b.opts.Logger.Warn("following logs: listing pods", "function", ref, "err", err)
		}
	}
}

// readPodLog reads one pod's log stream to its end, line by line.
func (b *Backend) readPodLog(ctx context.Context, ns, ref, pod string, opts *corev1.PodLogOptions, emit func(funclogs.Line) error) error {
	rc, err := b.kube.CoreV1().Pods(ns).GetLogs(pod, opts).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of pod %s: %w", pod, err)
	}
	defer rc.Close()
	return scanPodLog(rc, func(t time.Time, text string) error {
		return emit(funclogs.Line{Function: ref, Instance: pod, Time: t, Text: text})
	})
}

// scanPodLog reads "TIMESTAMP TEXT" lines (timestamps: true), cutting a
// line at funclogs.MaxLine as the gateway's own rings do.
func scanPodLog(r io.Reader, emit func(time.Time, string) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		cut := errors.Is(err, bufio.ErrBufferFull)
		if len(line) > 0 {
			if e := emitPodLine(string(line), cut, emit); e != nil {
				return e
			}
		}
		for cut {
			// Drop the rest of an overlong line.
			_, err = br.ReadSlice('\n')
			cut = errors.Is(err, bufio.ErrBufferFull)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func emitPodLine(line string, cut bool, emit func(time.Time, string) error) error {
	line = strings.TrimRight(line, "\r\n")
	ts, text, ok := strings.Cut(line, " ")
	t, err := time.Parse(time.RFC3339Nano, ts)
	if !ok || err != nil {
		// Not stamped: a line as it came, at the time it was read.
		t, text = time.Now(), line
	}
	if len(text) > funclogs.MaxLine {
		text, cut = text[:funclogs.MaxLine], true
	}
	if cut {
		text += funclogs.Truncated
	}
	return emit(t, text)
}
