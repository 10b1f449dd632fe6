package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelSelector has the JSON shape of metav1.LabelSelector, so Knative's
// PodScalable duck type and kubectl see the usual selector. It is a type of
// its own only to carry size bounds: without them the apiserver's CEL cost
// estimate rejects the rules that check the selector against the template's
// labels. The bounds are far above what any selector uses.
type LabelSelector struct {
	// MatchLabels is a map of key-value pairs that must all match.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`
	// MatchExpressions are requirements that must all match.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelValue is a label value; Kubernetes limits them to 63 characters.
// +kubebuilder:validation:MaxLength=63
type LabelValue string

// LabelSelectorRequirement is one expression of a LabelSelector.
type LabelSelectorRequirement struct {
	// Key is the label key the requirement applies to.
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// Values for In and NotIn; empty for Exists and DoesNotExist.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// AsMetav1 converts the selector for use with apimachinery's label helpers.
func (s *LabelSelector) AsMetav1() *metav1.LabelSelector {
	out := &metav1.LabelSelector{}
	if s.MatchLabels != nil {
		out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = string(v)
		}
	}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: r.Key, Operator: r.Operator, Values: append([]string(nil), r.Values...)})
	}
	return out
}
