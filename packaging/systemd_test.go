//go:build integration

package packaging

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/testbed/nodeexec"
)

// upgradeVersion is the version the packages upgrade to: after oldVersion.
const upgradeVersion = "0.0.1~git1.upgrade"

// TestUpgradeRestartsUnderSystemd shows the scriptlets under a real
// systemd, where the install tests' chroot has only a systemctl that
// records its calls: in the node bed's VM booted with systemd as PID 1
// (vm.sh start --systemd), strata-portal-api's older package is installed
// and its unit started; dpkg -i of the newer package, with no input,
// try-restarts it (a new main process, running the new file), as Debian's
// deb-systemd-invoke does; dpkg -r stops it. The portal's unit starts
// with a configuration of files alone (its cluster's slurmrestd may be
// down: it serves and polls again), its check-config first.
func TestUpgradeRestartsUnderSystemd(t *testing.T) {
	start := time.Now()
	repo := repoRoot(t)
	vm := bootSystemdVM(t, repo)

	// While the VM boots: the two packages, the same binary at two versions.
	const part, unit, binary = "strata-portal-api", "strata-portal-api.service", "/usr/bin/strata-portal-api"
	bin := binariesOf(t, repo, "strata-portal-api")
	nfpm := nfpmTool(t, repo)
	serve := t.TempDir()
	for name, version := range map[string]string{"old.deb": oldVersion, "new.deb": upgradeVersion} {
		deb := pack(t, nfpm, repo, bin, version, []string{part})[0]
		if err := os.Rename(deb, filepath.Join(serve, name)); err != nil {
			t.Fatal(err)
		}
	}
	// The guest reaches the host's loopback as 10.0.2.2 (qemu's user network).
	srv := httptest.NewServer(http.FileServer(http.Dir(serve)))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	t.Logf("packages built at +%.0fs", time.Since(start).Seconds())

	vm.wait()
	t.Logf("VM up at +%.0fs", time.Since(start).Seconds())
	defer func() {
		if t.Failed() {
			out, _ := vm.exec("journalctl", "--no-pager", "-n", "60", "-u", unit)
			t.Logf("journal of %s:\n%s", unit, out)
		}
	}()
	vm.must("sh", "-ec", "cd /tmp && for f in old.deb new.deb; do /usr/local/sbin/busybox wget -q http://10.0.2.2:"+port+"/$f; done")

	out := vm.must("dpkg", "-i", "/tmp/old.deb")
	t.Logf("dpkg -i (%s) at +%.0fs:\n%s", oldVersion, time.Since(start).Seconds(), out)
	if s, _ := vm.exec("systemctl", "is-enabled", unit); strings.TrimSpace(s) != "disabled" { // exit code 1: not enabled
		t.Errorf("after install %s is %q, want disabled: the admin enables it", unit, s)
	}
	// The site's configuration: one cluster, its key and tenant map, with
	// the owner and mode the packaged files have.
	vm.must("sh", "-ec", `install -d -m 0750 -g strata-portal-api /etc/strata/clusters /etc/strata/clusters/gpu1
head -c 32 /dev/urandom > /etc/strata/clusters/gpu1/jwt_hs256.key
echo '{"apiVersion": "strata/v1", "kind": "TenantMap", "cluster": "gpu1", "admins": ["root"], "tenants": []}' > /etc/strata/clusters/gpu1/tenants.json
chgrp strata-portal-api /etc/strata/clusters/gpu1/*
chmod 0640 /etc/strata/clusters/gpu1/*
cat > /etc/strata/portal-api.yaml <<'EOF'
apiVersion: strata/v1
kind: PortalConfig
listen: 127.0.0.1:8470
database: /var/lib/strata/portal-api/portal.db
templates_dir: /etc/strata/templates
sessions:
  cookie_key_file: /etc/strata/portal-session.key
clusters:
  - name: gpu1
    slurmrestd_url: http://127.0.0.1:6820
    jwt_key_file: /etc/strata/clusters/gpu1/jwt_hs256.key
    tenants_file: /etc/strata/clusters/gpu1/tenants.json
EOF`)
	// Type=notify: start returns once the daemon said READY=1.
	vm.must("systemctl", "start", unit)
	before := vm.unitState(unit)
	t.Logf("started at +%.0fs: %v", time.Since(start).Seconds(), before)
	if before["ActiveState"] != "active" || before["SubState"] != "running" || before["MainPID"] == "0" {
		t.Fatalf("%s did not start: %v", unit, before)
	}
	vm.checkRuns(before["MainPID"], binary)

	// The upgrade, with no input: the running unit gets a new process,
	// which runs the new file.
	out = vm.must("dpkg", "-i", "/tmp/new.deb")
	t.Logf("dpkg -i (upgrade to %s) at +%.0fs:\n%s", upgradeVersion, time.Since(start).Seconds(), out)
	if v := vm.must("dpkg-query", "-W", "-f", "${Version}", part); !strings.HasPrefix(v, upgradeVersion+"-") {
		t.Errorf("%s is at %s after the upgrade, want %s", part, v, upgradeVersion)
	}
	after := vm.unitState(unit)
	t.Logf("after the upgrade: %v", after)
	switch {
	case after["ActiveState"] != "active" || after["SubState"] != "running":
		t.Errorf("%s after the upgrade: %v, want active (running)", unit, after)
	case after["MainPID"] == before["MainPID"]:
		t.Errorf("%s's main process is still %s after the upgrade: it was not restarted", unit, before["MainPID"])
	case after["NRestarts"] != before["NRestarts"]:
		t.Errorf("%s was restarted by systemd (NRestarts %s, was %s), not by the upgrade", unit, after["NRestarts"], before["NRestarts"])
	default:
		vm.checkRuns(after["MainPID"], binary)
		if _, err := vm.exec("kill", "-0", before["MainPID"]); err == nil {
			t.Errorf("the old main process %s still runs after the upgrade", before["MainPID"])
		}
	}

	// Removal stops the unit before the binary goes.
	out = vm.must("dpkg", "-r", part)
	t.Logf("dpkg -r at +%.0fs:\n%s", time.Since(start).Seconds(), out)
	gone := vm.unitState(unit)
	if gone["ActiveState"] != "inactive" || gone["MainPID"] != "0" {
		t.Errorf("%s after dpkg -r: %v, want inactive with no main process", unit, gone)
	}
	if out, err := vm.exec("pgrep", "-a", "-f", "^"+binary+" "); err == nil {
		t.Errorf("a strata-portal-api process runs after dpkg -r: %s", out)
	}
	t.Logf("done in %.0fs", time.Since(start).Seconds())
}

