package orchbench

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// auditLine is one ResponseComplete event as kube-apiserver writes it.
func auditLine(verb, user, resource, sub, name string, code int, labels string, recv, done time.Time) string {
	obj := ""
	if labels != "" {
		obj = `,"requestObject":{"metadata":{"labels":` + labels + `}}`
	}
	return `{"kind":"Event","stage":"ResponseComplete","verb":"` + verb + `","user":{"username":"` + user + `"},` +
		`"objectRef":{"resource":"` + resource + `","namespace":"svc","name":"` + name + `","subresource":"` + sub + `"},` +
		`"responseStatus":{"code":` + itoa(code) + `}` + obj +
		`,"requestReceivedTimestamp":"` + recv.UTC().Format(metav1.RFC3339Micro) + `","stageTimestamp":"` + done.UTC().Format(metav1.RFC3339Micro) + `"}` + "\n"
}

func itoa(n int) string {
	return string(rune('0'+n/100)) + string(rune('0'+n/10%10)) + string(rune('0'+n%10))
}

// The audit log times a trigger from the KPA's /scale write's completion
// to the controller's first write of the scale-up (received) and to the
// completion of the pod creates it asked for; writes before the KPA's, of
// other revisions, failed ones and another namespace's are not counted,
// and a half-written last line waits for the next read.
func TestAuditStagesTimeTheControllersRequestsFromTheKPAsWrite(t *testing.T) {
	base := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	const rev, dep = "svc-01-00001", "svc-01-00001-deployment"
	revLabel := `{"serving.knative.dev/revision":"` + rev + `"}`
	other := `{"serving.knative.dev/revision":"svc-02-00001"}`
	dc := "system:serviceaccount:kube-system:deployment-controller"
	rc := "system:serviceaccount:kube-system:replicaset-controller"
	log := auditLine("update", dc, "replicasets", "", dep+"-abc", 200, "", at(-500), at(-490)) + // an earlier sync
		auditLine("patch", "system:serviceaccount:knative-serving:controller", "deployments", "scale", dep, 200, "", at(0), at(100)) +
		auditLine("update", dc, "replicasets", "", dep+"-abc", 409, "", at(120), at(130)) + // a conflict is no write
		auditLine("update", dc, "replicasets", "", dep+"-abc", 200, "", at(150), at(400)) +
		auditLine("create", rc, "pods", "", "", 201, other, at(200), at(300)) +
		auditLine("create", rc, "pods", "", "", 201, revLabel, at(450), at(700)) +
		auditLine("create", rc, "pods", "", "", 201, revLabel, at(460), at(650)) +
		`{"objectRef":{"namespace":"other"}}` + "\n" + `{"kind":"Event","verb":"create","objectRef":{"names`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &auditReader{path: path}
	events := r.read("svc")
	if len(events) != 6 {
		t.Fatalf("%d events of namespace svc, want the 6 complete successful ones", len(events))
	}
	trig := &knTrigger{rev: rev, target: dep, at: at(180), from: 0, want: 2}
	sp, pc, spOK, pcOK, ok := auditStages(events, trig, true)
	if !ok || !spOK || !pcOK {
		t.Fatalf("stages not found: %v %v %v", ok, spOK, pcOK)
	}
	// From the KPA's write's completion (100): the ReplicaSet write was
	// received at 150, the second of the revision's pods done at 700.
	if sp != 50 || pc != 600 {
		t.Errorf("starts processing %v ms, pods created %v ms; want 50 and 600", sp, pc)
	}
	if _, _, _, _, ok := auditStages(events, &knTrigger{rev: rev, target: "other-deployment", at: at(180), want: 1}, true); ok {
		t.Error("a trigger without a /scale write in the log was timed")
	}
	// Gantry: the processing mark is the RTResource's status write.
	gantry := auditLine("patch", "system:serviceaccount:knative-serving:controller", "rtresources", "scale", rev, 200, "", at(0), at(80)) +
		auditLine("update", "system:serviceaccount:knative-serving:controller", "rtresources", "status", rev, 200, "", at(85), at(90)) +
		auditLine("update", "gantry-admin", "rtresources", "status", rev, 200, "", at(95), at(900))
	if err := os.WriteFile(path, []byte(log[:len(log)-len(`{"kind":"Event","verb":"create","objectRef":{"names`)]+gantry), 0o600); err != nil {
		t.Fatal(err)
	}
	events = r.read("svc")
	if len(events) != 3 {
		t.Fatalf("the second read got %d events, want the 3 appended", len(events))
	}
	sp, _, spOK, pcOK, ok = auditStages(events, &knTrigger{rev: rev, target: rev, at: at(100), want: 1}, false)
	if !ok || !spOK || pcOK || sp != 15 {
		t.Errorf("gantry: starts processing %v ms (found %v), pods created found %v; want 15 ms and no pods", sp, spOK, pcOK)
	}
}

