package templates

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/jobpolicy"
)

// TestContainers renders a template with an image under each runtime to
// its golden job (testdata/render/container-<runtime>.json; -update
// rewrites them), and checks what each runtime must do.
func TestContainers(t *testing.T) {
	set, err := Load("testdata/container")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := mustGet(t, set, "train-container")
	for _, rt := range []Runtime{Pyxis, Apptainer, OCI} {
		t.Run(string(rt), func(t *testing.T) {
			spec, err := set.WithContainers(Containers{Runtime: rt}).Render("train-container", nil, alice)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "render", "container-"+string(rt)+".json"), spec)
			if !strings.Contains(strings.Join(spec.Environment, "\n"), "STRATA_IMAGE=registry.example.com/acme/train:2.1") {
				t.Errorf("no STRATA_IMAGE in the environment: %v", spec.Environment)
			}
			switch rt {
			case OCI:
				if spec.Container != "/srv/strata/bundles/registry.example.com/acme/train:2.1" || spec.Script != tmpl.Script {
					t.Errorf("oci: container %q, script changed %v; want the bundle and the template's script", spec.Container, spec.Script != tmpl.Script)
				}
			default:
				if spec.Container != "" || !strings.Contains(spec.Script, tmpl.Script) {
					t.Errorf("%s: container %q; the script must carry the template's, whole:\n%s", rt, spec.Container, spec.Script)
				}
			}
		})
	}
	custom, err := set.WithContainers(Containers{Runtime: OCI, Bundles: "/var/lib/bundles"}).Render("train-container", nil, alice)
	if err != nil || custom.Container != "/var/lib/bundles/registry.example.com/acme/train:2.1" {
		t.Errorf("bundles directory: %q, %v", custom.Container, err)
	}
	if _, err := set.Render("train-container", nil, alice); err == nil || !strings.Contains(err.Error(), "set containers.runtime") {
		t.Errorf("no runtime: %v; want a refusal that says to set containers.runtime", err)
	}
}

