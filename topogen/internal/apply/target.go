package apply

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// liveTarget is the file to write for the live path: the path itself (a
// regular file, or none yet), or the file a symbolic link there resolves
// to. A link to nothing, or to something other than a regular file, is
// refused.
func liveTarget(path string) (string, error) {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return path, nil
	}
	if err != nil {
		return "", err
	}
	switch {
	case st.Mode().IsRegular():
		return path, nil
	case st.Mode()&os.ModeSymlink == 0:
		return "", fmt.Errorf("%s is not a regular file (%s): topogen writes only a file", path, st.Mode().Type())
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		dest, _ := os.Readlink(path)
		return "", fmt.Errorf("%s is a symbolic link to %s, which cannot be resolved (%w): create the file it points to, or point the link at it", path, dest, err)
	}
	if tst, err := os.Stat(target); err != nil || !tst.Mode().IsRegular() {
		return "", fmt.Errorf("%s is a symbolic link to %s, which is not a regular file: topogen writes only a file", path, target)
	}
	return target, nil
}