// systemdVM is a private instance of the node bed's VM whose PID 1 is
// systemd, driven through its exec agent.
type systemdVM struct {
	t     *testing.T
	agent string
	done  chan error
	out   bytes.Buffer
}

// bootSystemdVM starts vm.sh start --systemd in the background, in a
// temporary instance folder, from the cached root of STRATA_NODE_VARIANT
// (default: the first cached test-bed root, Slurm 24.11's Debian 13); wait
// waits for it. The VM is stopped at the end of the test.
func bootSystemdVM(t *testing.T, repo string) *systemdVM {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "the systemd test needs root: vm.sh builds the node's image from the cached root (run make test as root)")
	}
	for _, tool := range []string{"qemu-system-x86_64", "busybox", "zstd"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, "%s is not installed (make deps): the node bed's VM needs it", tool)
		}
	}
	cache := os.Getenv("TB_CACHE")
	if cache == "" {
		cache = "/var/cache/strata/testbed"
	}
	variant := os.Getenv("STRATA_NODE_VARIANT")
	if variant == "" {
		m, _ := filepath.Glob(filepath.Join(cache, "root-*-r*.tar.zst"))
		sort.Strings(m)
		if len(m) == 0 {
			unavailable(t, "no Debian root cached in %s (test/testbed/slurm/testbed.sh build makes one) and STRATA_NODE_VARIANT is not set", cache)
		}
		v := strings.TrimPrefix(filepath.Base(m[0]), "root-")
		variant = v[:strings.LastIndex(v, "-r")]
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	agentPort := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	inst := t.TempDir()
	vm := &systemdVM{t: t, agent: "127.0.0.1:" + strconv.Itoa(agentPort), done: make(chan error, 1)}
	script := filepath.Join(repo, "test/testbed/node/vm.sh")
	cmd := exec.Command("bash", script, "start", "--systemd", "--inst", inst, "--variant", variant,
		"--node", "pkg1", "--agent-port", strconv.Itoa(agentPort))
	cmd.Env = append(os.Environ(), "TB_CACHE="+cache)
	cmd.Stdout, cmd.Stderr = &vm.out, &vm.out
	t.Logf("vm.sh start --systemd --variant %s --inst %s --agent-port %d", variant, inst, agentPort)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { vm.done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-vm.done:
			vm.done <- err
		default: // the test ended before the VM was up
			_ = cmd.Process.Kill()
		}
		if err := (<-vm.done); err != nil && !t.Failed() {
			t.Errorf("vm.sh start: %v\n%s", err, vm.out.String())
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(inst, "vm", "console.log")); err == nil {
				t.Logf("console (end):\n%s", tail(string(b), 3000))
			}
		}
		if out, err := exec.Command("bash", script, "stop", "--inst", inst).CombinedOutput(); err != nil {
			t.Errorf("vm.sh stop: %v\n%s", err, out)
		}
	})
	return vm
}

// wait waits for vm.sh start, which returns once the agent answers and
// PID 1 is systemd.
func (vm *systemdVM) wait() {
	vm.t.Helper()
	err := <-vm.done
	vm.done <- err // for the cleanup
	if err != nil {
		vm.t.Fatalf("vm.sh start --systemd: %v\n%s", err, vm.out.String())
	}
	vm.t.Logf("vm.sh: %s", strings.TrimSpace(vm.out.String()))
}

// exec runs a command in the guest as root, with no input.
func (vm *systemdVM) exec(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	resp, err := nodeexec.Run(ctx, vm.agent, nodeexec.Request{Args: args, Env: []string{"LANG=C.UTF-8"}})
	if err != nil {
		return "", err
	}
	out := string(resp.Stdout) + string(resp.Stderr)
	if resp.Code != 0 {
		return out, fmt.Errorf("exit code %d", resp.Code)
	}
	return out, nil
}

// must runs a command in the guest; a failure fails the test.
func (vm *systemdVM) must(args ...string) string {
	vm.t.Helper()
	out, err := vm.exec(args...)
	if err != nil {
		vm.t.Fatalf("in the VM: %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// unitState is what systemd says of unit.
func (vm *systemdVM) unitState(unit string) map[string]string {
	vm.t.Helper()
	st := map[string]string{}
	for _, l := range strings.Split(vm.must("systemctl", "show", "-p", "ActiveState,SubState,MainPID,NRestarts", unit), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			st[k] = v
		}
	}
	return st
}

// checkRuns checks that process pid runs the file at path as it is now
// (the same inode: not a replaced, deleted one).
func (vm *systemdVM) checkRuns(pid, path string) {
	vm.t.Helper()
	out := vm.must("sh", "-c", "readlink /proc/"+pid+"/exe; stat -L -c %i /proc/"+pid+"/exe "+path)
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != path || f[1] != f[2] {
		vm.t.Errorf("process %s does not run the installed %s (exe, its inode, the file's): %q", pid, path, out)
	}
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
