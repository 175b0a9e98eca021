package kubernetes

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/deploy/internal/cmdflags"
)

// The objects the README and the other manifests refer to by name.
const (
	nodesName   = "dexd"       // StatefulSet, client Service, PDB
	peersName   = "dexd-peers" // headless Service
	workersName = "dexworker"  // Deployment
	namespace   = "dex-test"   // any namespace: the manifests take it from the pod
)

func mustLoad(t *testing.T) *manifests {
	t.Helper()
	m, err := load(".")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := mustLoad(t)
	if m.statefulSets[nodesName] == nil || m.deployments[workersName] == nil ||
		m.services[nodesName] == nil || m.services[peersName] == nil || m.pdbs[nodesName] == nil {
		t.Fatalf("missing objects: statefulsets %v, deployments %v, services %v, pdbs %v",
			keys(m.statefulSets), keys(m.deployments), keys(m.services), keys(m.pdbs))
	}
}

// The decoder must refuse what a cluster's API server would refuse (or
// silently drop): a misspelt field, a field in the wrong place, an unknown
// kind, a field given twice.
func TestDecodeRefusesBadManifests(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field": "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  headless: true\n",
		"wrong case":    "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  clusterIp: None\n",
		"misplaced field": "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: x\nspec:\n  replicas: 3\n" +
			"  template:\n    spec:\n      containers:\n        - name: c\n          readinessProbe:\n            path: /readyz\n",
		"unknown kind":    "apiVersion: v1\nkind: Servce\nmetadata:\n  name: x\n",
		"wrong version":   "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: x\n",
		"duplicate field": "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  name: y\n",
		"no name":         "apiVersion: v1\nkind: Service\nspec:\n  clusterIP: None\n",
		"wrong type":      "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: x\nspec:\n  replicas: three\n",
		"only comments":   "# nothing\n",
	} {
		m := &manifests{statefulSets: map[string]*appsv1.StatefulSet{}, deployments: map[string]*appsv1.Deployment{},
			services: map[string]*corev1.Service{}, pdbs: nil}
		if err := m.decodeFile("bad.yaml", []byte(doc)); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

func TestLoadRefusesAKustomizationThatMissesAFile(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"services.yaml", "pdb.yaml"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - services.yaml\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := load(dir); err == nil || !strings.Contains(err.Error(), "pdb.yaml") {
		t.Fatalf("load = %v, want an error naming pdb.yaml", err)
	}
}

func TestHeadlessServicePublishesEveryNode(t *testing.T) {
	m := mustLoad(t)
	sts, peers := m.statefulSets[nodesName], m.services[peersName]
	if sts.Spec.ServiceName != peersName {
		t.Errorf("StatefulSet serviceName %q, want %q (the pods' DNS names)", sts.Spec.ServiceName, peersName)
	}
	if peers.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("%s clusterIP %q, want None (headless)", peersName, peers.Spec.ClusterIP)
	}
	// A pod not Ready yet (starting, catching up) must have a DNS name too,
	// or the nodes could not find each other to elect a leader.
	if !peers.Spec.PublishNotReadyAddresses {
		t.Errorf("%s must publish not-ready addresses", peersName)
	}
	if !selects(t, peers.Spec.Selector, sts) {
		t.Errorf("%s does not select the StatefulSet's pods", peersName)
	}
}

