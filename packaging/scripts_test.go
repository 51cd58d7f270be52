package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// partUnits are the units each package stops on removal, and those it
// try-restarts on an upgrade (topogen's service is a oneshot the timer
// starts: only the timer).
var partUnits = map[string]struct{ stop, restart string }{
	"strata-topogen":    {"topogen.timer topogen.service", "topogen.timer"},
	"strata-reclaimd":   {"reclaimd.service reclaimd-agent.service", "reclaimd.service reclaimd-agent.service"},
	"strata-bridge":     {"strata-bridge.service", "strata-bridge.service"},
	"strata-portal-api": {"strata-portal-api.service", "strata-portal-api.service"},
}

// partSecrets are the secrets each package's postinst makes when absent,
// and the verb that makes them.
var partSecrets = map[string][]string{ // part -> "binary verb file"
	"strata-reclaimd":   {"reclaimd gen-token /etc/strata/reclaimd-agent.token", "reclaimd gen-token /etc/strata/reclaimd-api.token"},
	"strata-bridge":     {"strata-bridge gen-token /etc/strata/bridge-api.token"},
	"strata-portal-api": {"strata-portal-api gen-key /etc/strata/portal-session.key"},
}

// TestScriptletsByPhase runs each package's postinst and prerm as dpkg and
// rpm call them (install, upgrade, removal), with systemd running or not,
// against fakes of systemctl, systemd-sysusers, systemd-tmpfiles and the
// binaries, and compares what they ran: a try-restart on an upgrade only,
// a stop and disable on removal only, the secrets made only when absent.
func TestScriptletsByPhase(t *testing.T) {
	for part, u := range partUnits {
		t.Run(part, func(t *testing.T) {
			c := loadConfig(t, part)
			if c.Scripts["preremove"] == "" || c.Scripts["postinstall"] == "" {
				t.Fatalf("%s.yaml: no preremove or postinstall script", part)
			}
			var secrets [][]string
			for _, line := range partSecrets[part] {
				secrets = append(secrets, strings.Fields(line))
			}
			cases := map[string]struct {
				script       string
				args         []string
				systemd      bool
				secretExists bool
				want         []string
			}{
				"deb install":                    {"postinstall", []string{"configure", ""}, true, false, []string{"systemctl daemon-reload"}},
				"deb upgrade":                    {"postinstall", []string{"configure", "0.1.0-1"}, true, true, []string{"systemctl daemon-reload", "systemctl try-restart " + u.restart}},
				"deb upgrade, secret removed":    {"postinstall", []string{"configure", "0.1.0-1"}, true, false, []string{"systemctl daemon-reload", "systemctl try-restart " + u.restart}},
				"rpm install":                    {"postinstall", []string{"1"}, true, false, []string{"systemctl daemon-reload"}},
				"rpm upgrade":                    {"postinstall", []string{"2"}, true, true, []string{"systemctl daemon-reload", "systemctl try-restart " + u.restart}},
				"deb install in a chroot":        {"postinstall", []string{"configure", ""}, false, false, nil},
				"deb upgrade in a chroot":        {"postinstall", []string{"configure", "0.1.0-1"}, false, true, nil},
				"deb remove":                     {"preremove", []string{"remove"}, true, true, []string{"systemctl --no-reload disable --now " + u.stop}},
				"deb upgrade (old prerm)":        {"preremove", []string{"upgrade", "0.2.0-1"}, true, true, nil},
				"rpm erase":                      {"preremove", []string{"0"}, true, true, []string{"systemctl --no-reload disable --now " + u.stop}},
				"rpm upgrade (old %preun)":       {"preremove", []string{"1"}, true, true, nil},
				"deb remove in a chroot":         {"preremove", []string{"remove"}, false, true, nil},
				"deb failed-upgrade (old prerm)": {"preremove", []string{"failed-upgrade", "0.2.0-1"}, true, true, nil},
			}
			for name, tc := range cases {
				dir := t.TempDir()
				bin := filepath.Join(dir, "bin")
				etc := filepath.Join(dir, "etc")
				run := filepath.Join(dir, "run", "systemd", "system")
				log := filepath.Join(dir, "calls")
				for _, d := range []string{bin, etc} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				if tc.systemd {
					if err := os.MkdirAll(run, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				fake := "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> " + log + "\n"
				for _, cmd := range []string{"systemctl", "systemd-sysusers", "systemd-tmpfiles", "reclaimd", "strata-bridge", "strata-portal-api"} {
					if err := os.WriteFile(filepath.Join(bin, cmd), []byte(fake), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				secretFiles := make([]string, len(secrets))
				for i, secret := range secrets {
					secretFiles[i] = strings.Replace(secret[2], "/etc/strata/", etc+"/", 1)
					if tc.secretExists {
						if err := os.WriteFile(secretFiles[i], []byte("x\n"), 0o600); err != nil {
							t.Fatal(err)
						}
					}
				}
				b, err := os.ReadFile(filepath.Join("..", c.Scripts[tc.script]))
				if err != nil {
					t.Fatal(err)
				}
				script := strings.NewReplacer("/run/systemd/system", run, "/etc/strata/", etc+"/", "/proc/self", filepath.Join(dir, "no-proc")).Replace(string(b))
				cmd := exec.Command("sh", append([]string{"-c", script, "script"}, tc.args...)...)
				cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%s: %s %v: %v\n%s", name, tc.script, tc.args, err, out)
					continue
				}
				calls, _ := os.ReadFile(log)
				var got []string
				for _, l := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
					if strings.HasPrefix(l, "systemctl ") {
						got = append(got, l)
					}
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s: %s %v ran (-want +got):\n%s", name, tc.script, tc.args, diff)
				}
				for i, secret := range secrets {
					made := strings.Contains(string(calls), secret[0]+" "+secret[1]+" --file "+secretFiles[i])
					if wantMade := tc.script == "postinstall" && !tc.secretExists; made != wantMade {
						t.Errorf("%s: %s %s %s called %v, want %v:\n%s", name, secret[0], secret[1], secret[2], made, wantMade, calls)
					}
				}
			}
		})
	}
}
