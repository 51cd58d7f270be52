// Package rpmhdr marks dependencies of a built RPM as Requires(pre), in
// place: nfpm v2.48.0 writes Requires(post) (rpm.requires.post) but no
// other scriptlet context, and a %pre that runs systemd-sysusers needs
// rpm to install the tool before it runs (Fedora's %sysusers_requires).
//
// The package's dependency entry, written by nfpm as a plain Requires, gets
// the flag RPMSENSE_SCRIPT_PRE; nothing moves, so the change is one int32
// of the header's REQUIREFLAGS array. The signature header's digests of
// the header (SHA-1, SHA-256) and of header and payload (MD5) are then
// computed again, after the old ones were checked, so `rpm -K` and an
// install verify the package as before. An RPM with a PGP signature is
// refused: its signature cannot be made again here (sign after this step).
package rpmhdr

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
)

// RPM tags and types this package reads (rpm's rpmtag.h).
const (
	tagRequireFlags = 1048
	tagRequireName  = 1049

	sigTagSHA1   = 269
	sigTagSHA256 = 273
	sigTagMD5    = 1004
	sigTagDSA    = 267
	sigTagRSA    = 268
	sigTagPGP    = 1002
	sigTagGPG    = 1005

	typeInt32       = 4
	typeString      = 6
	typeBin         = 7
	typeStringArray = 8

	// SensePre is RPMSENSE_SCRIPT_PRE: Requires(pre).
	SensePre = 1 << 9

	leadSize = 96
)

var (
	leadMagic   = []byte{0xed, 0xab, 0xee, 0xdb}
	headerMagic = []byte{0x8e, 0xad, 0xe8, 0x01}
)

// entry is one index entry of a header: where its data lies in the file.
type entry struct {
	tag, typ, count int
	off             int // of the data, in the file
}

// header is a header's place in the file and its entries.
type header struct {
	start, end int // the header's bytes: magic to the end of its data store
	entries    map[int]entry
}

// parseHeader reads the header at b[start:].
func parseHeader(b []byte, start int) (*header, error) {
	if start+16 > len(b) || !bytes.Equal(b[start:start+4], headerMagic) {
		return nil, fmt.Errorf("no RPM header at byte %d", start)
	}
	n := int(binary.BigEndian.Uint32(b[start+8:]))
	size := int(binary.BigEndian.Uint32(b[start+12:]))
	idx := start + 16
	store := idx + 16*n
	if n > 1<<16 || size > 1<<28 || store+size > len(b) {
		return nil, fmt.Errorf("header at byte %d: %d entries and %d bytes of data do not fit the file", start, n, size)
	}
	h := &header{start: start, end: store + size, entries: map[int]entry{}}
	for i := range n {
		e := b[idx+16*i:]
		off := int(int32(binary.BigEndian.Uint32(e[8:])))
		en := entry{tag: int(int32(binary.BigEndian.Uint32(e))), typ: int(binary.BigEndian.Uint32(e[4:])),
			count: int(binary.BigEndian.Uint32(e[12:])), off: store + off}
		if off < 0 || off > size {
			return nil, fmt.Errorf("header at byte %d: tag %d's data at %d, past the data store (%d bytes)", start, en.tag, off, size)
		}
		h.entries[en.tag] = en
	}
	return h, nil
}

// strings reads a STRING_ARRAY entry.
func (h *header) strings(b []byte, tag int) ([]string, error) {
	e, ok := h.entries[tag]
	if !ok {
		return nil, fmt.Errorf("no tag %d", tag)
	}
	if e.typ != typeStringArray {
		return nil, fmt.Errorf("tag %d is of type %d, not a string array", tag, e.typ)
	}
	var out []string
	p := e.off
	for range e.count {
		i := bytes.IndexByte(b[p:h.end], 0)
		if i < 0 {
			return nil, fmt.Errorf("tag %d: a string runs past the header", tag)
		}
		out = append(out, string(b[p:p+i]))
		p += i + 1
	}
	return out, nil
}

// int32At is the place of the i-th value of an INT32 entry.
func (h *header) int32At(tag, i int) (int, error) {
	e, ok := h.entries[tag]
	if !ok {
		return 0, fmt.Errorf("no tag %d", tag)
	}
	if e.typ != typeInt32 || i >= e.count || e.off+4*(i+1) > h.end {
		return 0, fmt.Errorf("tag %d has no int32 number %d", tag, i)
	}
	return e.off + 4*i, nil
}

