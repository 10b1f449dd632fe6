package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// CriticalityAnnotation is Knative's annotation for a revision's criticality.
// It sets the criticality when spec.criticality is unset, so a Knative
// revision template can carry it unchanged.
const CriticalityAnnotation = "autoscaling.knative.dev/application-criticality-level"

// Criticality bounds. Higher is more critical everywhere in Gantry: queue
// order, worker priority and client-side request order.
const (
	MinCriticality = 0
	MaxCriticality = 99
)

// Labels the controller puts on every pod it creates.
const (
	// TemplateHashLabel tells pods of the current template from old ones
	// during a rollout.
	TemplateHashLabel = "gantry.dev/template-hash"
	// OwnerLabel names the owning RTResource; the controller's pod cache
	// watches only pods that carry it.
	OwnerLabel = "gantry.dev/rtresource"
)

// Condition types set on an RTResource.
const (
	// ConditionReady is True when every desired replica is ready.
	ConditionReady = "Ready"
	// ConditionProgressing is True from the first status write after a new
	// generation until the pods match the spec.
	ConditionProgressing = "Progressing"
	// ConditionReplicaFailure is True while pods cannot be created or
	// deleted (reason FailedCreate or FailedDelete, the API error as the
	// message), as on a ReplicaSet; it is removed once they can.
	ConditionReplicaFailure = "ReplicaFailure"
)

// StrategyType says how pods are replaced when the template changes.
// +kubebuilder:validation:Enum=Recreate;RollingUpdate
type StrategyType string

const (
	// RecreateStrategy deletes every old pod before creating new ones.
	RecreateStrategy StrategyType = "Recreate"
	// RollingUpdateStrategy replaces pods gradually within surge and
	// unavailability bounds.
	RollingUpdateStrategy StrategyType = "RollingUpdate"
)

// Strategy describes how a template change is rolled out.
// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate) || self.type == 'RollingUpdate'",message="rollingUpdate may only be set when type is RollingUpdate"
type Strategy struct {
	// Type is Recreate or RollingUpdate (the default).
	// +kubebuilder:default=RollingUpdate
	// +optional
	Type StrategyType `json:"type,omitempty"`
	// RollingUpdate bounds a rolling update.
	// +optional
	RollingUpdate *RollingUpdate `json:"rollingUpdate,omitempty"`
}

