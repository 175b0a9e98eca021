package kubernetes

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dexhq/dex/deploy/internal/cmdflags"
	corev1 "k8s.io/api/core/v1"
)

// externalSecrets are the Secrets the manifests use that the kustomization
// cannot make: the Workers' token exists only once the nodes run and
// dexctl made it. docs/tls-and-tokens.md shows the command for each, with
// its keys.
var externalSecrets = map[string][]string{"dexworker-token": {"token"}}

const tlsDoc = "../../docs/tls-and-tokens.md"

// workload is one container of the manifests with its pod.
type workload struct {
	name string // the binary, also the container's name
	spec corev1.PodSpec
	c    *corev1.Container
}

func workloads(t *testing.T, m *manifests) []workload {
	t.Helper()
	sts := m.statefulSets[nodesName].Spec.Template.Spec
	dep := m.deployments[workersName].Spec.Template.Spec
	return []workload{
		{"dexd", sts, container(t, sts, "dexd")},
		{"dexworker", dep, container(t, dep, "dexworker")},
	}
}

// secretFile names the Secret and key a container reads at path: the
// volume mounted at path's directory must be a Secret (mounted whole: a
// subPath mount never sees a renewed Secret), and the key is the file name
// or the item mapped to it.
func secretFile(spec corev1.PodSpec, c *corev1.Container, path string) (secret, key string, err error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == dir {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil {
		return "", "", fmt.Errorf("%s: nothing is mounted at %s", path, dir)
	}
	if mount.SubPath != "" || mount.SubPathExpr != "" {
		return "", "", fmt.Errorf("%s: %s is a subPath mount, which never sees a renewed Secret", path, dir)
	}
	for _, v := range spec.Volumes {
		if v.Name != mount.Name {
			continue
		}
		if v.Secret == nil {
			return "", "", fmt.Errorf("%s: the volume %s at %s is not a Secret", path, v.Name, dir)
		}
		key = base
		for _, it := range v.Secret.Items {
			if it.Path == base {
				key = it.Key
			}
		}
		return v.Secret.SecretName, key, nil
	}
	return "", "", fmt.Errorf("%s: no volume %s in the pod", path, mount.Name)
}

// secretHasKey reports whether the Secret named exists (made by the
// kustomization or documented as made by hand) with that key.
func secretHasKey(m *manifests, name, key string) error {
	if s, ok := m.secrets[name]; ok {
		if s.files[key] == "" {
			return fmt.Errorf("the Secret %s that kustomization.yaml makes has no key %s", name, key)
		}
		return nil
	}
	if keys, ok := externalSecrets[name]; ok {
		for _, k := range keys {
			if k == key {
				return nil
			}
		}
		return fmt.Errorf("the Secret %s has no key %s", name, key)
	}
	return fmt.Errorf("no Secret %s: kustomization.yaml does not make it", name)
}

// securityProblems lists what leaves a node or a Worker without TLS and a
// token: the flags that turn them on, the Secrets behind every file and
// token, the probes' scheme and the files' modes.
func securityProblems(t *testing.T, m *manifests) []string {
	t.Helper()
	var out []string
	bad := func(w workload, format string, a ...any) {
		out = append(out, w.name+": "+fmt.Sprintf(format, a...))
	}
	for _, w := range workloads(t, m) {
		flags := podFlags(t, w.c, nil)
		if _, ok := flags["insecure"]; ok {
			bad(w, "--insecure: no TLS and no tokens")
		}
		if _, ok := flags["token"]; ok {
			bad(w, "--token on the command line: anyone who may read the pod sees it; use $DEX_TOKEN from a Secret")
		}
		// The files the process reads, each from a mounted Secret.
		files := []string{"tls-cert", "tls-key", "tls-ca"}
		if w.name == "dexd" {
			files = append(files, "acl-bootstrap-token-file")
			if flags["acl"] != "true" {
				bad(w, "--acl=%q: calls without a token would be served", flags["acl"])
			}
			if flags["http-tls"] != "true" {
				bad(w, "--http-tls=%q: the console's login token would cross the network in clear", flags["http-tls"])
			}
		}
		for _, f := range files {
			path, ok := flags[f]
			if !ok {
				bad(w, "no --%s", f)
				continue
			}
			secret, key, err := secretFile(w.spec, w.c, path)
			if err == nil {
				err = secretHasKey(m, secret, key)
			}
			if err != nil {
				bad(w, "--%s: %v", f, err)
			}
		}
		// $DEX_TOKEN: the Workers' token, and for dexd the one dexctl run
		// in its container sends. Never a literal value.
		token := envVar(w.c, "DEX_TOKEN")
		switch {
		case token == nil && w.name == "dexworker":
			bad(w, "no $DEX_TOKEN: its calls would carry no token")
		case token == nil:
		case token.ValueFrom == nil || token.ValueFrom.SecretKeyRef == nil:
			bad(w, "$DEX_TOKEN is not read from a Secret")
		default:
			if err := secretHasKey(m, token.ValueFrom.SecretKeyRef.Name, token.ValueFrom.SecretKeyRef.Key); err != nil {
				bad(w, "$DEX_TOKEN: %v", err)
			}
		}
		// A Secret's files: for the process's group (fsGroup) alone.
		for _, v := range w.spec.Volumes {
			if v.Secret == nil {
				continue
			}
			mode := v.Secret.DefaultMode
			fsGroup, group := w.spec.SecurityContext.FSGroup, w.spec.SecurityContext.RunAsGroup
			switch {
			case mode == nil:
				bad(w, "the Secret volume %s has no defaultMode: its files are readable by every user (0644)", v.Name)
			case *mode&0o007 != 0:
				bad(w, "the Secret volume %s has mode %#o: readable by every user", v.Name, *mode)
			case *mode&0o040 == 0 || fsGroup == nil || group == nil || *fsGroup != *group:
				bad(w, "the Secret volume %s (mode %#o) is not readable through fsGroup by the process's group", v.Name, *mode)
			}
		}
	}
	// The probes follow --http-tls.
	c := container(t, m.statefulSets[nodesName].Spec.Template.Spec, "dexd")
	want := corev1.URISchemeHTTP
	if podFlags(t, c, nil)["http-tls"] == "true" {
		want = corev1.URISchemeHTTPS
	}
	for name, p := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe, "startupProbe": c.StartupProbe} {
		if p != nil && p.HTTPGet != nil && p.HTTPGet.Scheme != want && !(p.HTTPGet.Scheme == "" && want == corev1.URISchemeHTTP) {
			out = append(out, fmt.Sprintf("dexd: %s scheme %q, want %s (--http-tls)", name, p.HTTPGet.Scheme, want))
		}
	}
	return out
}

