package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/strata-hpc/strata/bridge/internal/config"
	"github.com/strata-hpc/strata/bridge/internal/servespec"
)

// validInput is a small input that renders; the tables below change one
// thing each.
func validInput(t *testing.T) Input {
	t.Helper()
	rt, err := LoadRuntime(runtimesDir, "vllm")
	if err != nil {
		t.Fatal(err)
	}
	return Input{
		Spec:  servespec.Spec{Name: "m", ModelPath: "/shared/projects/m", Runtime: "vllm"},
		JobID: 7, User: "alice", Account: "acme-llm", Tenant: "acme", Project: "llm", Namespace: "strata-acme",
		Quota: acmeQuota, Runtime: rt, Mount: hostPathMount, SpreadKey: "kubernetes.io/hostname",
	}
}

// TestRenderErrors: an input whose objects could not be right is an
// error that says why, and renders nothing.
func TestRenderErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		change  func(*Input)
		wantErr string
	}{
		"model outside the root": {
			change: func(in *Input) { in.Spec.ModelPath = "/home/alice/model" },
			wantErr: "model /home/alice/model is outside the shared file system's root /shared: pods cannot reach it " +
				"(hint: save the model under /shared, or add its file system to models.mount in the bridge's config)",
		},
		"model in a sibling whose name starts like the root": {
			change:  func(in *Input) { in.Spec.ModelPath = "/sharedx/m" },
			wantErr: "model /sharedx/m is outside the shared file system's root /shared",
		},
		"model is the root itself": {
			change:  func(in *Input) { in.Spec.ModelPath = "/shared" },
			wantErr: "model /shared is outside the shared file system's root /shared",
		},
		"no runtime loaded": {
			change:  func(in *Input) { in.Runtime = Runtime{} },
			wantErr: "serve spec m: no runtime template (load one with LoadRuntime)",
		},
		"runtime is not the spec's": {
			change:  func(in *Input) { in.Spec.Runtime = "triton" },
			wantErr: `serve spec m asks for runtime "triton", and the template given is "vllm"`,
		},
		"no image anywhere": {
			change:  func(in *Input) { in.Runtime.Image = "" },
			wantErr: "serve spec m: runtime vllm has no image (hint: give image: in strata-serve.yaml)",
		},
		"invalid spec": {
			change:  func(in *Input) { in.Spec.Name = "M" },
			wantErr: `name: name "M" is not a DNS-1035 label`,
		},
		"invalid runtime": {
			change:  func(in *Input) { in.Runtime.Port = 0 },
			wantErr: "runtime vllm:\nport: port 0 is not from 1 to 65535",
		},
		"no job": {
			change:  func(in *Input) { in.JobID = 0 },
			wantErr: "job id 0: want the Slurm job that produced the model",
		},
		"namespace name": {
			change:  func(in *Input) { in.Namespace, in.Quota.Namespace = "Strata_Acme", "" },
			wantErr: `namespace "Strata_Acme" is not a namespace name`,
		},
		"another tenant's namespace": {
			change:  func(in *Input) { in.Namespace = "strata-other" },
			wantErr: `namespace "strata-other" is not the quota's (tenant acme, namespace strata-acme)`,
		},
		"another tenant's quota": {
			change:  func(in *Input) { in.Tenant = "other" },
			wantErr: `tenant "other" is given the quota of tenant "acme"`,
		},
		"no tenant": {
			change:  func(in *Input) { in.Tenant, in.Quota.Name = "", "" },
			wantErr: "serve spec m: no tenant",
		},
		"project that cannot be a label": {
			change:  func(in *Input) { in.Project = "llm team" },
			wantErr: `strata.io/project "llm team" cannot be a label value`,
		},
		"unknown mount kind": {
			change:  func(in *Input) { in.Mount.Kind = "cephfs" },
			wantErr: `mount kind "cephfs": want hostPath, nfs or pvc`,
		},
		"relative mount root": {
			change:  func(in *Input) { in.Mount.Root = "shared" },
			wantErr: `mount root "shared" is not an absolute path`,
		},
		"spread key": {
			change:  func(in *Input) { in.SpreadKey = "zone name" },
			wantErr: `spread key "zone name" is not a label key`,
		},
		"KServe mode": {
			change:  func(in *Input) { in.KServe, in.KServeDeploymentMode = true, "Serverless" },
			wantErr: `KServe deployment mode "Serverless": want Standard or RawDeployment`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := validInput(t)
			if _, err := Render(in); err != nil {
				t.Fatalf("the valid input fails: %v", err)
			}
			tc.change(&in)
			objs, err := Render(in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.wantErr)
			}
			if objs != nil {
				t.Errorf("objects came back with the error")
			}
		})
	}
}

