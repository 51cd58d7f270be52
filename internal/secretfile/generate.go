package secretfile

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
)

// GenerateBytes is how many random bytes a generated secret holds: as many
// as an HMAC-SHA256 key needs and more than a bearer token does.
const GenerateBytes = 48

// Generate writes a new random secret (GenerateBytes from crypto/rand, as
// one line of base64) to path, mode 0640, owned by the caller and by
// group, so that exactly the daemon that reads it (and root) can: the
// layout the packages give every configuration file. It never replaces a
// file: when path exists it returns false and leaves it as it is (a
// package's postinst calls it on every install and upgrade), unless
// replace is set, when the new secret takes the old one's place at once
// (a rename: a reader sees the old secret or the new, never half).
func Generate(path, group string, replace bool) (created bool, err error) {
	if !replace {
		if _, err := os.Lstat(path); err == nil {
			return false, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
	}
	gid := -1
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			return false, fmt.Errorf("group %s: %w (install the package that makes it, or give another with --group)", group, err)
		}
		if gid, err = strconv.Atoi(g.Gid); err != nil {
			return false, fmt.Errorf("group %s: gid %q", group, g.Gid)
		}
	}
	raw := make([]byte, GenerateBytes)
	if _, err := rand.Read(raw); err != nil {
		return false, err
	}
	text := base64.StdEncoding.EncodeToString(raw) + "\n"

	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".new-*")
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	// Closed to everyone but the owner until its group is right.
	if err = tmp.Chmod(0o600); err == nil {
		_, err = tmp.WriteString(text)
	}
	if err == nil && gid >= 0 {
		if err = tmp.Chown(-1, gid); err != nil {
			err = fmt.Errorf("give %s to group %s: %w (run as root)", path, group, err)
		}
	}
	if err == nil {
		err = tmp.Chmod(0o640)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else {
		// A link fails when path appeared meanwhile: never replaced.
		if err = os.Link(tmp.Name(), path); err == nil {
			_ = os.Remove(tmp.Name())
		} else if errors.Is(err, fs.ErrExist) {
			_ = os.Remove(tmp.Name())
			return false, nil
		}
	}
	if err != nil {
		return false, err
	}
	return true, nil
}