// RollingUpdate bounds how far a rollout may go above or below the desired
// replica count. Percentages are of spec.replicas, as for a Deployment.
// Both bounds at 0 are refused, as a Deployment refuses them: no pod could
// ever be replaced.
// +kubebuilder:validation:XValidation:rule="!has(self.maxSurge) || !has(self.maxUnavailable) || !(string(self.maxSurge) in ['0', '0%']) || !(string(self.maxUnavailable) in ['0', '0%'])",message="maxSurge and maxUnavailable may not both be 0"
type RollingUpdate struct {
	// MaxSurge is how many pods may exist above spec.replicas (default 25%,
	// rounded up).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]{1,9}%$')",message="maxSurge must be a non-negative integer or a percentage such as 25%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
	// MaxUnavailable is how many desired pods may be unavailable (default
	// 25%, rounded down). If both bounds resolve to 0, one pod may be
	// unavailable so the rollout can make progress.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="maxUnavailable must be a non-negative integer or a percentage from 0% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// RTResourceSpec is the desired state of an RTResource. Its shape is
// Knative's PodScalable duck type (replicas, selector, template) plus a
// criticality.
// +kubebuilder:validation:XValidation:rule="!has(self.selector.matchLabels) || self.selector.matchLabels.all(k, has(self.template.metadata) && has(self.template.metadata.labels) && k in self.template.metadata.labels && self.template.metadata.labels[k] == self.selector.matchLabels[k])",message="selector.matchLabels must match the template's labels"
// +kubebuilder:validation:XValidation:rule="!has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, e.operator == 'In' ? (has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels && has(e.values) && self.template.metadata.labels[e.key] in e.values) : e.operator == 'NotIn' ? (!has(self.template.metadata) || !has(self.template.metadata.labels) || !(e.key in self.template.metadata.labels) || !has(e.values) || !(self.template.metadata.labels[e.key] in e.values)) : e.operator == 'Exists' ? (has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels) : e.operator == 'DoesNotExist' ? (!has(self.template.metadata) || !has(self.template.metadata.labels) || !(e.key in self.template.metadata.labels)) : false)",message="selector.matchExpressions must match the template's labels"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec) || !has(self.template.spec.activeDeadlineSeconds)",message="template.spec.activeDeadlineSeconds is not supported: pods that run out of it fail and are replaced, as a Deployment refuses it"
// +kubebuilder:validation:XValidation:rule="has(self.template.spec) && size(self.template.spec.containers) > 0",message="template.spec.containers must name at least one container"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec) || !has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy == 'Always'",message="template.spec.restartPolicy must be Always (the default): the controller replaces pods that exit, as a Deployment does"
// +kubebuilder:validation:XValidation:rule="!has(self.template.metadata) || !has(self.template.metadata.annotations) || !('autoscaling.knative.dev/application-criticality-level' in self.template.metadata.annotations) || self.template.metadata.annotations['autoscaling.knative.dev/application-criticality-level'].trim().matches('^[+]?0*[0-9]{1,2}$')",message="the template's annotation autoscaling.knative.dev/application-criticality-level must be an integer from 0 to 99"
type RTResourceSpec struct {
	// Replicas is the desired number of pods.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Criticality orders this object's orchestration work against others:
	// 0 is least and 99 most critical. When unset, the annotation
	// autoscaling.knative.dev/application-criticality-level on the object or
	// on its template is used, else 0.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=99
	// +optional
	Criticality *int32 `json:"criticality,omitempty"`

	// Selector picks the pods this object owns. It must match the
	// template's labels, must not be empty, and cannot change.
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="selector must not be empty"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="selector is immutable"
	Selector LabelSelector `json:"selector"`

	// Template is the pod that will be created.
	Template corev1.PodTemplateSpec `json:"template"`

	// Strategy says how a template change is rolled out.
	// +kubebuilder:default={type: RollingUpdate}
	// +optional
	Strategy Strategy `json:"strategy,omitempty"`

	// MinReadySeconds is how long a pod must have been ready before it
	// counts as available.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`
}

// RTResourceStatus is the observed state of an RTResource, computed from the
// controller's cache.
type RTResourceStatus struct {
	// ObservedGeneration is the generation the controller last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Criticality is the criticality in effect, after the annotation
	// fallback.
	// +optional
	Criticality int32 `json:"criticality"`
	// Replicas counts live pods: not terminating, not failed, not succeeded.
	// +optional
	Replicas int32 `json:"replicas"`
	// ReadyReplicas counts live pods whose Ready condition is True.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// AvailableReplicas counts ready pods that have been ready for at least
	// minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
	// UpdatedReplicas counts live pods of the current template.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// Selector is spec.selector in string form, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
	// Conditions are Ready, Progressing and, while pod creates or deletes
	// fail, ReplicaFailure.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RTResource is a Deployment-like set of pods with a criticality. Short
// names: rt, and rtr where Knative is installed (Knative's Route is rt
// too, and kubectl may pick it). `kubectl get all` lists RTResources.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName={rt,rtr},categories={all,gantry},scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Criticality",type=integer,JSONPath=`.status.criticality`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Up-to-date",type=integer,JSONPath=`.status.updatedReplicas`,priority=1
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RTResource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RTResourceSpec   `json:"spec"`
	Status RTResourceStatus `json:"status,omitempty"`
}

// RTResourceList is a list of RTResources.
// +kubebuilder:object:root=true
type RTResourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RTResource `json:"items"`
}
