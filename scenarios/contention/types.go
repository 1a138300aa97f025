package contention

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group of Rollout.
var GroupVersion = schema.GroupVersion{Group: "contention.stalefuzz.dev", Version: "v1"}

// Rollout asks for a plan of Spec.Steps steps to be built once and executed.
type Rollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              RolloutSpec   `json:"spec,omitempty"`
	Status            RolloutStatus `json:"status,omitempty"`
}

// RolloutSpec is what the user asks for.
type RolloutSpec struct {
	Steps int `json:"steps"`
}

// RolloutStatus is what the controller did.
type RolloutStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Plan               *Plan              `json:"plan,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// Plan is built once per Rollout; Done counts executed steps.
type Plan struct {
	ID    string `json:"id"`
	Steps int    `json:"steps"`
	Done  int    `json:"done"`
}

// RolloutList is a list of Rollouts.
type RolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Rollout `json:"items"`
}

// DeepCopy returns a deep copy of r.
func (r *Rollout) DeepCopy() *Rollout {
	out := *r
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if r.Status.Plan != nil {
		p := *r.Status.Plan
		out.Status.Plan = &p
	}
	out.Status.Conditions = make([]metav1.Condition, len(r.Status.Conditions))
	for i := range r.Status.Conditions {
		r.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
	}
	return &out
}

// DeepCopyObject implements runtime.Object.
func (r *Rollout) DeepCopyObject() runtime.Object { return r.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *RolloutList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Rollout, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopy()
	}
	return &out
}

// AddToScheme registers Rollout and RolloutList.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Rollout{}, &RolloutList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
