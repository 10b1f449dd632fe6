// Command image builds the controller's container image offline: one layer
// holding a static gantry binary at /gantry over an empty base, written as
// an OCI image layout in a tar archive (docker load, podman load, ctr
// images import, kind load image-archive, skopeo copy oci-archive:...) or
// in a folder (--oci-dir, for crane push or skopeo copy oci:...).
//
// `make image` builds the binary with CGO_ENABLED=0 and runs this. Nothing
// is fetched: there is no base image, only the binary, so the build needs
// no registry and no network. The output is reproducible: the same binary
// gives the same digests (fixed timestamps and owners, gzip without a
// name or time).
//
// The image runs as uid 0 with every capability but CAP_SYS_NICE dropped
// by the Deployment (config/manager/manager.yaml explains why).
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// OCI media types and annotations used in the layout.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"

	annotRefName       = "org.opencontainers.image.ref.name"
	annotContainerName = "io.containerd.image.name"
)

// BinaryPath is where the binary sits in the image; the Deployment's
// command names it.
const BinaryPath = "/gantry"

// epoch is every timestamp in the image, so the digests depend only on the
// binary.
var epoch = time.Unix(0, 0).UTC()

// Options say what to build.
type Options struct {
	// Binary is the static gantry binary's contents.
	Binary []byte
	// Tag is the image's name, e.g. gantry:latest.
	Tag string
	// Arch is the GOARCH the binary was built for.
	Arch string
	// User is the image's default user (the Deployment sets its own).
	User string
}

