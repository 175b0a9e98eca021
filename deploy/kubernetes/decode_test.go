package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// manifests holds every object of the directory, decoded strictly into its
// k8s.io/api type.
type manifests struct {
	statefulSets map[string]*appsv1.StatefulSet
	deployments  map[string]*appsv1.Deployment
	services     map[string]*corev1.Service
	pdbs         map[string]*policyv1.PodDisruptionBudget
	files        []string // the .yaml files holding Kubernetes objects
	// secrets are the Secrets kustomization.yaml generates, by name.
	secrets map[string]generatedSecret
}

// kustomization is the part of kustomize's file this directory uses;
// decoded strictly too, so a misspelt key fails.
type kustomization struct {
	APIVersion      string            `json:"apiVersion"`
	Kind            string            `json:"kind"`
	Resources       []string          `json:"resources"`
	SecretGenerator []secretGenerator `json:"secretGenerator"`
}

// secretGenerator is one Secret kustomize makes from files: each entry of
// files is KEY=PATH, PATH relative to the kustomization.
type secretGenerator struct {
	Name  string   `json:"name"`
	Type  string   `json:"type"`
	Files []string `json:"files"`
}

// generatedSecret is a generated Secret's type and, for each key, the file
// it is read from.
type generatedSecret struct {
	typ   corev1.SecretType
	files map[string]string
}

// secretsDir is where gen-secrets.sh writes and the generators read; it is
// kept out of git.
const secretsDir = "secrets"

// decodeGenerators checks the kustomization's Secrets: named once, each key
// once, every file under secretsDir, and a kubernetes.io/tls Secret with
// the tls.crt and tls.key it must have.
func decodeGenerators(gens []secretGenerator) (map[string]generatedSecret, error) {
	out := map[string]generatedSecret{}
	for _, g := range gens {
		if g.Name == "" {
			return nil, errors.New("kustomization.yaml: a secretGenerator without a name")
		}
		if _, dup := out[g.Name]; dup {
			return nil, fmt.Errorf("kustomization.yaml: a second secretGenerator named %s", g.Name)
		}
		s := generatedSecret{typ: corev1.SecretType(g.Type), files: map[string]string{}}
		if s.typ == "" {
			s.typ = corev1.SecretTypeOpaque
		}
		for _, f := range g.Files {
			key, path, ok := strings.Cut(f, "=")
			if !ok || key == "" || path == "" {
				return nil, fmt.Errorf("kustomization.yaml: secret %s: file %q is not KEY=PATH", g.Name, f)
			}
			if _, dup := s.files[key]; dup {
				return nil, fmt.Errorf("kustomization.yaml: secret %s: key %s given twice", g.Name, key)
			}
			if clean := filepath.ToSlash(filepath.Clean(path)); clean != path || !strings.HasPrefix(path, secretsDir+"/") {
				return nil, fmt.Errorf("kustomization.yaml: secret %s: %s is not under %s/", g.Name, path, secretsDir)
			}
			s.files[key] = path
		}
		if len(s.files) == 0 {
			return nil, fmt.Errorf("kustomization.yaml: secret %s has no files", g.Name)
		}
		switch s.typ {
		case corev1.SecretTypeTLS:
			if s.files[corev1.TLSCertKey] == "" || s.files[corev1.TLSPrivateKeyKey] == "" {
				return nil, fmt.Errorf("kustomization.yaml: secret %s is %s without %s and %s", g.Name, s.typ, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
			}
		case corev1.SecretTypeOpaque:
		default:
			return nil, fmt.Errorf("kustomization.yaml: secret %s: unexpected type %s", g.Name, s.typ)
		}
		out[g.Name] = s
	}
	return out, nil
}

// docSep splits a multi-document YAML file.
var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeObject decodes one YAML document into the type its kind names.
// Unknown fields, duplicate fields and unknown kinds are errors: there is no
// schema to download here, so the Go types are the schema.
func (m *manifests) decodeObject(file string, doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	var obj interface{ GetName() string }
	switch tm.APIVersion + "/" + tm.Kind {
	case "apps/v1/StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "apps/v1/Deployment":
		obj = &appsv1.Deployment{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "policy/v1/PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	default:
		return fmt.Errorf("%s: unexpected object %s %s", file, tm.APIVersion, tm.Kind)
	}
	if err := strictDecode(doc, obj); err != nil {
		return fmt.Errorf("%s: %s: %v", file, tm.Kind, err)
	}
	name := obj.GetName()
	if name == "" {
		return fmt.Errorf("%s: a %s without metadata.name", file, tm.Kind)
	}
	var dup bool
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		_, dup = m.statefulSets[name]
		m.statefulSets[name] = o
	case *appsv1.Deployment:
		_, dup = m.deployments[name]
		m.deployments[name] = o
	case *corev1.Service:
		_, dup = m.services[name]
		m.services[name] = o
	case *policyv1.PodDisruptionBudget:
		_, dup = m.pdbs[name]
		m.pdbs[name] = o
	}
	if dup {
		return fmt.Errorf("%s: a second %s named %s", file, tm.Kind, name)
	}
	return nil
}

// strictDecode decodes YAML as the API server decodes JSON: field names
// match case-sensitively (encoding/json would take clusterIp for clusterIP),
// and an unknown or repeated field is an error.
func strictDecode(doc []byte, v any) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(js, v, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// decodeFile decodes every document of one manifest file.
func (m *manifests) decodeFile(file string, data []byte) error {
	n := 0
	for _, doc := range docSep.Split(string(data), -1) {
		if len(bytes.TrimSpace(stripComments([]byte(doc)))) == 0 {
			continue
		}
		if err := m.decodeObject(file, []byte(doc)); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s holds no object", file)
	}
	return nil
}

func stripComments(doc []byte) []byte {
	var out []string
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out = append(out, line)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// load decodes every .yaml file of dir; kustomization.yaml must list
// exactly the other files.
func load(dir string) (*manifests, error) {
	m := &manifests{
		statefulSets: map[string]*appsv1.StatefulSet{},
		deployments:  map[string]*appsv1.Deployment{},
		services:     map[string]*corev1.Service{},
		pdbs:         map[string]*policyv1.PodDisruptionBudget{},
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.y*ml"))
	if err != nil {
		return nil, err
	}
	var kust *kustomization
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		file := filepath.Base(p)
		if file == "kustomization.yaml" {
			kust = &kustomization{}
			if err := strictDecode(data, kust); err != nil {
				return nil, fmt.Errorf("%s: %v", file, err)
			}
			continue
		}
		if err := m.decodeFile(file, data); err != nil {
			return nil, err
		}
		m.files = append(m.files, file)
	}
	if kust == nil {
		return nil, fmt.Errorf("no kustomization.yaml in %s", dir)
	}
	if kust.APIVersion != "kustomize.config.k8s.io/v1beta1" || kust.Kind != "Kustomization" {
		return nil, fmt.Errorf("kustomization.yaml: unexpected %s %s", kust.APIVersion, kust.Kind)
	}
	listed := append([]string(nil), kust.Resources...)
	sort.Strings(listed)
	if strings.Join(listed, ",") != strings.Join(m.files, ",") {
		return nil, fmt.Errorf("kustomization.yaml lists %v; the directory holds %v", listed, m.files)
	}
	if m.secrets, err = decodeGenerators(kust.SecretGenerator); err != nil {
		return nil, err
	}
	return m, nil
}