func TestNodesAndWorkersUseTLSAndTokens(t *testing.T) {
	for _, p := range securityProblems(t, mustLoad(t)) {
		t.Error(p)
	}
}

// Each way of undoing the security is caught.
func TestSecurityProblemsCatchEachHole(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(m *manifests)
		want string
	}{
		"insecure flag": {func(m *manifests) { addArg(m, "dexd", "--insecure=true") }, "dexd: --insecure"},
		"token in args": {func(m *manifests) { addArg(m, "dexworker", "--token=abc") }, "dexworker: --token on the command line"},
		"no acl": {func(m *manifests) {
			c := &m.statefulSets[nodesName].Spec.Template.Spec.Containers[0]
			c.Args = without(c.Args, "--acl=")
		}, `--acl=""`},
		"cert not mounted": {func(m *manifests) {
			c := &m.deployments[workersName].Spec.Template.Spec.Containers[0]
			c.VolumeMounts = c.VolumeMounts[:1]
		}, "dexworker: --tls-cert: /etc/dex/tls/tls.crt: nothing is mounted at /etc/dex/tls"},
		"unknown key": {func(m *manifests) {
			c := &m.statefulSets[nodesName].Spec.Template.Spec.Containers[0]
			c.Args = append(without(c.Args, "--tls-ca="), "--tls-ca=/etc/dex/tls/ca.pem")
		}, "has no key ca.pem"},
		"unknown secret": {func(m *manifests) {
			envVar(&m.deployments[workersName].Spec.Template.Spec.Containers[0], "DEX_TOKEN").ValueFrom.SecretKeyRef.Name = "worker-token"
		}, "$DEX_TOKEN: no Secret worker-token"},
		"literal token": {func(m *manifests) {
			*envVar(&m.deployments[workersName].Spec.Template.Spec.Containers[0], "DEX_TOKEN") = corev1.EnvVar{Name: "DEX_TOKEN", Value: "abc"}
		}, "dexworker: $DEX_TOKEN is not read from a Secret"},
		"world-readable": {func(m *manifests) {
			mode := int32(0o444)
			m.statefulSets[nodesName].Spec.Template.Spec.Volumes[0].Secret.DefaultMode = &mode
		}, "mode 0444: readable by every user"},
		"no fsGroup": {func(m *manifests) {
			m.deployments[workersName].Spec.Template.Spec.SecurityContext.FSGroup = nil
		}, "not readable through fsGroup"},
		"probe over HTTP": {func(m *manifests) {
			m.statefulSets[nodesName].Spec.Template.Spec.Containers[0].LivenessProbe.HTTPGet.Scheme = corev1.URISchemeHTTP
		}, `livenessProbe scheme "HTTP", want HTTPS`},
	} {
		m := mustLoad(t)
		tc.edit(m)
		problems := strings.Join(securityProblems(t, m), "\n")
		if !strings.Contains(problems, tc.want) {
			t.Errorf("%s: problems %q, want one with %q", name, problems, tc.want)
		}
	}
}