// Image is a built image: its blobs by digest, and the descriptors that
// tie them together.
type Image struct {
	Tag            string
	Blobs          map[string][]byte // "sha256:<hex>" -> contents
	ManifestDigest string
	ManifestSize   int
	ConfigDigest   string
	LayerDigest    string
	DiffID         string // the uncompressed layer's digest
	Arch           string
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

// imageConfig is the OCI image configuration (what docker inspect shows).
type imageConfig struct {
	Created      time.Time `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       struct {
		User       string            `json:"User,omitempty"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd,omitempty"`
		Env        []string          `json:"Env,omitempty"`
		Labels     map[string]string `json:"Labels,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []struct {
		Created   time.Time `json:"created"`
		CreatedBy string    `json:"created_by"`
	} `json:"history"`
}

// ErrNotStatic is returned for a binary that needs a dynamic loader: the
// image has no base, so there is no libc to load it with.
var ErrNotStatic = errors.New("image: binary is dynamically linked; build it with CGO_ENABLED=0")

// checkStatic refuses anything but a static Linux ELF executable.
func checkStatic(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("image: binary is not an ELF file: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return ErrNotStatic
		}
	}
	return nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// Build makes the image in memory.
func Build(o Options) (*Image, error) {
	if err := checkStatic(o.Binary); err != nil {
		return nil, err
	}
	if o.Tag == "" || o.Arch == "" {
		return nil, errors.New("image: tag and arch are required")
	}
	layerTar, err := layerTar(o.Binary)
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	zw.ModTime = epoch // no name, fixed time: the same binary gives the same digest
	if _, err := zw.Write(layerTar); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	img := &Image{Tag: o.Tag, Arch: o.Arch, Blobs: map[string][]byte{}, DiffID: digest(layerTar)}
	layer := gz.Bytes()
	img.LayerDigest = digest(layer)
	img.Blobs[img.LayerDigest] = layer

	var cfg imageConfig
	cfg.Created, cfg.Architecture, cfg.OS = epoch, o.Arch, "linux"
	cfg.Config.User = o.User
	cfg.Config.Entrypoint = []string{BinaryPath}
	cfg.Config.Cmd = []string{"controller"}
	cfg.Config.Env = []string{"PATH=/"}
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.title": "gantry", "org.opencontainers.image.source": "gantry.dev/gantry"}
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{img.DiffID}
	cfg.History = append(cfg.History, struct {
		Created   time.Time `json:"created"`
		CreatedBy string    `json:"created_by"`
	}{epoch, "make image: static gantry binary at " + BinaryPath})
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	img.ConfigDigest = digest(cfgJSON)
	img.Blobs[img.ConfigDigest] = cfgJSON

	m := manifest{SchemaVersion: 2, MediaType: mediaManifest,
		Config: descriptor{MediaType: mediaConfig, Digest: img.ConfigDigest, Size: len(cfgJSON)},
		Layers: []descriptor{{MediaType: mediaLayer, Digest: img.LayerDigest, Size: len(layer)}}}
	mJSON, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	img.ManifestDigest, img.ManifestSize = digest(mJSON), len(mJSON)
	img.Blobs[img.ManifestDigest] = mJSON
	return img, nil
}

// layerTar is the layer's file system: the binary alone, owned by root,
// mode 0755, at a fixed time.
func layerTar(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(BinaryPath, "/"), Mode: 0o755,
		Size: int64(len(bin)), ModTime: epoch, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// files is the OCI image layout, path -> contents: oci-layout, index.json
// and the blobs, plus Docker's manifest.json so older `docker load` reads
// it too.
func (img *Image) files() (map[string][]byte, error) {
	name, ref := fullName(img.Tag)
	idx := index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{{
		MediaType: mediaManifest, Digest: img.ManifestDigest, Size: img.ManifestSize,
		Annotations: map[string]string{annotRefName: ref, annotContainerName: name},
		Platform:    &platform{Architecture: img.Arch, OS: "linux"}}}}
	idxJSON, err := json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	docker, err := json.Marshal([]map[string]any{{
		"Config":   blobPath(img.ConfigDigest),
		"RepoTags": []string{img.Tag},
		"Layers":   []string{blobPath(img.LayerDigest)},
	}})
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{
		"oci-layout":    []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json":    idxJSON,
		"manifest.json": docker,
	}
	for d, b := range img.Blobs {
		out[blobPath(d)] = b
	}
	return out, nil
}

func blobPath(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }

// fullName turns gantry:latest into docker.io/library/gantry:latest (what
// containerd names an imported image) and its reference, latest.
func fullName(tag string) (name, ref string) {
	repo, ref := tag, "latest"
	if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
		repo, ref = tag[:i], tag[i+1:]
	}
	first, _, hasSlash := strings.Cut(repo, "/")
	switch {
	case !hasSlash:
		repo = "docker.io/library/" + repo
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		repo = "docker.io/" + repo
	}
	return repo + ":" + ref, ref
}

// WriteArchive writes the layout as one tar file, in a fixed order.
func (img *Image) WriteArchive(w io.Writer) error {
	files, err := img.files()
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	dirs := []string{"blobs/", "blobs/sha256/"}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(files) {
		b := files[name]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	return tw.Close()
}

// WriteDir writes the layout into a folder.
func (img *Image) WriteDir(dir string) error {
	files, err := img.files()
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(files) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string][]byte) []string { return slices.Sorted(maps.Keys(m)) }

// writeFileAtomic writes via a temporary name in the same folder, so a
// reader never sees half an archive.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".image-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func main() {
	var (
		binary = flag.String("binary", "", "the static gantry binary (CGO_ENABLED=0)")
		out    = flag.String("out", "", "write the image as an OCI layout tar archive here")
		ociDir = flag.String("oci-dir", "", "also write the OCI layout into this folder")
		tag    = flag.String("tag", "gantry:latest", "image name")
		arch   = flag.String("arch", runtime.GOARCH, "GOARCH of the binary")
		user   = flag.String("user", "0:0", "the image's default user; the shipped Deployment runs uid 0 with only CAP_SYS_NICE")
	)
	flag.Parse()
	if *binary == "" || (*out == "" && *ociDir == "") {
		fmt.Fprintln(os.Stderr, "usage: image --binary PATH (--out FILE.tar | --oci-dir DIR) [--tag NAME]")
		os.Exit(2)
	}
	if err := run(*binary, *out, *ociDir, Options{Tag: *tag, Arch: *arch, User: *user}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(binary, out, ociDir string, o Options) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	o.Binary = bin
	img, err := Build(o)
	if err != nil {
		return err
	}
	if out != "" {
		if err := writeFileAtomic(out, img.WriteArchive); err != nil {
			return err
		}
		fmt.Printf("%s %s %s\n", out, img.Tag, img.ManifestDigest)
	}
	if ociDir != "" {
		if err := img.WriteDir(ociDir); err != nil {
			return err
		}
		fmt.Printf("%s %s %s\n", ociDir, img.Tag, img.ManifestDigest)
	}
	return nil
}
