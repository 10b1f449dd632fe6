package orchbench

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"slices"
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
// pod creates (with their labels, to tell the revision).
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
- level: None
`)

// auditEvent is what the stages need of one audit event.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
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
			Labels map[string]string `json:"labels"`
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
		if !bytes.Contains(line, []byte(`"namespace":"`+ns+`"`)) {
			continue
		}
		var e auditEvent
		if json.Unmarshal(line, &e) == nil && e.ok() && e.ObjectRef.Namespace == ns {
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
	var scale *auditEvent
	for i := range events {
		e := &events[i]
		if e.ObjectRef.Subresource == "scale" && e.ObjectRef.Name == t.target && !e.Received.After(t.at) &&
			(scale == nil || e.Received.After(scale.Received.Time)) {
			scale = e
		}
	}
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