// TestContainerWrapperRuns runs the pyxis and Apptainer batch scripts
// with bash, srun and apptainer being stand-ins that record their
// arguments and the script they are given to run: the script reaches the
// runtime byte for byte (nothing in it expanded by the wrapper), with the
// image, the mounts and the working directory.
func TestContainerWrapperRuns(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	set, err := Load("testdata/container")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := mustGet(t, set, "train-container")
	for rt, wantArgs := range map[Runtime]string{
		Pyxis: "--nodes=1 --ntasks=1 --cpus-per-task=4 --container-image=registry.example.com/acme/train:2.1 " +
			"--container-mounts=SCRIPT:/run/strata/job-script:ro,/shared/projects/acme/llm:/shared/projects/acme/llm " +
			"--container-workdir=/shared/projects/acme/llm /run/strata/job-script",
		Apptainer: "exec --nv --bind SCRIPT:/run/strata/job-script:ro --bind /shared/projects/acme/llm --pwd /shared/projects/acme/llm " +
			"docker://registry.example.com/acme/train:2.1 /run/strata/job-script",
	} {
		t.Run(string(rt), func(t *testing.T) {
			spec, err := set.WithContainers(Containers{Runtime: rt}).Render("train-container", nil, alice)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			if err := os.Mkdir(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			// The stand-in saves its arguments, and the file mounted at
			// /run/strata/job-script.
			stand := `#!/bin/sh
printf '%s\n' "$@" > "$REC/args"
for a in "$@"; do
  case "$a" in
  --container-mounts=*) src=${a#--container-mounts=}; src=${src%%:*} ;;
  *:/run/strata/job-script:ro) src=${a%%:*} ;;
  esac
done
cp "$src" "$REC/script"
echo "$src" > "$REC/src"
`
			for _, name := range []string{"srun", "apptainer"} {
				if err := os.WriteFile(filepath.Join(bin, name), []byte(stand), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bash, "-c", spec.Script)
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "REC=" + dir, "TMPDIR=" + dir, "SLURM_CPUS_ON_NODE=4"}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("run the batch script: %v\n%s", err, out)
			}
			got := mustRead(t, filepath.Join(dir, "script"))
			if got != tmpl.Script {
				t.Errorf("the runtime got another script (-want +got):\n%s", cmp.Diff(tmpl.Script, got))
			}
			src := strings.TrimSpace(mustRead(t, filepath.Join(dir, "src")))
			args := strings.ReplaceAll(strings.Join(strings.Fields(mustRead(t, filepath.Join(dir, "args"))), " "), src, "SCRIPT")
			if diff := cmp.Diff(wantArgs, args); diff != "" {
				t.Errorf("arguments (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(src); !os.IsNotExist(err) {
				t.Errorf("the script file %s is left behind: %v", src, err)
			}
		})
	}
}

// TestContainersValidate: the runtime and bundle directory of the
// portal's config are checked.
func TestContainersValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		c       Containers
		wantErr string
	}{
		"none":         {Containers{}, ""},
		"oci":          {Containers{Runtime: OCI, Bundles: "/srv/bundles"}, ""},
		"unknown":      {Containers{Runtime: "docker"}, `"docker" is not a container runtime`},
		"relative":     {Containers{Runtime: OCI, Bundles: "bundles"}, "not an absolute, clean directory"},
		"root bundles": {Containers{Runtime: OCI, Bundles: "/"}, "not an absolute, clean directory"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.c.Validate()
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestValidImage: image references a template may name.
func TestValidImage(t *testing.T) {
	for img, want := range map[string]bool{
		"ubuntu":                                    true,
		"nvcr.io/nvidia/pytorch:25.04-py3":          true,
		"registry.example.com:5000/acme/x:v1":       true,
		"acme/x@sha256:" + strings.Repeat("ab", 32): true,
		"Ubuntu":        false,
		"acme/../x":     false,
		"acme//x":       false,
		"acme/x:":       false,
		"acme/x;reboot": false,
		"acme/x y":      false,
		"/srv/images/x": false,
		"acme/x,ro":     false,
		"":              false,
	} {
		if got := ValidImage(img); got != want {
			t.Errorf("ValidImage(%q) = %v, want %v", img, got, want)
		}
	}
}

// TestContainerPolicy: with the policy attached, the image of a template
// is held to its tenant's allow-list under every runtime, pyxis and
// Apptainer included (which job_submit.lua cannot see); the shipped
// example policy lists no images for acme, so none may run.
func TestContainerPolicy(t *testing.T) {
	set, err := Load("testdata/container")
	if err != nil {
		t.Fatal(err)
	}
	set = set.WithPolicy(examplePolicy(t))
	for _, rt := range []Runtime{Pyxis, Apptainer, OCI} {
		_, err := set.WithContainers(Containers{Runtime: rt}).Render("train-container", nil, alice)
		var r *jobpolicy.Refusal
		if !errors.As(err, &r) || !strings.HasPrefix(r.Message, "strata: tenant acme may run no container images (registry.example.com/acme/train:2.1): add the image to the tenant's images (policy.yaml:") {
			t.Errorf("%s: %v; want the allow-list's refusal", rt, err)
		}
	}
	allowed := *set.Policy()
	allowed.Accounts = maps.Clone(allowed.Accounts)
	a := allowed.Accounts["acme-llm"]
	a.Images = []string{"registry.example.com/acme/*"}
	allowed.Accounts["acme-llm"] = a
	for _, rt := range []Runtime{Pyxis, Apptainer, OCI} {
		if _, err := set.WithPolicy(&allowed).WithContainers(Containers{Runtime: rt}).Render("train-container", nil, alice); err != nil {
			t.Errorf("%s, the image allowed: %v", rt, err)
		}
	}
}

// TestREADMEShowsTheShippedOCIConf: the oci.conf portal-api/README.md
// shows under Containers is the shipped one (etc/slurm/oci.conf, which the
// node bed runs), every setting in its order, so the README cannot drift
// from what a site installs.
func TestREADMEShowsTheShippedOCIConf(t *testing.T) {
	conf, err := os.ReadFile("../../../etc/slurm/oci.conf")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range strings.Split(string(conf), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, block := range strings.Split(string(readme), "```")[1:] {
		if strings.Contains(block, "RunTimeRun=") {
			for _, l := range strings.Split(block, "\n") {
				if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
					got = append(got, l)
				}
			}
			break
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("portal-api/README.md's oci.conf is not etc/slurm/oci.conf's settings (-shipped +README):\n%s", d)
	}
}