func TestStatefulSetRunsThreeNodesFromTheirNames(t *testing.T) {
	m := mustLoad(t)
	sts := m.statefulSets[nodesName]
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Fatalf("replicas %s, want 3", show(sts.Spec.Replicas))
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q: the first leader needs all three pods started together", sts.Spec.PodManagementPolicy)
	}
	// Every healthy pod is Ready, so a RollingUpdate replaces one at a time
	// and waits for each to catch up; more than one at once loses the quorum.
	if u := sts.Spec.UpdateStrategy; u.Type != appsv1.RollingUpdateStatefulSetStrategyType ||
		(u.RollingUpdate != nil && u.RollingUpdate.MaxUnavailable != nil && *u.RollingUpdate.MaxUnavailable != intstr.FromInt32(1)) {
		t.Errorf("updateStrategy %+v, want RollingUpdate, one pod at a time", u)
	}
	c := container(t, sts.Spec.Template.Spec, "dexd")
	envFromField(t, c, "POD_NAME", "metadata.name")
	envFromField(t, c, "POD_NAMESPACE", "metadata.namespace")

	// Each pod's flags, as the kubelet expands them, must be what dexd
	// accepts: its id in --peers with its own --raft-addr.
	var firstPeers []cluster.Peer
	for i := 0; i < 3; i++ {
		pod := fmt.Sprintf("%s-%d", nodesName, i)
		flags := podFlags(t, c, map[string]string{"POD_NAME": pod, "POD_NAMESPACE": namespace})
		if flags["id"] != pod {
			t.Errorf("%s: --id %q, want the pod name", pod, flags["id"])
		}
		peers, err := cluster.ParsePeers(flags["peers"])
		if err != nil {
			t.Fatalf("%s: %v", pod, err)
		}
		if len(peers) != 3 {
			t.Fatalf("%s: --peers names %d nodes, want 3", pod, len(peers))
		}
		if i == 0 {
			firstPeers = peers
		} else if cluster.ClusterHash(peers) != cluster.ClusterHash(firstPeers) {
			t.Errorf("%s: --peers differs from %s-0's", pod, nodesName)
		}
		var self *cluster.Peer
		for j := range peers {
			if peers[j].ID == pod {
				self = &peers[j]
			}
		}
		if self == nil {
			t.Fatalf("%s: not in --peers %s", pod, flags["peers"])
		}
		host := fmt.Sprintf("%s.%s.%s.svc.cluster.local", pod, peersName, namespace)
		for flag, port := range map[string]string{"raft-addr": "raft", "grpc-addr": "grpc", "http-addr": "http"} {
			want := fmt.Sprintf("%s:%d", host, containerPort(t, c, port))
			if flags[flag] != want {
				t.Errorf("%s: --%s %q, want %q (the pod's DNS name and its %s port)", pod, flag, flags[flag], want, port)
			}
			if err := cluster.ValidateAddr(flags[flag]); err != nil {
				t.Errorf("%s: --%s: %v", pod, flag, err)
			}
		}
		if self.RaftAddr != flags["raft-addr"] {
			t.Errorf("%s: --peers gives it %s, --raft-addr is %s", pod, self.RaftAddr, flags["raft-addr"])
		}
	}
}

func TestProbesUseTheHTTPPort(t *testing.T) {
	m := mustLoad(t)
	sts := m.statefulSets[nodesName]
	c := container(t, sts.Spec.Template.Spec, "dexd")
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"startupProbe", c.StartupProbe, "/healthz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP GET probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s path %q, want %q", p.name, p.probe.HTTPGet.Path, p.path)
		}
		if port := p.probe.HTTPGet.Port; port != intstr.FromString("http") && port != intstr.FromInt32(containerPort(t, c, "http")) {
			t.Errorf("%s port %s, want the http port", p.name, port.String())
		}
	}
}

func TestClientServiceReachesTheReadyPods(t *testing.T) {
	m := mustLoad(t)
	svc, sts := m.services[nodesName], m.statefulSets[nodesName]
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Errorf("the client Service %s is headless", nodesName)
	}
	// Its endpoints must be the Ready pods alone: the healthy members.
	if svc.Spec.PublishNotReadyAddresses {
		t.Errorf("the client Service %s publishes not-ready pods: clients would reach a node that is catching up or draining", nodesName)
	}
	if !selects(t, svc.Spec.Selector, sts) {
		t.Errorf("the client Service %s does not select the StatefulSet's pods", nodesName)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != intstr.FromString("grpc") {
		t.Errorf("the client Service %s ports %+v, want the grpc port alone", nodesName, svc.Spec.Ports)
	}
}

