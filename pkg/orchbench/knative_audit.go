package orchbench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry.dev/gantry/pkg/knativert"
)

// The paper measures each stage in the API server's audit log: the time
// the controller's own request reached the API server, from the scale-up
// trigger. A watch (the runs' stages) adds the write's processing and the
// watch's delivery to the benchmark's process, both shared with the
// other arm on a loaded machine; the audit log separates them. A Knative
// run on a control plane of its own turns it on with auditPolicy and
// reports both.

// auditPolicy logs only the writes the stages need: the KPA's /scale
// writes, the controllers' ReplicaSet and RTResource status writes, and
// pod creates (with their labels, to tell the revision); the floor
// responder's ConfigMap patches (with the patch, which names the trigger
// it answers: knative_floor.go); and the watches
// of the scale targets, whose ends name a watcher the API server cut off
// (auditWatchEnds).
var auditPolicy = []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
omitManagedFields: true
rules:
- level: Request
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["pods"]
- level: Metadata
  verbs: ["update", "patch"]
  resources:
  - group: "apps"
    resources: ["deployments/scale", "replicasets"]
  - group: "gantry.dev"
    resources: ["rtresources/scale", "rtresources/status"]
- level: Request
  verbs: ["patch"]
  resources:
  - group: ""
    resources: ["configmaps"]
- level: Metadata
  verbs: ["watch"]
  resources:
  - group: "apps"
    resources: ["deployments", "replicasets"]
  - group: "gantry.dev"
    resources: ["rtresources"]
