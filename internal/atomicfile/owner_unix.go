//go:build unix

package atomicfile

import (
	"io/fs"
	"syscall"
)

func ownerOf(st fs.FileInfo) *fileOwner {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return &fileOwner{uid: int(s.Uid), gid: int(s.Gid)}
	}
	return nil
}
