package kube

// Secrets as OpenFaaS keeps them on Kubernetes: one Kubernetes Secret per
// secret, in the function namespace's Kubernetes namespace, the value under
// a key of the secret's own name, labelled as Gantry's so that the API
// lists, changes and deletes only those. A function naming secrets gets
// them as files, /var/openfaas/secrets/NAME, from a projected volume of
// those Secrets, and the folder's path in $GANTRY_SECRETS_DIR, where the
// local runtime puts the path of its private folder of copies: a function
// reading $GANTRY_SECRETS_DIR/NAME reads its secret on both.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"gantry.dev/gantry/pkg/secrets"
	"gantry.dev/gantry/pkg/stack"
)

const (
	// SecretsMountPath is where a function's secrets are, as OpenFaaS
	// mounts them.
	SecretsMountPath = "/var/openfaas/secrets"
	// EnvSecretsDir names the variable holding that path (the gateway's
	// SecretsDirEnv).
	EnvSecretsDir = "GANTRY_SECRETS_DIR"
	// secretsVolume is the pod's volume of the function's secrets.
	secretsVolume = "gantry-secrets"
)

// ListSecrets names the Gantry secrets of a function namespace.
func (b *Backend) ListSecrets(ctx context.Context, namespace string) ([]string, error) {
	ns, err := b.kubeNamespace(namespace)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := b.kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy,
		Limit: secrets.MaxSecrets + 1})
	if err != nil {
		return nil, fmt.Errorf("listing secrets in namespace %s: %w", ns, err)
	}
	names := make([]string, 0, len(list.Items))
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names, nil
}

// SecretExists reports whether a Gantry secret is there.
func (b *Backend) SecretExists(ctx context.Context, namespace, name string) (bool, error) {
	_, err := b.getSecret(ctx, namespace, name)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err), isErr(err, secrets.ErrNotFound):
		return false, nil
	}
	return false, err
}

func isErr(err, target error) bool { return err != nil && errors.Is(err, target) }

func (b *Backend) getSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	ns, err := b.kubeNamespace(namespace)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	s, err := b.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %q in namespace %s", secrets.ErrNotFound, name, ns)
	}
	if err != nil {
		return nil, err
	}
	if !isManaged(s) {
		return nil, fmt.Errorf("%w: Secret %s/%s is not labelled %s=%s; Gantry leaves it alone", secrets.ErrExists, ns, name, LabelManagedBy, ManagedBy)
	}
	return s, nil
}

// CreateSecret creates a secret; secrets.ErrExists if one of that name is
// there (Gantry's or not).
func (b *Backend) CreateSecret(ctx context.Context, namespace, name string, value []byte) error {
	ns, err := b.kubeNamespace(namespace)
	if err != nil {
		return err
	}
	if len(value) > secrets.MaxValue {
		return fmt.Errorf("%w: %q: value of %d bytes, at most %d", secrets.ErrInvalid, name, len(value), secrets.MaxValue)
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{LabelManagedBy: ManagedBy}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{name: value}}
	_, err = b.kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%w: %q in namespace %s", secrets.ErrExists, name, ns)
	}
	return err
}

// UpdateSecret replaces a Gantry secret's value; secrets.ErrNotFound if
// there is none.
func (b *Backend) UpdateSecret(ctx context.Context, namespace, name string, value []byte) error {
	if len(value) > secrets.MaxValue {
		return fmt.Errorf("%w: %q: value of %d bytes, at most %d", secrets.ErrInvalid, name, len(value), secrets.MaxValue)
	}
	s, err := b.getSecret(ctx, namespace, name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	s.Data = map[string][]byte{name: value}
	s.StringData = nil
	_, err = b.kube.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	return err
}

// DeleteSecret deletes a Gantry secret; secrets.ErrNotFound if there is
// none.
func (b *Backend) DeleteSecret(ctx context.Context, namespace, name string) error {
	s, err := b.getSecret(ctx, namespace, name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	err = b.kube.CoreV1().Secrets(s.Namespace).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &s.UID}})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %q", secrets.ErrNotFound, name)
	}
	return err
}

// applySecrets mounts the function's secrets, read-only, at
// SecretsMountPath, one file per secret named after it, and puts the path
// in $GANTRY_SECRETS_DIR.
func applySecrets(f stack.Function, spec *corev1.PodSpec) {
	if len(f.Secrets) == 0 {
		return
	}
	var sources []corev1.VolumeProjection
	for _, name := range f.Secrets {
		sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: name},
			Items:                []corev1.KeyToPath{{Key: name, Path: name}}}})
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: secretsVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: sources, DefaultMode: ptr.To(int32(0o400))}}})
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: secretsVolume, MountPath: SecretsMountPath, ReadOnly: true})
	c.Env = append(c.Env, corev1.EnvVar{Name: EnvSecretsDir, Value: SecretsMountPath})
}