- level: None
`)

// auditEvent is what the stages need of one audit event.
type auditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject *struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	} `json:"requestObject"`
	Received metav1.MicroTime `json:"requestReceivedTimestamp"`
	Done     metav1.MicroTime `json:"stageTimestamp"`
}

func (e *auditEvent) ok() bool {
	return e.ObjectRef != nil && e.ResponseStatus != nil && e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300
}

// auditReader reads the audit log's new lines of one namespace.
type auditReader struct {
	path string
	off  int64
}

// maxAuditRead bounds one read of the audit log.
const maxAuditRead = 256 << 20

// read returns the complete events appended since the last read, of
// namespace ns.
func (a *auditReader) read(ns string) []auditEvent {
	return a.scan([]byte(`"namespace":"`+ns+`"`), func(e *auditEvent) bool { return e.ObjectRef.Namespace == ns })
}

// readWatchEnds returns the watches that ended (stage ResponseComplete)
// since the last read, of any namespace.
func (a *auditReader) readWatchEnds() []auditEvent {
	return a.scan([]byte(`"verb":"watch"`), func(e *auditEvent) bool { return e.Verb == "watch" && e.Stage == "ResponseComplete" })
}

// scan returns the complete, successful events appended since the last
// scan whose line contains sub and which keep accepts.
func (a *auditReader) scan(sub []byte, keep func(*auditEvent) bool) []auditEvent {
	f, err := os.Open(a.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(a.off, io.SeekStart); err != nil {
		return nil
	}
	buf, _ := io.ReadAll(io.LimitReader(f, maxAuditRead))
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		buf = buf[:i+1]
	} else {
		buf = nil
	}
	a.off += int64(len(buf))
	var out []auditEvent
	for line := range bytes.Lines(buf) {
		if !bytes.Contains(line, sub) {
			continue
		}
		var e auditEvent
		if json.Unmarshal(line, &e) == nil && e.ok() && keep(&e) {
			out = append(out, e)
		}
	}
	return out
}

// auditStages times one trigger in the audit log: from the KPA's /scale
// write (its completion) to the controller's first write of the scale-up
// (vanilla: the deployment controller's write of the revision's
// ReplicaSet; Gantry: the RTResource's status, the processing mark),
// received, and to the completion of the pod creates it asked for. ok is
// false when the KPA's write is not in the log.
func auditStages(events []auditEvent, t *knTrigger, vanilla bool) (sp, pc float64, spOK, pcOK, ok bool) {
	scale := triggerEvent(events, t)
	if scale == nil {
		return 0, 0, false, false, false
	}
	t0, after := scale.Done.Time, scale.Received.Time
	ms := func(at time.Time) float64 { return max(0, float64(at.Sub(t0))/float64(time.Millisecond)) }
	var first time.Time
	var creates []time.Time
	for i := range events {
		e := &events[i]
		if !e.Received.After(after) {
			continue
		}
		if isProcessingWrite(e, t.target, vanilla) && (first.IsZero() || e.Received.Time.Before(first)) {
			first = e.Received.Time
		}
		if e.ObjectRef.Resource == "pods" && e.Verb == "create" && e.RequestObject != nil &&
			e.RequestObject.Metadata.Labels[knativert.RevisionLabel] == t.rev {
			creates = append(creates, e.Done.Time)
		}
	}
	if !first.IsZero() {
		sp, spOK = ms(first), true
	}
	slices.SortFunc(creates, func(a, b time.Time) int { return a.Compare(b) })
	if n := int(t.want - t.from); n > 0 && len(creates) >= n {
		pc, pcOK = ms(creates[n-1]), true
	}
	return sp, pc, spOK, pcOK, true
}

// isProcessingWrite is a controller's first write of a scale-up: the
// deployment controller's of the Deployment's ReplicaSet, or a status
// write of the RTResource by anyone but Knative.
func isProcessingWrite(e *auditEvent, target string, vanilla bool) bool {
	r := e.ObjectRef
	if vanilla {
		return r.Resource == "replicasets" && r.Subresource == "" && strings.HasPrefix(r.Name, target+"-") &&
			strings.Contains(e.User.Username, "deployment-controller")
	}
	return r.Resource == "rtresources" && r.Subresource == "status" && r.Name == target &&
		!strings.Contains(e.User.Username, "knative-serving")
}

// Where the audit stages' time goes, per trigger (auditParts): the API
// server's own time for the KPA's write and for the controllers' writes
// (each event's stageTimestamp minus its requestReceivedTimestamp), the
// benchmark's watch delivery of the KPA's write, and starts processing
// measured from the KPA's write's reception instead of its completion.
const (
	partTriggerAPIServer    = "trigger_apiserver"
	partTriggerToWatch      = "trigger_to_watch"
	partStartsFromReceived  = "starts_processing_from_received"
	partProcessingAPIServer = "processing_write_apiserver"
	partPodCreateAPIServer  = "pod_create_apiserver"
)

// AuditParts are auditParts' names in report order.
var AuditParts = []string{partTriggerAPIServer, partTriggerToWatch, partStartsFromReceived, partProcessingAPIServer, partPodCreateAPIServer}

// auditParts splits one trigger's audit stages into the parts above, in
// ms; a part that is not in the log is left out. trigger_to_watch is
// signed: a watch may deliver the write before its response is complete.
func auditParts(events []auditEvent, t *knTrigger, vanilla bool) map[string][]float64 {
	scale := triggerEvent(events, t)
	if scale == nil {
		return nil
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	out := map[string][]float64{
		partTriggerAPIServer: {ms(scale.Done.Sub(scale.Received.Time))},
		partTriggerToWatch:   {ms(t.at.Sub(scale.Done.Time))},
	}
	var first *auditEvent
	for i := range events {
		e := &events[i]
		if !e.Received.After(scale.Received.Time) {
			continue
		}
		if isProcessingWrite(e, t.target, vanilla) && (first == nil || e.Received.Before(&first.Received)) {
			first = e
		}
		if e.ObjectRef.Resource == "pods" && e.Verb == "create" && e.RequestObject != nil &&
			e.RequestObject.Metadata.Labels[knativert.RevisionLabel] == t.rev {
			out[partPodCreateAPIServer] = append(out[partPodCreateAPIServer], ms(e.Done.Sub(e.Received.Time)))
		}
	}
	if first != nil {
		out[partStartsFromReceived] = []float64{ms(first.Received.Sub(scale.Received.Time))}
		out[partProcessingAPIServer] = []float64{ms(first.Done.Sub(first.Received.Time))}
	}
	return out
}

// triggerEvent is the KPA's last /scale write of t's target received
// before the benchmark saw the trigger.
func triggerEvent(events []auditEvent, t *knTrigger) *auditEvent {
	var scale *auditEvent
	for i := range events {
		e := &events[i]
		if e.ObjectRef.Subresource == "scale" && e.ObjectRef.Name == t.target && !e.Received.After(t.at) &&
			(scale == nil || e.Received.After(scale.Received.Time)) {
			scale = e
		}
	}
	return scale
}

// auditWriters gives every logged write of the iteration's namespace its
// API server time, keyed "verb resource[/subresource] by user" (the user
// without system:serviceaccount:), so that the arms' writes compare.
func auditWriters(events []auditEvent) map[string][]float64 {
	out := map[string][]float64{}
	for i := range events {
		e := &events[i]
		res := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			res += "/" + e.ObjectRef.Subresource
		}
		key := e.Verb + " " + res + " by " + strings.TrimPrefix(e.User.Username, "system:serviceaccount:")
		out[key] = append(out[key], float64(e.Done.Sub(e.Received.Time))/float64(time.Millisecond))
	}
	return out
}

// A watch the API server's watch cache ends because its watcher does not
// take events fast enough ("Forcing ... watcher close due to
// unresponsiveness" in its log) ends before the timeoutSeconds its client
// asked for (client-go's reflectors ask for 5-10 min), and its audit
// event's ResponseComplete says who watched. The benchmark's watchers,
// the controllers' and Knative's all live for a whole arm, so a watch that
// ends within a case before its timeout was cut off (or failed).

// earlyMargin is how much sooner than its timeout a watch must end to
// count as cut off.
const earlyMargin = 5 * time.Second

// auditWatchEnds gives the lifetimes (ms) of the watches in events that
// ended before their timeoutSeconds, keyed "resource (namespace|all) by
// user [user agent]" (the user the request acts as, without
// system:serviceaccount:; the agent's program name).
func auditWatchEnds(events []auditEvent) map[string][]float64 {
	out := map[string][]float64{}
	for i := range events {
		e := &events[i]
		lived := e.Done.Sub(e.Received.Time)
		timeout, ok := watchTimeout(e.RequestURI)
		if !ok || lived >= timeout-earlyMargin {
			continue
		}
		out[watcherName(e)] = append(out[watcherName(e)], float64(lived)/float64(time.Millisecond))
	}
	return out
}

// watchTimeout reads a watch request's timeoutSeconds.
func watchTimeout(uri string) (time.Duration, bool) {
	u, err := url.Parse(uri)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(u.Query().Get("timeoutSeconds"))
	if err != nil || n <= 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// watcherName names a watch by what it watches and who asked.
func watcherName(e *auditEvent) string {
	scope := e.ObjectRef.Namespace
	if scope == "" {
		scope = "all"
	}
	user := e.User.Username
	if e.ImpersonatedUser != nil && e.ImpersonatedUser.Username != "" {
		user = e.ImpersonatedUser.Username
	}
	agent, _, _ := strings.Cut(e.UserAgent, " ")
	return fmt.Sprintf("%s (%s) by %s [%s]", e.ObjectRef.Resource, scope, strings.TrimPrefix(user, "system:serviceaccount:"), agent)
}