// No file here passes the flag that serves without TLS and tokens, not even
// in a comment to uncomment.
func TestNoFileNamesTheInsecureFlag(t *testing.T) {
	paths, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	naming, n, err := cmdflags.NamingInsecure(paths, secretsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range naming {
		t.Errorf("%s names --insecure", p)
	}
	if n < 6 {
		t.Fatalf("only %d files read", n)
	}
	if !cmdflags.Insecure.MatchString("args: [-insecure]") || !cmdflags.Insecure.MatchString("- --insecure") ||
		cmdflags.Insecure.MatchString("--insecure-skip-tls-verify") {
		t.Error("the pattern does not match the flag alone")
	}
}

// The Secrets' files are never committed, and the manual Secret is shown
// with its keys in the docs.
func TestSecretFilesStayOutOfGit(t *testing.T) {
	ignore, err := os.ReadFile(".gitignore")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^/` + secretsDir + `/$`).Match(ignore) {
		t.Errorf(".gitignore does not ignore /%s/: keys and tokens could be committed", secretsDir)
	}
	doc, err := os.ReadFile(tlsDoc)
	if err != nil {
		t.Fatal(err)
	}
	for name, keys := range externalSecrets {
		for _, k := range keys {
			want := "create secret generic " + name + " --from-file=" + k + "="
			if !strings.Contains(string(doc), want) {
				t.Errorf("%s does not show `kubectl ... %s…`", tlsDoc, want)
			}
		}
	}
}

func TestDecodeRefusesBadGenerators(t *testing.T) {
	for name, g := range map[string]secretGenerator{
		"no name":         {Files: []string{"a=secrets/a"}},
		"no key":          {Name: "s", Files: []string{"secrets/a"}},
		"outside secrets": {Name: "s", Files: []string{"a=../a"}},
		"unclean path":    {Name: "s", Files: []string{"a=secrets/../statefulset.yaml"}},
		"no files":        {Name: "s"},
		"tls without key": {Name: "s", Type: "kubernetes.io/tls", Files: []string{"tls.crt=secrets/s/tls.crt"}},
		"unknown type":    {Name: "s", Type: "kubernetes.io/dockerconfigjson", Files: []string{"a=secrets/a"}},
		"key twice":       {Name: "s", Files: []string{"a=secrets/a", "a=secrets/b"}},
	} {
		if _, err := decodeGenerators([]secretGenerator{g}); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
	twice := secretGenerator{Name: "s", Files: []string{"a=secrets/a"}}
	if _, err := decodeGenerators([]secretGenerator{twice, twice}); err == nil {
		t.Error("a Secret generated twice: decoded without an error")
	}
}

func addArg(m *manifests, name, arg string) {
	var c *corev1.Container
	if name == "dexd" {
		c = &m.statefulSets[nodesName].Spec.Template.Spec.Containers[0]
	} else {
		c = &m.deployments[workersName].Spec.Template.Spec.Containers[0]
	}
	c.Args = append(c.Args, arg)
}

func without(args []string, prefix string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, prefix) {
			out = append(out, a)
		}
	}
	return out
}

func envVar(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}
