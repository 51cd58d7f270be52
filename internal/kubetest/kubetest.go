// Package kubetest gives integration tests the Kubernetes test bed that
// test/testbed/k8s/testbed.sh started (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, and kwok faking the kubelets of
// nodes with nvidia.com/gpu): a client-go *rest.Config for its admin, a
// fresh namespace per test, a lock for tests that need the cluster's GPUs to
// themselves, and the daemons' logs when a test fails.
//
// STRATA_KUBE_ENV names the bed's environment file (make test-integration
// sets it to /var/lib/strata/testbed/k8s/env); STRATA_KUBECONFIG, a plain
// kubeconfig, is used when it is not set. With neither, tests are skipped,
// except when CI is "true": there they fail, so a missing bed cannot pass
// silently.
//
// Tests share one bed, with the tests of other packages running at the same
// time: each works in its own namespace. A test whose expectations depend on
// the whole cluster's capacity (how many GPU pods fit) takes the bed with
// ConfigExclusive instead of Config.
package kubetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Environment variables that point at the bed.
const (
	EnvVar        = "STRATA_KUBE_ENV"   // the environment file testbed.sh writes
	KubeconfigVar = "STRATA_KUBECONFIG" // a kubeconfig, when EnvVar is not set
)

// Labels and annotations Namespace puts on the namespaces it creates, so a
// person can tell leftovers of tests from anything else.
const (
	LabelTest      = "strata.io/test"
	AnnotationTest = "strata.io/test-name"
)

// Bed is a running Kubernetes test bed.
type Bed struct {
	Name        string   // instance name ("k8s")
	Kubeconfig  string   // path of the admin kubeconfig
	Server      string   // "https://127.0.0.1:16443"
	Version     string   // "v1.37.2", from the running apiserver
	Nodes       []string // the fake GPU nodes: "kwok-gpu-1", …
	GPUsPerNode int      // allocatable GPUResource on each node
	GPUResource string   // "nvidia.com/gpu"
	Logs        string   // folder of the daemons' logs; "" when unknown
	dir         string   // instance folder: holds the test lock
}

var errNoBed = errors.New("no Kubernetes test bed: neither " + EnvVar + " nor " + KubeconfigVar + " is set")

// Load reads the environment file testbed.sh up wrote.
func Load(path string) (*Bed, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w (is the Kubernetes test bed up? make kube-up)", err)
	}
	defer f.Close()
	kv, err := parseEnv(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range []string{"STRATA_KUBECONFIG", "STRATA_KUBE_SERVER", "STRATA_KUBE_NODES", "STRATA_KUBE_GPUS_PER_NODE"} {
		if kv[k] == "" {
			return nil, fmt.Errorf("%s: no %s: not an environment file of test/testbed/k8s/testbed.sh", path, k)
		}
	}
	b := &Bed{
		Name: kv["STRATA_KUBE_NAME"], Kubeconfig: kv["STRATA_KUBECONFIG"], Server: kv["STRATA_KUBE_SERVER"],
		Version: kv["STRATA_KUBE_VERSION"], Nodes: strings.Fields(kv["STRATA_KUBE_NODES"]),
		GPUResource: kv["STRATA_KUBE_GPU_RESOURCE"], Logs: kv["STRATA_KUBE_LOGS"], dir: filepath.Dir(path),
	}
	if b.GPUsPerNode, err = strconv.Atoi(kv["STRATA_KUBE_GPUS_PER_NODE"]); err != nil {
		return nil, fmt.Errorf("%s: STRATA_KUBE_GPUS_PER_NODE: %w", path, err)
	}
	if b.GPUResource == "" {
		b.GPUResource = "nvidia.com/gpu"
	}
	return b, nil
}

