package packaging

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// unitSettings reads a unit file's settings: key -> values, in order.
func unitSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			out[k] = append(out[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// syscallSet expands a SystemCallFilter= allow list with
// systemd-analyze syscall-filter (groups within groups).
func syscallSet(t *testing.T, names []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	seen := map[string]bool{}
	var expand func(string)
	expand = func(name string) {
		if !strings.HasPrefix(name, "@") {
			out[name] = true
			return
		}
		if seen[name] {
			return
		}
		seen[name] = true
		b, err := exec.Command("systemd-analyze", "syscall-filter", name).Output()
		if err != nil {
			t.Fatalf("systemd-analyze syscall-filter %s: %v", name, err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if i == 0 || line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			expand(line)
		}
	}
	for _, n := range names {
		expand(n)
	}
	return out
}

// TestReclaimdUnitAllowsMail: reclaimd's notify.mail runs sendmail -t
// (fork, exec, a pipe to its stdin, wait) and the sendmail it runs talks
// SMTP to a relay or a local socket. The hardened controller unit must
// allow all of that: the syscalls (checked against systemd's own
// definition of the unit's SystemCallFilter groups), the address
// families, a network and /usr/sbin. What it cannot allow is a sendmail
// that needs set-user-ID or set-group-ID (NoNewPrivileges=yes: Postfix's
// postdrop, Exim) or writes a spool under /var (ProtectSystem=strict):
// packaging/README.md says to install an SMTP-only sendmail (msmtp-mta).
func TestReclaimdUnitAllowsMail(t *testing.T) {
	u := unitSettings(t, "systemd/reclaimd.service")
	fams := strings.Fields(strings.Join(u["RestrictAddressFamilies"], " "))
	for _, want := range []string{"AF_UNIX", "AF_INET", "AF_INET6"} {
		if len(fams) > 0 && !slices.Contains(fams, want) {
			t.Errorf("RestrictAddressFamilies=%s lacks %s: sendmail cannot reach its relay", strings.Join(fams, " "), want)
		}
	}
	for _, k := range []string{"PrivateNetwork", "IPAddressDeny", "NoExecPaths", "ExecPaths", "InaccessiblePaths", "ProtectProc"} {
		if v, ok := u[k]; ok {
			t.Errorf("%s=%s: decide whether sendmail still runs and reaches its relay, then extend this test", k, strings.Join(v, " "))
		}
	}
	if v := u["NoNewPrivileges"]; !slices.Equal(v, []string{"yes"}) {
		t.Errorf("NoNewPrivileges=%v: the unit's hardening changed; packaging/README.md's advice on sendmail assumes yes", v)
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is not installed (Debian's systemd package)")
		}
		t.Skip("systemd-analyze is not installed: the unit's system call filter is not checked")
	}
	var allow []string
	for _, v := range u["SystemCallFilter"] {
		if strings.HasPrefix(v, "~") {
			t.Fatalf("SystemCallFilter=%s: a deny list; extend this test to read it", v)
		}
		allow = append(allow, strings.Fields(v)...)
	}
	if len(allow) == 0 {
		t.Fatal("no SystemCallFilter: the unit's hardening changed")
	}
	got := syscallSet(t, allow)
	// What Go's os/exec (clone or clone3, execve, pipe2, wait4) and an
	// SMTP client (socket, connect, sendto, recvfrom, poll) call.
	for _, sc := range []string{"execve", "pipe2", "wait4", "socket", "connect", "sendto", "recvfrom", "ppoll", "dup3", "kill"} {
		if !got[sc] {
			t.Errorf("SystemCallFilter=%s does not allow %s: sendmail -t cannot run or send", strings.Join(allow, " "), sc)
		}
	}
	if !got["clone"] && !got["clone3"] {
		t.Errorf("SystemCallFilter=%s allows neither clone nor clone3: reclaimd cannot start sendmail", strings.Join(allow, " "))
	}
}
