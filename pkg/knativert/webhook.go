package knativert

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// WebhookPath is where the webhook serves AdmissionReviews.
const WebhookPath = "/mutate"

// maxReviewBytes bounds an AdmissionReview body. The apiserver sends the
// object (at most about 1.5 MiB in etcd) and, on update, the old one too.
const maxReviewBytes = 4 << 20

// revisionInfo is what the webhook and the reconciler read of a Revision.
type revisionInfo struct {
	UID         string
	APIVersion  string
	Annotations map[string]string
}

// revisionGetter finds a Revision; found is false if it does not exist.
type revisionGetter func(ctx context.Context, ns, name string) (info revisionInfo, found bool, err error)

// ownerGetter returns the UID of the controller of an RTResource ("" for
// none); found is false if there is no such RTResource.
type ownerGetter func(ctx context.Context, ns, name string) (controllerUID string, found bool, err error)

// Webhook mutates the PodAutoscalers and Deployments Knative creates for
// critical Revisions. It never rejects an object for what it is; it
// refuses one only when it cannot tell whether the Revision is critical
// (the Revision could not be read), so a critical Revision is never
// served by a Deployment by accident. Knative retries the create.
type Webhook struct {
	revisions revisionGetter
	rtOwner   ownerGetter
	log       *slog.Logger
}

func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(rw, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(rw, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	if err != nil {
		http.Error(rw, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxReviewBytes {
		http.Error(rw, fmt.Sprintf("AdmissionReview larger than %d bytes", maxReviewBytes), http.StatusRequestEntityTooLarge)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(rw, "decode AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if review.Request == nil {
		http.Error(rw, "AdmissionReview without a request", http.StatusBadRequest)
		return
	}
	resp := w.admit(r.Context(), review.Request)
	resp.UID = review.Request.UID
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = admissionv1.SchemeGroupVersion.String(), "AdmissionReview"
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(out)
}

// admit decides one request. Anything but a create or update of a
// PodAutoscaler or a create of a Deployment passes unchanged.
func (w *Webhook) admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var (
		patch []jsonPatchOp
		err   error
	)
	switch {
	case req.Resource.Group == PodAutoscalerGVR.Group && req.Resource.Resource == PodAutoscalerGVR.Resource && req.SubResource == "" &&
		(req.Operation == admissionv1.Create || req.Operation == admissionv1.Update):
		patch, err = w.podAutoscalerPatch(ctx, req)
	case req.Resource.Group == "apps" && req.Resource.Resource == "deployments" && req.SubResource == "" &&
		req.Operation == admissionv1.Create:
		patch, err = w.deploymentPatch(ctx, req)
	}
	if err != nil {
		w.log.Warn("knative webhook: refused", "resource", req.Resource.Resource, "namespace", req.Namespace, "name", req.Name, "err", err)
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
			Message: "gantry: " + err.Error()}}
	}
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if len(patch) > 0 {
		body, err := json.Marshal(patch)
		if err != nil {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}}
		}
		resp.Patch, resp.PatchType = body, ptr.To(admissionv1.PatchTypeJSONPatch)
	}
	return resp
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// critical finds the Revision that controls an object and says whether it
// is critical. An object no Revision controls, or whose Revision is gone
// or is another incarnation, is not Gantry's business.
func (w *Webhook) critical(ctx context.Context, ns string, refs []metav1.OwnerReference) (string, bool, error) {
	name, uid := revisionOwner(refs)
	if name == "" {
		return "", false, nil
	}
	rev, found, err := w.revisions(ctx, ns, name)
	if err != nil {
		return "", false, fmt.Errorf("read Revision %s/%s: %w", ns, name, err)
	}
	if !found || rev.UID != uid {
		return "", false, nil
	}
	return name, Critical(rev.Annotations), nil
}

// podAutoscalerPatch points a critical Revision's PodAutoscaler at its
// RTResource. Knative's revision reconciler writes scaleTargetRef back to
// the Deployment on every update it makes; this turns the field back, so
// the update stores what is already stored and the apiserver sends no
// watch event: no loop.
func (w *Webhook) podAutoscalerPatch(ctx context.Context, req *admissionv1.AdmissionRequest) ([]jsonPatchOp, error) {
	pa := &unstructured.Unstructured{}
	if err := json.Unmarshal(req.Object.Raw, &pa.Object); err != nil || pa.Object == nil {
		return nil, fmt.Errorf("decode PodAutoscaler: %v", err)
	}
	rev, critical, err := w.critical(ctx, req.Namespace, pa.GetOwnerReferences())
	if err != nil || !critical {
		return nil, err
	}
	// Never point the KPA at someone else's RTResource of the same name:
	// it would scale that one. Refused, the PodAutoscaler's create fails
	// and Knative shows the reason on the Revision.
	_, revUID := revisionOwner(pa.GetOwnerReferences())
	owner, found, err := w.rtOwner(ctx, req.Namespace, RTName(rev))
	if err != nil {
		return nil, fmt.Errorf("read RTResource %s/%s: %w", req.Namespace, RTName(rev), err)
	}
	if found && owner != revUID {
		return nil, fmt.Errorf("RTResource %s/%s exists and is not controlled by Revision %s; delete or rename it to let the Revision be served by an RTResource",
			req.Namespace, RTName(rev), rev)
	}
	if _, ok := pa.Object["spec"].(map[string]any); !ok {
		return nil, nil // Knative's own validation refuses it
	}
	want := ScaleTargetRef(rev)
	have, _, _ := unstructured.NestedStringMap(pa.Object, "spec", "scaleTargetRef")
	if have["apiVersion"] == want["apiVersion"] && have["kind"] == want["kind"] && have["name"] == want["name"] && len(have) == 3 {
		return nil, nil
	}
	return []jsonPatchOp{{Op: "add", Path: "/spec/scaleTargetRef", Value: want}}, nil
}

// deploymentPatch creates a critical Revision's Deployment with 0
// replicas and notes the replicas Knative asked for (its initial scale),
// which the RTResource starts with. Knative keeps a Deployment's replicas
// when it updates it, so create is the only operation to mutate.
func (w *Webhook) deploymentPatch(ctx context.Context, req *admissionv1.AdmissionRequest) ([]jsonPatchOp, error) {
	var dep appsv1.Deployment
	if err := json.Unmarshal(req.Object.Raw, &dep); err != nil {
		return nil, fmt.Errorf("decode Deployment: %w", err)
	}
	_, critical, err := w.critical(ctx, req.Namespace, dep.OwnerReferences)
	if err != nil || !critical {
		return nil, err
	}
	asked := int32(1) // a Deployment's default
	if dep.Spec.Replicas != nil {
		asked = *dep.Spec.Replicas
	}
	if asked == 0 {
		return nil, nil
	}
	ops := []jsonPatchOp{{Op: "add", Path: "/spec/replicas", Value: 0}}
	note := strconv.Itoa(int(asked))
	if dep.Annotations == nil {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{InitialReplicasAnnotation: note}})
	} else {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + escapePointer(InitialReplicasAnnotation), Value: note})
	}
	return ops, nil
}

// escapePointer escapes a JSON Pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