// parseEnv reads KEY=value lines; blank lines and # comments are skipped
// and one pair of double quotes around a value is removed.
func parseEnv(r io.Reader) (map[string]string, error) {
	kv := map[string]string{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\"") {
			return nil, fmt.Errorf("line %d: want KEY=value, got %q", n, line)
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		kv[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return kv, nil
}

// find picks the bed from the environment: the environment file if one is
// named, else a bare kubeconfig.
func find(getenv func(string) string) (*Bed, error) {
	if f := getenv(EnvVar); f != "" {
		return Load(f)
	}
	if k := getenv(KubeconfigVar); k != "" {
		return &Bed{Name: "kubeconfig", Kubeconfig: k, GPUResource: "nvidia.com/gpu", dir: filepath.Dir(k)}, nil
	}
	return nil, errNoBed
}

// Config returns the admin's client configuration for the bed, skipping the
// test when no bed is configured (failing it under CI=true). The test holds
// the bed shared until it ends: other tests may run beside it, but not one
// that took it with ConfigExclusive.
func Config(t testing.TB) *rest.Config {
	t.Helper()
	return config(t, syscall.LOCK_SH)
}

// ConfigExclusive is Config for a test that needs the cluster to itself, such
// as one that counts how many GPU pods fit: it waits until no other test, in
// any package, holds the bed. A test must not call both Config and
// ConfigExclusive (it would wait for itself).
func ConfigExclusive(t testing.TB) *rest.Config {
	t.Helper()
	return config(t, syscall.LOCK_EX)
}

func config(t testing.TB, how int) *rest.Config {
	t.Helper()
	b, err := find(os.Getenv)
	if errors.Is(err, errNoBed) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v, and CI=true, so this test fails instead of skipping: run it through make test-integration", err)
		}
		t.Skipf("%v: run make test-integration, or make kube-up and %s=/var/lib/strata/testbed/k8s/env", err, EnvVar)
	}
	if err != nil {
		t.Fatalf("Kubernetes test bed: %v", err)
	}
	b.lock(t, how)
	b.dumpLogsOnFailure(t)
	cfg, err := b.RESTConfig()
	if err != nil {
		t.Fatalf("Kubernetes test bed %s: %v", b.Name, err)
	}
	if err := Ready(Context(t), cfg); err != nil {
		t.Fatalf("Kubernetes test bed %s: %v (is it up? make kube-status)", b.Name, err)
	}
	return cfg
}

// RESTConfig loads the bed's kubeconfig.
func (b *Bed) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", b.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", b.Kubeconfig, err)
	}
	cfg.UserAgent = "strata-integration-test"
	// client-go's default (5 QPS) makes polling tests wait on the client, not the cluster.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Ready asks the apiserver's /readyz, with cfg's credentials and CA.
func Ready(ctx context.Context, cfg *rest.Config) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.Host, "/")+"/readyz", nil)
	if err != nil {
		return fmt.Errorf("readyz request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("kube-apiserver at %s does not answer: %w", cfg.Host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("kube-apiserver at %s is not ready: HTTP %d: %s", cfg.Host, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// validPrefix checks a namespace prefix: the apiserver appends "-" and 5
// characters, and a namespace name is a DNS label of at most 63.
func validPrefix(prefix string) error {
	if len(prefix) > 57 || !dns1123Label.MatchString(prefix) {
		return fmt.Errorf("namespace prefix %q: want at most 57 lower-case letters, digits and '-', starting and ending with a letter or digit", prefix)
	}
	return nil
}

// Namespace creates a namespace named prefix-<5 random characters> and
// deletes it when the test ends, without waiting for it to go (that takes
// ~5 s: the namespace controller deletes everything in it first).
func Namespace(t testing.TB, cfg *rest.Config, prefix string) string {
	t.Helper()
	if err := validPrefix(prefix); err != nil {
		t.Fatal(err)
	}
	cs, err := corev1client.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	ns, err := cs.Namespaces().Create(Context(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: prefix + "-",
		Labels:       map[string]string{LabelTest: "true"},
		Annotations:  map[string]string{AnnotationTest: t.Name()},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s-*: %v", prefix, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := cs.Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// Context is a context that ends with the test or after five minutes.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// lock takes the bed's lock (flock, so it holds across the test processes
// of all packages) until the test ends.
func (b *Bed) lock(t testing.TB, how int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(b.dir, "test.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("lock the Kubernetes test bed: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		t.Fatalf("lock the Kubernetes test bed: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() })
}

// dumpLogsOnFailure prints the tails of the daemons' logs when t fails.
func (b *Bed) dumpLogsOnFailure(t testing.TB) {
	if b.Logs == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		files, _ := filepath.Glob(filepath.Join(b.Logs, "*.log"))
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil || len(data) == 0 {
				continue
			}
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			if len(lines) > 25 {
				lines = lines[len(lines)-25:]
			}
			t.Logf("==> %s (Kubernetes test bed %s) <==\n%s", f, b.Name, strings.Join(lines, "\n"))
		}
	})
}
