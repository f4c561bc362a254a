package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// object is one decoded document of a manifest file.
type object struct {
	file string
	kind string
	obj  any
}

// decoders are the kinds the manifests may hold, each with its Go type
// from the Kubernetes API (and the Prometheus Operator's for monitors).
var decoders = map[string]func() any{
	"v1/Namespace":      func() any { return &corev1.Namespace{} },
	"v1/ServiceAccount": func() any { return &corev1.ServiceAccount{} },
	"v1/ConfigMap":      func() any { return &corev1.ConfigMap{} },
	"v1/Service":        func() any { return &corev1.Service{} },
	"apps/v1/DaemonSet": func() any { return &appsv1.DaemonSet{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PodMonitor":     func() any { return &monitoringv1.PodMonitor{} },
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// manifests strictly decodes every document of deploy/kubernetes/*.yaml:
// an unknown or misspelt field, a wrong type or an unknown kind fails.
// (Schema downloads are not reachable here; the API types are the schema.)
func manifests(t testing.TB) []object {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "kubernetes", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no deploy/kubernetes/*.yaml")
	}
	var out []object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range docSeparator.Split(string(data), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s document %d: %v", filepath.Base(f), i+1, err)
			}
			kind := tm.APIVersion + "/" + tm.Kind
			newObj, ok := decoders[kind]
			if !ok {
				t.Fatalf("%s document %d: kind %s is not one this test knows", filepath.Base(f), i+1, kind)
			}
			obj := newObj()
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", filepath.Base(f), i+1, tm.Kind, err)
			}
			out = append(out, object{filepath.Base(f), tm.Kind, obj})
		}
	}
	return out
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func configMaps(t testing.TB) []*corev1.ConfigMap {
	var out []*corev1.ConfigMap
	for _, o := range manifests(t) {
		if cm, ok := o.obj.(*corev1.ConfigMap); ok {
			out = append(out, cm)
		}
	}
	return out
}

// TestKubernetesManifests decodes every manifest strictly and checks each
// role's DaemonSet against what the host needs: the container layout, the
// capabilities of its launcher and its plugins, probes, the ConfigMap, and
// a Service, ServiceMonitor and PodMonitor that select its pods.
func TestKubernetesManifests(t *testing.T) {
	objs := manifests(t)
	byKind := map[string]map[string]any{}
	for _, o := range objs {
		m, ok := o.obj.(metav1.Object)
		if !ok {
			t.Fatalf("%s: %s has no metadata", o.file, o.kind)
		}
		if o.kind != "Namespace" && m.GetNamespace() != "plexporter" {
			t.Errorf("%s: %s %s is in namespace %q, want plexporter", o.file, o.kind, m.GetName(), m.GetNamespace())
		}
		if byKind[o.kind] == nil {
			byKind[o.kind] = map[string]any{}
		}
		if _, dup := byKind[o.kind][m.GetName()]; dup {
			t.Errorf("two %s named %s", o.kind, m.GetName())
		}
		byKind[o.kind][m.GetName()] = o.obj
	}
	roles, _ := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "roles", "*"))
	if len(roles) == 0 {
		t.Fatal("no roles")
	}
	for _, dir := range roles {
		role := filepath.Base(dir)
		name := "plexporter-" + role
		t.Run(role, func(t *testing.T) {
			ds, ok := byKind["DaemonSet"][name].(*appsv1.DaemonSet)
			if !ok {
				t.Fatalf("no DaemonSet %s", name)
			}
			cm, ok := byKind["ConfigMap"][name].(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("no ConfigMap %s", name)
			}
			plugins := enabledPlugins(t, roleConfig{"ConfigMap " + name, strings.TrimPrefix(name, "plexporter-"), cm.Data["plexporter.yml"]})
			checkDaemonSet(t, ds, cm, plugins)
			labels := ds.Spec.Template.Labels

			svc, ok := byKind["Service"][name].(*corev1.Service)
			if !ok {
				t.Fatalf("no Service %s", name)
			}
			if !selects(svc.Spec.Selector, labels) {
				t.Errorf("Service %s selects %v, not the DaemonSet's pods %v", name, svc.Spec.Selector, labels)
			}
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
				t.Errorf("Service %s ports %+v, want one port named metrics to the container port metrics", name, svc.Spec.Ports)
			}
			sm, ok := byKind["ServiceMonitor"][name].(*monitoringv1.ServiceMonitor)
			if !ok {
				t.Fatalf("no ServiceMonitor %s", name)
			}
			if !selects(sm.Spec.Selector.MatchLabels, svc.Labels) || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" {
				t.Errorf("ServiceMonitor %s must select Service %s (labels %v) on port metrics: %+v", name, name, svc.Labels, sm.Spec)
			}
			pm, ok := byKind["PodMonitor"][name].(*monitoringv1.PodMonitor)
			if !ok {
				t.Fatalf("no PodMonitor %s", name)
			}
			if !selects(pm.Spec.Selector.MatchLabels, labels) || len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Port == nil || *pm.Spec.PodMetricsEndpoints[0].Port != "metrics" {
				t.Errorf("PodMonitor %s must select the DaemonSet's pods (labels %v) on port metrics: %+v", name, labels, pm.Spec)
			}
		})
	}
}

// selects reports whether a selector's labels are all in labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// needsHostNetwork are the plugins that read the node's network namespace
// (ethtool's ioctl and netlink, rdma's netdev names).
var needsHostNetwork = []string{"ethtool", "rdma"}

func checkDaemonSet(t *testing.T, ds *appsv1.DaemonSet, cm *corev1.ConfigMap, plugins []string) {
	t.Helper()
	pod := ds.Spec.Template.Spec
	if !selects(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) {
		t.Errorf("the selector %v does not select the template's labels %v", ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	hostNet := slices.ContainsFunc(plugins, func(p string) bool { return slices.Contains(needsHostNetwork, p) })
	if pod.HostNetwork != hostNet {
		t.Errorf("hostNetwork is %v; plugins %v need it: %v", pod.HostNetwork, plugins, hostNet)
	}
	if pod.HostPID {
		t.Error("hostPID: no plugin reads the node's processes through the pod's PID namespace")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token it never uses")
	}

	for _, arg := range []string{"--path.sysfs=/host/sys", "--path.procfs=/host/proc", "--path.rootfs=/host/root", "--config.file=/etc/plexporter/plexporter.yml"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("container args %v lack %s", c.Args, arg)
		}
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for mountPath, hostPath := range map[string]string{"/host/sys": "/sys", "/host/proc": "/proc", "/host/root": "/"} {
		m, ok := mounts[mountPath]
		if !ok {
			t.Errorf("nothing mounted at %s", mountPath)
			continue
		}
		v := volumes[m.Name]
		if v.HostPath == nil || v.HostPath.Path != hostPath || !m.ReadOnly {
			t.Errorf("%s must be the node's %s, read-only: volume %+v, mount %+v", mountPath, hostPath, v, m)
		}
	}
	if m, ok := mounts["/etc/plexporter"]; !ok || volumes[m.Name].ConfigMap == nil || volumes[m.Name].ConfigMap.Name != cm.Name {
		t.Errorf("/etc/plexporter must be ConfigMap %s", cm.Name)
	}
	if m, ok := mounts["/run/plexporter"]; !ok || volumes[m.Name].EmptyDir == nil {
		t.Error("/run/plexporter (the host's runtime directory: the plugins' sockets) must be an emptyDir: the root file system is read-only")
	}
	// attribution's default socket is the node's
	// /var/lib/kubelet/pod-resources/kubelet.sock under --path.rootfs.
	const podResources = "/host/root/var/lib/kubelet/pod-resources"
	if m, ok := mounts[podResources]; ok {
		if v := volumes[m.Name]; v.HostPath == nil || v.HostPath.Path != "/var/lib/kubelet/pod-resources" || !m.ReadOnly {
			t.Errorf("%s must be the node's /var/lib/kubelet/pod-resources, read-only: volume %+v, mount %+v", podResources, v, m)
		}
	} else if slices.Contains(plugins, "attribution") {
		t.Errorf("attribution needs the node's /var/lib/kubelet/pod-resources at %s", podResources)
	}
	if slices.Contains(plugins, "nvme") {
		if m, ok := mounts["/host/dev"]; !ok || volumes[m.Name].HostPath == nil || volumes[m.Name].HostPath.Path != "/dev" {
			t.Error("nvme needs the node's /dev at /host/dev")
		}
	}

	sc := c.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Fatal("the container must run as root: the host builds the plugins' sandboxes")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("want allowPrivilegeEscalation: false (no_new_privs) and readOnlyRootFilesystem: true")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged: the capabilities below are what the host needs")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Error("capabilities must drop ALL and add what the host needs")
	} else {
		var got []string
		for _, c := range sc.Capabilities.Add {
			got = append(got, "CAP_"+string(c))
		}
		want := sortedUnique(append(slices.Clone(launcherCaps), grantedCaps(t, cm, plugins)...))
		if got = sortedUnique(got); !slices.Equal(got, want) {
			t.Errorf("capabilities add %v, want the launcher's and the role's plugins' %v", got, want)
		}
	}

	port := ""
	for _, p := range c.Ports {
		if p.Name == "metrics" && p.ContainerPort == 9880 {
			port = p.Name
		}
	}
	if port == "" {
		t.Errorf("no container port metrics (9880): %+v", c.Ports)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/ready"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != port {
			t.Errorf("want an HTTP probe of %s on port %s, have %+v", path, port, probe)
		}
	}
}

// grantedCaps are the capabilities the role's plugins are granted: each
// manifest's, or the ConfigMap's override of it.
func grantedCaps(t *testing.T, cm *corev1.ConfigMap, plugins []string) []string {
	t.Helper()
	var f struct {
		Plugins map[string]struct {
			Manifest *struct {
				Capabilities []string `json:"capabilities"`
			} `json:"manifest"`
		} `json:"plugins"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["plexporter.yml"]), &f); err != nil {
		t.Fatalf("ConfigMap %s: %v", cm.Name, err)
	}
	var caps []string
	for _, p := range plugins {
		if m := f.Plugins[p].Manifest; m != nil && m.Capabilities != nil {
			caps = append(caps, m.Capabilities...)
			continue
		}
		caps = append(caps, manifestCaps(t, []string{p})...)
	}
	return caps
}

func (o object) String() string { return fmt.Sprintf("%s %s", o.file, o.kind) }