// TestModelVolume: the model's Slurm-side path becomes the node's path
// (hostPath), the server's (nfs), or the claim's subPath (pvc), mounted
// read-only at /model; a model file is mounted as it is.
func TestModelVolume(t *testing.T) {
	ro := true
	for name, tc := range map[string]struct {
		mount     config.Mount
		model     string
		wantVol   corev1.VolumeSource
		wantSub   string
		wantError string
	}{
		"hostPath, same path on the nodes": {
			mount: config.Mount{Kind: config.MountHostPath, Path: "/shared", Root: "/shared"}, model: "/shared/p/m",
			wantVol: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/shared/p/m"}},
		},
		"hostPath, mounted elsewhere on the nodes": {
			mount: config.Mount{Kind: config.MountHostPath, Path: "/mnt/fs", Root: "/shared"}, model: "/shared/p/m",
			wantVol: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/fs/p/m"}},
		},
		"hostPath, a model file": {
			mount: config.Mount{Kind: config.MountHostPath, Path: "/mnt/fs", Root: "/shared"}, model: "/shared/p/m.gguf",
			wantVol: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/fs/p/m.gguf"}},
		},
		"nfs": {
			mount: config.Mount{Kind: config.MountNFS, Server: "10.0.0.5", Path: "/export/fs", Root: "/lustre"}, model: "/lustre/t/m",
			wantVol: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "10.0.0.5", Path: "/export/fs/t/m", ReadOnly: true}},
		},
		"pvc": {
			mount: config.Mount{Kind: config.MountPVC, ClaimName: "fs", Root: "/shared"}, model: "/shared/t/acme/m",
			wantVol: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "fs", ReadOnly: ro}},
			wantSub: "t/acme/m",
		},
		"root with a trailing slash": {
			mount: config.Mount{Kind: config.MountPVC, ClaimName: "fs", Root: "/shared/"}, model: "/shared/m",
			wantVol: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "fs", ReadOnly: ro}},
			wantSub: "m",
		},
		"outside": {
			mount: config.Mount{Kind: config.MountNFS, Server: "s", Path: "/e", Root: "/lustre"}, model: "/shared/m",
			wantError: "outside the shared file system's root /lustre",
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := validInput(t)
			in.Mount, in.Spec.ModelPath = tc.mount, tc.model
			vol, mount, err := modelVolume(&in)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("err = %v, want %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(corev1.Volume{Name: "model", VolumeSource: tc.wantVol}, vol); diff != "" {
				t.Errorf("volume (-want +got):\n%s", diff)
			}
			want := corev1.VolumeMount{Name: "model", MountPath: "/model", ReadOnly: true, SubPath: tc.wantSub}
			if diff := cmp.Diff(want, mount); diff != "" {
				t.Errorf("mount (-want +got):\n%s", diff)
			}
		})
	}
}

// TestContainer: what the pod runs, for choices the goldens show only
// once: the spec's image, args and env win over the runtime's; a spec
// with more GPUs passes them to the placeholders; no GPUs means no GPU
// resources and no toleration; the startup probe covers the runtime's
// startup timeout.
func TestContainer(t *testing.T) {
	in := validInput(t)
	in.Spec.Image = "registry.example.org/vllm:patched"
	in.Spec.GPUs = 4
	in.Spec.Args = []string{"--max-model-len=4096", "--x={{.Version}}"}
	in.Spec.Env = map[string]string{"HF_HUB_OFFLINE": "0", "A": "{{.Name}}"}
	pod, err := podSpec(&in, corev1.Volume{Name: "model"}, corev1.VolumeMount{Name: "model"})
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Containers[0]
	if c.Image != "registry.example.org/vllm:patched" {
		t.Errorf("image %s, want the spec's", c.Image)
	}
	wantArgs := []string{"/model", "--served-model-name=m", "--port=8000", "--tensor-parallel-size=4",
		"--max-model-len=4096", "--x=job-7"}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args: runtime's model arg, runtime's args, spec's args (-want +got):\n%s", diff)
	}
	wantEnv := []corev1.EnvVar{{Name: "A", Value: "m"}, {Name: "HF_HUB_OFFLINE", Value: "0"}}
	if diff := cmp.Diff(wantEnv, c.Env); diff != "" {
		t.Errorf("env: sorted, the spec's value wins (-want +got):\n%s", diff)
	}
	if q := c.Resources.Limits[GPUResource]; q.Value() != 4 {
		t.Errorf("GPU limit %s, want 4", q.String())
	}
	// vllm.yaml: startup_timeout 30m, probed every 10s.
	if p := c.StartupProbe; p == nil || p.FailureThreshold*p.PeriodSeconds != int32((30*time.Minute).Seconds()) {
		t.Errorf("startup probe %+v does not cover 30m", p)
	}

	in = validInput(t)
	in.Runtime.GPUs = 0
	in.Runtime.StartupTimeout = 0
	pod, err = podSpec(&in, corev1.Volume{Name: "model"}, corev1.VolumeMount{Name: "model"})
	if err != nil {
		t.Fatal(err)
	}
	c = pod.Containers[0]
	if len(c.Resources.Limits) != 0 || len(c.Resources.Requests) != 0 || pod.Tolerations != nil {
		t.Errorf("no GPUs, cpu or memory: resources %+v, tolerations %+v", c.Resources, pod.Tolerations)
	}
	if c.StartupProbe != nil {
		t.Errorf("startup_timeout 0 gave a startup probe")
	}
	if got := c.Args[len(c.Args)-1]; got != "--tensor-parallel-size=0" {
		t.Errorf("the GPUs placeholder is %q with no GPUs", got)
	}
}