func TestDisruptionBudgetCoversTheNodesOnly(t *testing.T) {
	m := mustLoad(t)
	pdb := m.pdbs[nodesName]
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.MinAvailable != nil {
		t.Errorf("PDB maxUnavailable %v minAvailable %v, want maxUnavailable 1 alone", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	if pdb.Spec.Selector == nil {
		t.Fatal("PDB without a selector")
	}
	sts := m.statefulSets[nodesName]
	if !selects(t, pdb.Spec.Selector.MatchLabels, sts) || !selectsPods(t, pdb.Spec.Selector, sts.Spec.Template.Labels) {
		t.Error("the PDB does not select the StatefulSet's pods")
	}
	if selectsPods(t, pdb.Spec.Selector, m.deployments[workersName].Spec.Template.Labels) {
		t.Error("the PDB selects the Workers too")
	}
	if selectsPods(t, sts.Spec.Selector, m.deployments[workersName].Spec.Template.Labels) {
		t.Error("the StatefulSet's selector matches the Workers' pods")
	}
}

// SIGTERM is the drain: the grace period must outlast --drain-timeout plus
// the handover and the servers' stop (5 s each).
func TestTerminationGraceCoversTheDrain(t *testing.T) {
	m := mustLoad(t)
	sts := m.statefulSets[nodesName]
	c := container(t, sts.Spec.Template.Spec, "dexd")
	flags := podFlags(t, c, map[string]string{"POD_NAME": "dexd-0", "POD_NAMESPACE": namespace})
	drain, err := time.ParseDuration(flags["drain-timeout"])
	if err != nil {
		t.Fatalf("--drain-timeout: %v", err)
	}
	grace := sts.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second < drain+15*time.Second {
		t.Errorf("terminationGracePeriodSeconds %s, want at least --drain-timeout %s + 15s", show(grace), drain)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		t.Error("a preStop hook delays the SIGTERM that drains")
	}
}

func TestWorkersFollowTheLeaderThroughEveryNode(t *testing.T) {
	m := mustLoad(t)
	c := container(t, m.deployments[workersName].Spec.Template.Spec, "dexworker")
	sts := container(t, m.statefulSets[nodesName].Spec.Template.Spec, "dexd")
	flags := podFlags(t, c, map[string]string{"POD_NAME": "dexworker-abc"})
	var want []string
	for i := 0; i < 3; i++ {
		want = append(want, fmt.Sprintf("%s-%d.%s:%d", nodesName, i, peersName, containerPort(t, sts, "grpc")))
	}
	if got := flags["addr"]; got != "dex:///"+strings.Join(want, ",") {
		t.Errorf("dexworker --addr %q, want dex:/// with the three nodes' gRPC addresses", got)
	}
	if flags["ledger"] == "" || !mounted(c, filepath.Dir(flags["ledger"])) {
		t.Errorf("dexworker --ledger %q is not on a mounted volume (the root file system is read-only)", flags["ledger"])
	}
}

// Every flag the manifests pass is one the binary defines.
func TestFlagsExistInTheBinaries(t *testing.T) {
	m := mustLoad(t)
	for _, pc := range []struct {
		spec corev1.PodSpec
		name string
	}{
		{m.statefulSets[nodesName].Spec.Template.Spec, "dexd"},
		{m.deployments[workersName].Spec.Template.Spec, "dexworker"},
	} {
		known, err := cmdflags.Names(filepath.Join("..", "..", "cmd", pc.name))
		if err != nil {
			t.Fatal(err)
		}
		c := container(t, pc.spec, pc.name)
		if len(c.Command) != 1 || c.Command[0] != "/usr/local/bin/"+pc.name {
			t.Errorf("%s: command %v, want the image's /usr/local/bin/%s", pc.name, c.Command, pc.name)
		}
		for flag := range podFlags(t, c, nil) {
			if !known[flag] {
				t.Errorf("%s: --%s is not a flag of cmd/%s", pc.name, flag, pc.name)
			}
		}
	}
}

func TestEveryContainerRunsLocked(t *testing.T) {
	m := mustLoad(t)
	specs := map[string]corev1.PodSpec{}
	for n, s := range m.statefulSets {
		specs["StatefulSet "+n] = s.Spec.Template.Spec
	}
	for n, d := range m.deployments {
		specs["Deployment "+n] = d.Spec.Template.Spec
	}
	for owner, spec := range specs {
		for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
			where := owner + " container " + c.Name
			psc, csc := spec.SecurityContext, c.SecurityContext
			if csc == nil {
				csc = &corev1.SecurityContext{}
			}
			if psc == nil {
				psc = &corev1.PodSecurityContext{}
			}
			nonRoot := csc.RunAsNonRoot
			if nonRoot == nil {
				nonRoot = psc.RunAsNonRoot
			}
			user := csc.RunAsUser
			if user == nil {
				user = psc.RunAsUser
			}
			if nonRoot == nil || !*nonRoot || user == nil || *user == 0 {
				t.Errorf("%s: not forced to run as a non-root user (runAsNonRoot %s, runAsUser %s)", where, show(nonRoot), show(user))
			}
			if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
				t.Errorf("%s: allowPrivilegeEscalation is not false", where)
			}
			if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
				t.Errorf("%s: the root file system is writable", where)
			}
			if csc.Capabilities == nil || len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" || len(csc.Capabilities.Add) != 0 {
				t.Errorf("%s: capabilities %+v, want all dropped", where, csc.Capabilities)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("%s: no cpu and memory requests", where)
			}
			if c.Image == "" {
				t.Errorf("%s: no image", where)
			}
		}
	}
}

