package secretfile

import (
	"encoding/base64"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestGenerate(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Skipf("the test's own group has no name: %v", err)
	}
	path := filepath.Join(t.TempDir(), "agent.token")
	created, err := Generate(path, g.Name, false)
	if err != nil || !created {
		t.Fatalf("Generate: %v, %v", created, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode %o, want 640", st.Mode().Perm())
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(first)))
	if err != nil || len(raw) != GenerateBytes {
		t.Errorf("content %q: %d bytes of base64 (%v), want %d", first, len(raw), err, GenerateBytes)
	}
	// The daemon's rule reads it without a warning.
	if _, warning, _, err := (Rule{Groups: []string{g.Name}}).Read(path); err != nil || warning != "" {
		t.Errorf("Read: %q, %v", warning, err)
	}

	// Again: kept as it is.
	if created, err := Generate(path, g.Name, false); err != nil || created {
		t.Errorf("Generate over an existing file: %v, %v; want false, nil", created, err)
	}
	if b, _ := os.ReadFile(path); string(b) != string(first) {
		t.Errorf("Generate replaced an existing secret")
	}
	// Replace: a new one, same mode; nothing left beside it.
	if created, err := Generate(path, g.Name, true); err != nil || !created {
		t.Errorf("Generate replace: %v, %v", created, err)
	}
	if b, _ := os.ReadFile(path); string(b) == string(first) {
		t.Errorf("replace kept the old secret")
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("left %d files in the folder, want 1", len(entries))
	}

	if _, err := Generate(filepath.Join(t.TempDir(), "x"), "no-such-group-strata", false); err == nil || !strings.Contains(err.Error(), "no-such-group-strata") {
		t.Errorf("unknown group: %v", err)
	}
}