// The audit parts split a trigger's stages: the KPA's write's own time in
// the API server, the benchmark's watch after its completion, starts
// processing from its reception, the controller's first write's own time
// and each pod create's; every write is listed by verb, resource and
// user without system:serviceaccount:.
func TestAuditPartsSplitTheStagesAndListEveryWriter(t *testing.T) {
	base := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	const rev = "svc-01-00001"
	revLabel := `{"serving.knative.dev/revision":"` + rev + `"}`
	kpa := "system:serviceaccount:knative-serving:controller"
	ctl := "system:serviceaccount:gantry-system:gantry-controller"
	log := auditLine("patch", kpa, "rtresources", "scale", rev, 200, "", at(0), at(90)) +
		auditLine("update", ctl, "rtresources", "status", rev, 200, "", at(130), at(250)) +
		auditLine("update", ctl, "rtresources", "status", rev, 200, "", at(300), at(310)) + // a later write
		auditLine("create", ctl, "pods", "", "", 201, revLabel, at(131), at(241)) +
		auditLine("create", ctl, "pods", "", "", 201, revLabel, at(132), at(262))
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	events := (&auditReader{path: path}).read("svc")
	parts := auditParts(events, &knTrigger{rev: rev, target: rev, at: at(125), want: 2}, false)
	want := map[string][]float64{
		partTriggerAPIServer: {90}, partTriggerToWatch: {35}, partStartsFromReceived: {130},
		partProcessingAPIServer: {120}, partPodCreateAPIServer: {110, 130},
	}
	for name, w := range want {
		if !slices.Equal(parts[name], w) {
			t.Errorf("%s = %v, want %v", name, parts[name], w)
		}
	}
	if len(parts) != len(want) {
		t.Errorf("parts %v, want exactly %v", parts, want)
	}
	if p := auditParts(events, &knTrigger{rev: rev, target: "other", at: at(125)}, false); p != nil {
		t.Errorf("a trigger without its /scale write got parts %v", p)
	}
	writers := auditWriters(events)
	if got := writers["update rtresources/status by gantry-system:gantry-controller"]; !slices.Equal(got, []float64{120, 10}) {
		t.Errorf("the controller's status writes %v, want [120 10]", got)
	}
	if got := writers["patch rtresources/scale by knative-serving:controller"]; !slices.Equal(got, []float64{90}) {
		t.Errorf("the KPA's write %v, want [90]", got)
	}
	if len(writers) != 3 {
		t.Errorf("writers %v, want 3 keys", writers)
	}
}

// A watch that ends well before the timeout its client asked for is named
// by what it watched and who asked; one that ran out its timeout, one
// still open (ResponseStarted) and other verbs are not.
func TestAuditWatchEndsNameTheWatchersCutOff(t *testing.T) {
	base := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	ts := func(s float64) string {
		return base.Add(time.Duration(s * float64(time.Second))).UTC().Format(metav1.RFC3339Micro)
	}
	watch := func(stage, ns, user, imp, agent string, timeout int, recv, done float64) string {
		ref := `{"resource":"rtresources","apiGroup":"gantry.dev"`
		uri := "/apis/gantry.dev/v1alpha1/rtresources?watch=true&timeoutSeconds=" + strconv.Itoa(timeout)
		if ns != "" {
			ref += `,"namespace":"` + ns + `"`
			uri = "/apis/gantry.dev/v1alpha1/namespaces/" + ns + "/rtresources?allowWatchBookmarks=true&timeoutSeconds=" + strconv.Itoa(timeout) + "&watch=true"
		}
		impersonated := ""
		if imp != "" {
			impersonated = `,"impersonatedUser":{"username":"` + imp + `"}`
		}
		return `{"kind":"Event","stage":"` + stage + `","verb":"watch","requestURI":"` + uri + `","userAgent":"` + agent + `",` +
			`"user":{"username":"` + user + `"}` + impersonated + `,"objectRef":` + ref + `},"responseStatus":{"code":200},` +
			`"requestReceivedTimestamp":"` + ts(recv) + `","stageTimestamp":"` + ts(done) + `"}` + "\n"
	}
	log := watch("ResponseComplete", "", "system:serviceaccount:knative-serving:controller", "", "autoscaler/v0.0.0 (linux/amd64) kubernetes/$Format", 400, 0, 12.5) +
		watch("ResponseComplete", "", "gantry-admin", "system:serviceaccount:gantry-system:gantry-controller", "gantry/v0 (linux/amd64)", 300, 1, 3) +
		watch("ResponseComplete", "svc", "admin", "", "gantry", 500, 0, 497) + // its timeout ran out
		watch("ResponseStarted", "svc", "admin", "", "gantry", 500, 0, 0.1) +
		auditLine("update", "gantry-admin", "rtresources", "status", "x", 200, "", base, base)
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got := auditWatchEnds((&auditReader{path: path}).readWatchEnds())
	want := map[string][]float64{
		"rtresources (all) by knative-serving:controller [autoscaler/v0.0.0]": {12500},
		"rtresources (all) by gantry-system:gantry-controller [gantry/v0]":    {2000},
	}
	if len(got) != len(want) {
		t.Fatalf("watchers cut off: %v, want %v", got, want)
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
}
