package fabricgen

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Big10k is the large benchmark fabric: a valid 10,000-host, 8-rail,
// 3-tier rail-optimised fabric. Per rail 313 leaves of 32 hosts (48
// ports: 32 hosts, 16 spines), 10 pods of 32 leaves, 16 spines per pod
// and rail (36 ports), 16 core groups of 4 cores (80 ports: one per pod
// and rail, a 128-port QM9790); 80,000 CAs, 3,848 switches, a 32 MiB
// dump.
var Big10k = Spec{Nodes: 10000, Rails: 8, NodesPerLeaf: 32, PodLeaves: 32, SpinesPerPod: 16, CoresPerGroup: 4, Radix: 128, Seed: 10000}

// tileToken is what Tile rewrites in a classic dump: a quoted node id or
// description, a GUID after "guid=0x" (sysimgguid=, switchguid=, caguid=) and a port
// GUID in parentheses.
var tileToken = regexp.MustCompile(`"[^"\n]*"|guid=0x[0-9a-fA-F]+|\([0-9a-fA-F]{8,16}\)`)

// Tile writes copies of a classic ibnetdiscover dump one after the other,
// as separate fabrics of one file: copy k (from 0) has every GUID XORed
// with k<<48 and every node description prefixed with "t<k>-" (after the
// "MF0;" of a named switch), so its hosts and switches are new ones with
// the same cabling. It is how a benchmark measures a real fabric's shape
// at many times its size.
func Tile(w io.Writer, dump []byte, copies int) error {
	if copies < 1 || copies > 1<<16 {
		return fmt.Errorf("fabricgen: %d copies: want 1 to 65536", copies)
	}
	src := string(dump)
	for k := range copies {
		prefix := "t" + strconv.Itoa(k) + "-"
		flip := uint64(k) << 48
		out := tileToken.ReplaceAllStringFunc(src, func(tok string) string {
			switch tok[0] {
			case '"':
				s := tok[1 : len(tok)-1]
				if len(s) > 2 && s[1] == '-' && strings.ContainsRune("SHR", rune(s[0])) {
					if g, err := strconv.ParseUint(s[2:], 16, 64); err == nil {
						return `"` + s[:2] + hexWidth(g^flip, len(s)-2) + `"`
					}
				}
				if rest, ok := strings.CutPrefix(s, "MF0;"); ok {
					return `"MF0;` + prefix + rest + `"`
				}
				return `"` + prefix + s + `"`
			case 'g':
				g, _ := strconv.ParseUint(tok[7:], 16, 64)
				return "guid=0x" + hexWidth(g^flip, len(tok)-7)
			default:
				g, _ := strconv.ParseUint(tok[1:len(tok)-1], 16, 64)
				return "(" + hexWidth(g^flip, len(tok)-2) + ")"
			}
		})
		if _, err := io.WriteString(w, out+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// hexWidth writes g in lowercase hex with at least width digits.
func hexWidth(g uint64, width int) string {
	return fmt.Sprintf("%0*x", width, g)
}