func TestDataDirIsOnTheClaim(t *testing.T) {
	m := mustLoad(t)
	sts := m.statefulSets[nodesName]
	c := container(t, sts.Spec.Template.Spec, "dexd")
	flags := podFlags(t, c, map[string]string{"POD_NAME": "dexd-0", "POD_NAMESPACE": namespace})
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("%d volume claim templates, want 1", len(sts.Spec.VolumeClaimTemplates))
	}
	claim := sts.Spec.VolumeClaimTemplates[0]
	var mountedAt string
	for _, vm := range c.VolumeMounts {
		if vm.Name == claim.Name {
			mountedAt = vm.MountPath
		}
	}
	if mountedAt == "" || flags["data-dir"] != mountedAt {
		t.Errorf("--data-dir %q, claim %q mounted at %q", flags["data-dir"], claim.Name, mountedAt)
	}
	if claim.Spec.Resources.Requests.Storage().IsZero() {
		t.Error("the claim requests no storage")
	}
}

// podFlags expands $(VAR) as the kubelet does and returns the --name=value
// arguments. Every argument must have that form.
func podFlags(t *testing.T, c *corev1.Container, env map[string]string) map[string]string {
	t.Helper()
	flags := map[string]string{}
	for _, a := range c.Args {
		for k, v := range env {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Fatalf("%s: argument %q is not --name=value", c.Name, a)
		}
		if _, dup := flags[name]; dup {
			t.Fatalf("%s: --%s given twice", c.Name, name)
		}
		if env != nil && strings.Contains(value, "$(") {
			t.Fatalf("%s: --%s=%s names a variable the pod does not define", c.Name, name, value)
		}
		flags[name] = value
	}
	return flags
}

func container(t *testing.T, spec corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

func containerPort(t *testing.T, c *corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %s", c.Name, name)
	return 0
}

func envFromField(t *testing.T, c *corev1.Container, name, field string) {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != field {
				t.Errorf("%s: env %s is not the downward API's %s", c.Name, name, field)
			}
			return
		}
	}
	t.Errorf("%s: no env %s", c.Name, name)
}

func mounted(c *corev1.Container, dir string) bool {
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == dir {
			return true
		}
	}
	return false
}

// selects reports whether a Service-style selector picks the StatefulSet's
// pods.
func selects(t *testing.T, sel map[string]string, sts *appsv1.StatefulSet) bool {
	t.Helper()
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(sts.Spec.Template.Labels))
}

func selectsPods(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// show prints what a pointer field holds, or "unset".
func show[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