// Package is an RPM file's bytes, its two headers parsed.
type Package struct {
	b        []byte
	sig, hdr *header
}

// Parse reads an RPM file's lead and headers.
func Parse(b []byte) (*Package, error) {
	if len(b) < leadSize || !bytes.Equal(b[:4], leadMagic) {
		return nil, errors.New("not an RPM: no lead")
	}
	sig, err := parseHeader(b, leadSize)
	if err != nil {
		return nil, fmt.Errorf("signature header: %w", err)
	}
	start := sig.end + (8-(sig.end-leadSize)%8)%8 // the signature header is padded to 8 bytes
	hdr, err := parseHeader(b, start)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	return &Package{b: b, sig: sig, hdr: hdr}, nil
}

// Bytes is the package as it is now.
func (p *Package) Bytes() []byte { return p.b }

// Requires lists the package's dependencies with their flags, as rpm
// -qp --requires does with %{REQUIREFLAGS}.
func (p *Package) Requires() (map[string]int, error) {
	names, err := p.hdr.strings(p.b, tagRequireName)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for i, n := range names {
		at, err := p.hdr.int32At(tagRequireFlags, i)
		if err != nil {
			return nil, err
		}
		out[n] |= int(int32(binary.BigEndian.Uint32(p.b[at:])))
	}
	return out, nil
}

// digests are the signature header's digest entries and what they must hold
// for the bytes now.
func (p *Package) digests() []struct {
	tag, typ int
	want     []byte
} {
	hb := p.b[p.hdr.start:p.hdr.end]
	s1, s256, m := sha1.Sum(hb), sha256.Sum256(hb), md5.Sum(p.b[p.hdr.start:])
	str := func(sum []byte) []byte { return append([]byte(hex.EncodeToString(sum)), 0) }
	return []struct {
		tag, typ int
		want     []byte
	}{{sigTagSHA1, typeString, str(s1[:])}, {sigTagSHA256, typeString, str(s256[:])}, {sigTagMD5, typeBin, m[:]}}
}

// Verify checks the signature header's digests against the bytes, as rpm
// -K does.
func (p *Package) Verify() error {
	for _, d := range p.digests() {
		e, ok := p.sig.entries[d.tag]
		if !ok {
			continue
		}
		if e.typ != d.typ || e.off+len(d.want) > p.sig.end {
			return fmt.Errorf("signature tag %d: type %d, not the digest's", d.tag, e.typ)
		}
		if !bytes.Equal(p.b[e.off:e.off+len(d.want)], d.want) {
			return fmt.Errorf("signature tag %d: the digest does not match the package", d.tag)
		}
	}
	return nil
}

// MarkPre gives each named dependency the Requires(pre) context. Each must
// be a dependency of the package already (a plain Requires, or one with
// another context, which it keeps); one marked already is left as it is.
// The package's digests are checked first and made again after.
func (p *Package) MarkPre(names ...string) error {
	for _, tag := range []int{sigTagDSA, sigTagRSA, sigTagPGP, sigTagGPG} {
		if _, ok := p.sig.entries[tag]; ok {
			return errors.New("the package is signed: mark its dependencies before signing it")
		}
	}
	if err := p.Verify(); err != nil {
		return fmt.Errorf("before the change: %w", err)
	}
	have, err := p.hdr.strings(p.b, tagRequireName)
	if err != nil {
		return err
	}
	for _, n := range names {
		i := slices.Index(have, n)
		if i < 0 {
			return fmt.Errorf("%q is not a dependency of the package (it has %q): declare it in the nfpm configuration", n, have)
		}
		at, err := p.hdr.int32At(tagRequireFlags, i)
		if err != nil {
			return err
		}
		f := binary.BigEndian.Uint32(p.b[at:])
		binary.BigEndian.PutUint32(p.b[at:], f|SensePre)
	}
	for _, d := range p.digests() {
		if e, ok := p.sig.entries[d.tag]; ok {
			copy(p.b[e.off:], d.want)
		}
	}
	return p.Verify()
}
