package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var static struct {
	once sync.Once
	bin  []byte
	err  error
}

// staticBinary builds a tiny static program that prints its argument, the
// stand-in for gantry (building gantry itself would take a minute).
func staticBinary(t *testing.T) []byte {
	t.Helper()
	static.once.Do(func() {
		dir, err := os.MkdirTemp("", "image-test-")
		if err != nil {
			static.err = err
			return
		}
		defer os.RemoveAll(dir)
		src := "package main\nimport (\"fmt\"; \"os\")\nfunc main() { fmt.Println(\"hello from\", os.Args[0], os.Args[1:]) }\n"
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
			static.err = err
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644); err != nil {
			static.err = err
			return
		}
		cmd := exec.Command("go", "build", "-o", "hello", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			static.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		static.bin, static.err = os.ReadFile(filepath.Join(dir, "hello"))
	})
	if static.err != nil {
		t.Fatal(static.err)
	}
	return static.bin
}

// readArchive returns every regular file of a tar archive.
func readArchive(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

// blob reads a blob by digest and checks the digest and size.
func blob(t *testing.T, files map[string][]byte, d descriptor) []byte {
	t.Helper()
	b, ok := files[blobPath(d.Digest)]
	if !ok {
		t.Fatalf("blob %s missing from the layout", d.Digest)
	}
	if digest(b) != d.Digest || len(b) != d.Size {
		t.Fatalf("blob %s: digest %s, size %d; descriptor says size %d", d.Digest, digest(b), len(b), d.Size)
	}
	return b
}

// TestArchiveIsAnOCILayoutOfTheBinaryAlone follows the layout as a runtime
// importing it would: index, manifest, config, layer, every digest
// checked, and runs the binary it finds in the layer.
func TestArchiveIsAnOCILayoutOfTheBinaryAlone(t *testing.T) {
	bin := staticBinary(t)
	img, err := Build(Options{Binary: bin, Tag: "example.com/team/gantry:v1", Arch: runtime.GOARCH, User: "0:0"})
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := img.WriteArchive(&archive); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, &archive)
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout = %q", files["oci-layout"])
	}
	var idx index
	if err := json.Unmarshal(files["index.json"], &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", files["index.json"], err)
	}
	md := idx.Manifests[0]
	if md.MediaType != mediaManifest || md.Annotations[annotContainerName] != "example.com/team/gantry:v1" ||
		md.Annotations[annotRefName] != "v1" || md.Platform == nil || md.Platform.OS != "linux" {
		t.Errorf("index entry %+v", md)
	}
	var m manifest
	if err := json.Unmarshal(blob(t, files, md), &m); err != nil {
		t.Fatal(err)
	}
	if m.SchemaVersion != 2 || m.Config.MediaType != mediaConfig || len(m.Layers) != 1 || m.Layers[0].MediaType != mediaLayer {
		t.Fatalf("manifest %+v", m)
	}
	var cfg imageConfig
	if err := json.Unmarshal(blob(t, files, m.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH || cfg.Config.User != "0:0" ||
		strings.Join(cfg.Config.Entrypoint, " ") != BinaryPath || len(cfg.RootFS.DiffIDs) != 1 {
		t.Errorf("config %+v", cfg)
	}

	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, m.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if digest(layer) != cfg.RootFS.DiffIDs[0] {
		t.Errorf("diff_id %s, uncompressed layer %s", cfg.RootFS.DiffIDs[0], digest(layer))
	}
	tr := tar.NewReader(bytes.NewReader(layer))
	h, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if "/"+h.Name != BinaryPath || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 {
		t.Errorf("layer entry %s mode %o uid %d gid %d, want %s 0755 root", h.Name, h.Mode, h.Uid, h.Gid, BinaryPath)
	}
	got, err := io.ReadAll(tr)
	if err != nil || !bytes.Equal(got, bin) {
		t.Fatalf("layer's binary differs from the input (%v)", err)
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("layer holds more than the binary: %v", err)
	}

	// docker load's manifest.json names the same blobs.
	var docker []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &docker); err != nil || len(docker) != 1 {
		t.Fatalf("manifest.json %s: %v", files["manifest.json"], err)
	}
	if _, ok := files[docker[0].Config]; !ok || docker[0].RepoTags[0] != "example.com/team/gantry:v1" {
		t.Errorf("manifest.json %+v", docker[0])
	}

	// The binary from the layer runs on an empty root: it is static.
	dir := t.TempDir()
	p := filepath.Join(dir, "gantry")
	if err := os.WriteFile(p, got, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(p, "controller").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "[controller]") {
		t.Fatalf("running the layer's binary: %v\n%s", err, out)
	}
}