// TestShippedRuntimes: the templates in etc/strata/bridge/runtimes load,
// with the ports and probe paths of the servers' own documentation.
func TestShippedRuntimes(t *testing.T) {
	for name, want := range map[string]struct {
		port              int
		ready, live       string
		gpus              int
		imagePrefix       string
		modelArgHasTarget bool
	}{
		// vLLM's OpenAI server: GET /health on its port (8000 by default).
		"vllm": {port: 8000, ready: "/health", live: "/health", gpus: 1, imagePrefix: "vllm/vllm-openai:", modelArgHasTarget: true},
		// Triton's HTTP endpoint (8000 by default): KServe v2 health paths.
		"triton": {port: 8000, ready: "/v2/health/ready", live: "/v2/health/live", gpus: 1,
			imagePrefix: "nvcr.io/nvidia/tritonserver:", modelArgHasTarget: true},
		// Generic: the spec brings the image; the server reads $MODEL_PATH.
		"generic": {port: 8080, ready: "/healthz", live: "/healthz"},
	} {
		t.Run(name, func(t *testing.T) {
			rt, err := LoadRuntime(runtimesDir, name)
			if err != nil {
				t.Fatal(err)
			}
			if rt.Name != name || rt.Port != want.port || rt.ReadinessPath != want.ready || rt.LivenessPath != want.live ||
				rt.GPUs != want.gpus || !strings.HasPrefix(rt.Image, want.imagePrefix) || (want.imagePrefix == "") != (rt.Image == "") {
				t.Errorf("got %+v", rt)
			}
			if want.modelArgHasTarget != strings.Contains(rt.ModelArg, "{{.ModelPath}}") {
				t.Errorf("model_arg %q", rt.ModelArg)
			}
			if name == "generic" && rt.Env["MODEL_PATH"] != "{{.ModelPath}}" {
				t.Errorf("generic env %v lacks MODEL_PATH", rt.Env)
			}
		})
	}
	names := Runtimes(runtimesDir)
	if diff := cmp.Diff([]string{"generic", "triton", "vllm"}, names); diff != "" {
		t.Errorf("shipped runtimes (-want +got):\n%s", diff)
	}
}

func TestLoadRuntimeErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		dir, runtime, wantErr string
	}{
		"unknown runtime": {dir: runtimesDir, runtime: "tgi",
			wantErr: `unknown runtime "tgi": no ../../../etc/strata/bridge/runtimes/tgi.yaml (hint: the runtimes are generic, triton, vllm)`},
		"no runtimes at all": {dir: t.TempDir(), runtime: "vllm", wantErr: "(hint: the runtimes are (none))"},
		"a path, not a name": {dir: runtimesDir, runtime: "../runtimes/vllm", wantErr: "is not a runtime template name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadRuntime(tc.dir, tc.runtime)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestBadRuntimes: each testdata/runtimes/*.bad.yaml fails with exactly
// the diagnostics of its "# want:" lines.
func TestBadRuntimes(t *testing.T) {
	files, err := filepath.Glob("testdata/runtimes/*.bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no bad runtimes")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					want = append(want, f+":"+w)
				}
			}
			if len(want) == 0 {
				t.Fatal(`no "# want:" lines`)
			}
			_, err = ParseRuntime(f, "x", data)
			if err == nil {
				t.Fatal("accepted")
			}
			if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