func TestSameBinaryGivesTheSameDigests(t *testing.T) {
	bin := staticBinary(t)
	a, err := Build(Options{Binary: bin, Tag: "gantry:latest", Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(Options{Binary: bin, Tag: "gantry:latest", Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	if a.ManifestDigest != b.ManifestDigest || a.LayerDigest != b.LayerDigest {
		t.Fatalf("two builds of one binary: manifests %s and %s", a.ManifestDigest, b.ManifestDigest)
	}
	other := append(bytes.Clone(bin), 0)
	c, err := Build(Options{Binary: other, Tag: "gantry:latest", Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	if c.LayerDigest == a.LayerDigest {
		t.Fatal("a different binary gave the same layer")
	}
}

func TestDynamicBinaryIsRefused(t *testing.T) {
	if _, err := Build(Options{Binary: []byte("#!/bin/sh\n"), Tag: "x", Arch: "amd64"}); err == nil {
		t.Error("a shell script was accepted as the binary")
	}
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh to try a dynamic binary with")
	}
	if checkStatic(sh) == nil {
		t.Skip("/bin/sh is static here")
	}
	if _, err := Build(Options{Binary: sh, Tag: "x", Arch: "amd64"}); !errors.Is(err, ErrNotStatic) {
		t.Errorf("dynamic /bin/sh: %v, want ErrNotStatic", err)
	}
}

func TestFullName(t *testing.T) {
	for in, want := range map[string]string{
		"gantry":                   "docker.io/library/gantry:latest",
		"gantry:v1":                "docker.io/library/gantry:v1",
		"team/gantry:v1":           "docker.io/team/gantry:v1",
		"localhost:5000/gantry":    "localhost:5000/gantry:latest",
		"registry.example/g/x:1.2": "registry.example/g/x:1.2",
	} {
		if got, _ := fullName(in); got != want {
			t.Errorf("fullName(%q) = %q, want %q", in, got, want)
		}
	}
}

// schedHelperEnv makes the test binary a helper that tries SCHED_FIFO on
// its own thread and prints the result.
const schedHelperEnv = "GANTRY_IMAGE_SCHED_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(schedHelperEnv) == "1" {
		runtime.LockOSThread()
		err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 50}, 0)
		fmt.Printf("sched_setattr SCHED_FIFO: %v\n", err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// shippedContainer reads the controller's container and pod security
// settings from config/manager/manager.yaml.
func shippedContainer(t *testing.T) (*corev1.PodSecurityContext, *corev1.Container) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(raw, &d); err != nil {
		t.Fatal(err)
	}
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == "controller" {
			return d.Spec.Template.Spec.SecurityContext, c
		}
	}
	t.Fatal("manager.yaml has no controller container")
	return nil, nil
}

// execLikeARuntime runs the sched helper the way runc starts a container
// process: as uid, with the capability bounding set reduced to caps, no
// inheritable capabilities, no_new_privs when privilege escalation is off,
// then exec.
func execLikeARuntime(t *testing.T, uid int64, caps []corev1.Capability, noNewPrivs bool) string {
	t.Helper()
	bounding := "-all"
	for _, c := range caps {
		bounding += ",+" + strings.ToLower(string(c))
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--reuid=" + strconv.FormatInt(uid, 10), "--regid=" + strconv.FormatInt(uid, 10), "--clear-groups",
		"--inh-caps=-all", "--bounding-set=" + bounding}
	if noNewPrivs {
		args = append(args, "--no-new-privs")
	}
	args = append(args, self, "-test.run=^$")
	cmd := exec.Command("setpriv", args...)
	cmd.Env = append(os.Environ(), schedHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("setpriv %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestShippedDeploymentKeepsSysNiceAcrossExec runs a process under the
// kernel rules a container runtime applies for the shipped Deployment's
// security settings and checks it can switch a thread to SCHED_FIFO. The
// second half shows why the Deployment runs as uid 0: the same settings
// with a non-root uid (what it shipped before) lose the capability at
// exec, so the engine never had real time.
func TestShippedDeploymentKeepsSysNiceAcrossExec(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change uid and capability sets")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	pod, c := shippedContainer(t)
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || sc.AllowPrivilegeEscalation == nil {
		t.Fatal("the controller container sets no capabilities or allowPrivilegeEscalation")
	}
	if len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 1 || sc.Capabilities.Add[0] != "SYS_NICE" {
		t.Fatalf("capabilities drop %v add %v, want drop ALL add SYS_NICE", sc.Capabilities.Drop, sc.Capabilities.Add)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Fatal("the controller is privileged")
	}
	uid := int64(0) // the image's user
	if pod != nil && pod.RunAsUser != nil {
		uid = *pod.RunAsUser
	}
	if sc.RunAsUser != nil {
		uid = *sc.RunAsUser
	}
	nnp := !*sc.AllowPrivilegeEscalation
	if got := execLikeARuntime(t, uid, sc.Capabilities.Add, nnp); got != "sched_setattr SCHED_FIFO: <nil>" {
		t.Errorf("shipped settings (uid %d, no_new_privs %v): %s; want SCHED_FIFO allowed", uid, nnp, got)
	}
	if got := execLikeARuntime(t, 65532, sc.Capabilities.Add, nnp); !strings.Contains(got, "operation not permitted") {
		t.Errorf("the same as uid 65532: %s; want EPERM (a non-root exec drops the capability)", got)
	}
}
