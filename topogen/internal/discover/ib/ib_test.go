package ib_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.json from the parser's output (review the diff)")

// classicDump is a cut of testdata/example.out (its lines 1, 10, 11, 44 and
// the two CA blocks they link to): a leaf, a host HCA and the leaf's SHARP
// aggregation node, each link listed from both ends.
const classicDump = `# Topology file: generated on Wed Aug  6 16:11:23 2025

vendid=0x2c9
switchguid=0x2c5eab0300b87b40(2c5eab0300b87b40)
Switch	65 "S-2c5eab0300b87b40"		# "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" enhanced port 0 lid 73 lmc 0
[1]	"H-e09d7303007a4bd8"[1](e09d7303007a4bd8) 		# "a08-p1-dgx-04-c01 mlx5_5" lid 647 4xNDR
[65]	"H-2c5eab0300b87b50"[1](2c5eab0300b87b50) 		# "Mellanox Technologies Aggregation Node" lid 193 4xNDR

caguid=0x2c5eab0300b87b50
Ca	1 "H-2c5eab0300b87b50"		# "Mellanox Technologies Aggregation Node"
[1](2c5eab0300b87b50) 	"S-2c5eab0300b87b40"[65]		# lid 193 lmc 0 "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" lid 73 4xNDR

caguid=0xe09d7303007a4bd8
Ca	1 "H-e09d7303007a4bd8"		# "a08-p1-dgx-04-c01 mlx5_5"
[1](e09d7303007a4bd8) 	"S-2c5eab0300b87b40"[1]		# lid 647 lmc 0 "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" lid 73 4xNDR
`

const (
	leaf = "2c5eab0300b87b40"
	an   = "2c5eab0300b87b50"
	host = "e09d7303007a4bd8"
)

// classicWant is what classicDump parses to, with every line number moved
// down by off (for cases that put lines in front of it).
func classicWant(off int, diags ...ib.Diagnostic) *ib.Fabric {
	return &ib.Fabric{
		Format: ib.Classic,
		Nodes: map[string]*ib.Node{
			leaf: {GUID: leaf, Type: ib.Switch, Desc: "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", Ports: 65, LID: 73, Line: 5 + off},
			an: {GUID: an, Type: ib.CA, Desc: "Mellanox Technologies Aggregation Node", Ports: 1, LID: 193,
				Aggregation: true, PortGUIDs: map[int]string{1: an}, Line: 10 + off},
			host: {GUID: host, Type: ib.CA, Desc: "a08-p1-dgx-04-c01 mlx5_5", Ports: 1, LID: 647,
				PortGUIDs: map[int]string{1: host}, Line: 14 + off},
		},
		Links: []ib.Link{
			{A: leaf, APort: 1, B: host, BPort: 1, Width: "4x", Speed: "NDR", Line: 6 + off},
			{A: leaf, APort: 65, B: an, BPort: 1, Width: "4x", Speed: "NDR", Line: 7 + off},
		},
		Diagnostics: diags,
	}
}

const unrecognised = "unrecognised line: not a node, link or header line of an ibnetdiscover dump"

// parseTests are the edge cases, each small enough to read whole. FuzzParse
// starts from them too.
var parseTests = map[string]struct {
	in      string
	want    *ib.Fabric
	wantErr string // substring of the error; "" for success
}{
	"classic": {
		in:   classicDump,
		want: classicWant(0),
	},
	"byte-order mark": {
		in:   "\uFEFF" + classicDump,
		want: classicWant(0),
	},
	"leading ibwarn line": {
		in: "ibwarn: [2387] mad_rpc_open_port: can't open UMAD port ((null):0)\n" + classicDump,
		want: classicWant(1, ib.Diagnostic{Line: 1,
			Text: "ibwarn: [2387] mad_rpc_open_port: can't open UMAD port ((null):0)", Msg: unrecognised}),
	},
	"spaces instead of tabs": {
		in:   strings.ReplaceAll(classicDump, "\t", "    "),
		want: classicWant(0),
	},
	"CRLF line ends": {
		in:   strings.ReplaceAll(classicDump, "\n", "\r\n"),
		want: classicWant(0),
	},
	// From testdata/ibtopotool-1.topo (the ibnetdiscover man page): "base
	// port 0" switch, port GUIDs without leading zeros; LIDs emptied by hand.
	"base port 0, empty lid, short port GUID": {
		in: `Switch  24 "S-005442ba00003080"         # "ISR9024 Voltaire" base port 0 lid  lmc 0
[22]    "H-0008f10403961354"[1](8f10403961355)         # "MT23108 InfiniHost Mellanox Technologies" lid  4xSDR

Ca      2 "H-0008f10403961354"          # "MT23108 InfiniHost Mellanox Technologies"
[1](8f10403961355)     "S-005442ba00003080"[22]                # lid  lmc 1 "ISR9024 Voltaire" lid  4xSDR
`,
		want: &ib.Fabric{
			Format: ib.Classic,
			Nodes: map[string]*ib.Node{
				"005442ba00003080": {GUID: "005442ba00003080", Type: ib.Switch, Desc: "ISR9024 Voltaire", Ports: 24, Line: 1},
				"0008f10403961354": {GUID: "0008f10403961354", Type: ib.CA, Desc: "MT23108 InfiniHost Mellanox Technologies", Ports: 2,
					PortGUIDs: map[int]string{1: "0008f10403961355"}, Line: 4},
			},
			Links: []ib.Link{{A: "0008f10403961354", APort: 1, B: "005442ba00003080", BPort: 22, Width: "4x", Speed: "SDR", Line: 2}},
		},
	},
	// ibdiagnet2's ibnetdiscover file: no "Topology file:" header and
	// split-port labels (cage/port/split) after port numbers. Hand-written
	// in that shape; there is no public capture to copy.
	"split-port labels": {
		in: `vendid=0x2c9
Switch	65 "S-2c5eab0300b87b40"		# "leaf-1" enhanced port 0 lid 73 lmc 0
[1](1/1/1)	"H-e09d7303007a4bd8"[1](e09d7303007a4bd8) 		# "node1 mlx5_0" lid 647 4xNDR
[2](1/1/2)	"S-2c5eab0300c47fc0"[2](2/1/2)		# "spine-1" lid 238 4xNDR

Switch	65 "S-2c5eab0300c47fc0"		# "spine-1" enhanced port 0 lid 238 lmc 0
[2](2/1/2)	"S-2c5eab0300b87b40"[2](1/1/2)		# "leaf-1" lid 73 4xNDR

Ca	1 "H-e09d7303007a4bd8"		# "node1 mlx5_0"
[1](e09d7303007a4bd8) 	"S-2c5eab0300b87b40"[1](1/1/1)		# lid 647 lmc 0 "leaf-1" lid 73 4xNDR
`,
		want: &ib.Fabric{
			Format: ib.IBDiag,
			Nodes: map[string]*ib.Node{
				leaf:               {GUID: leaf, Type: ib.Switch, Desc: "leaf-1", Ports: 65, LID: 73, Line: 2},
				"2c5eab0300c47fc0": {GUID: "2c5eab0300c47fc0", Type: ib.Switch, Desc: "spine-1", Ports: 65, LID: 238, Line: 6},
				host:               {GUID: host, Type: ib.CA, Desc: "node1 mlx5_0", Ports: 1, LID: 647, PortGUIDs: map[int]string{1: host}, Line: 9},
			},
			Links: []ib.Link{
				{A: leaf, APort: 1, B: host, BPort: 1, Width: "4x", Speed: "NDR", Line: 3},
				{A: leaf, APort: 2, B: "2c5eab0300c47fc0", BPort: 2, Width: "4x", Speed: "NDR", Line: 4},
			},
		},
	},
	// ibdiagnet2 labels HCA ports too, before the port GUID: with the PCI
	// location and port ("(B134D0F0/0/0/1)") or the port number alone
	// ("(1)"). Each cable is listed from both ends and counted once. The
	// shape of testdata/ibdiag-ca-label.ibnetdiscover.
	"ibdiagnet2 HCA-side port labels": {
		in: `vendid=0x2c9
Switch  65 "S-0000000000000a00"      # "MF0;leaf-1:MQM9700/U1" enhanced port 0 lid 1 lmc 0
[1](1/1/1) "H-0000000000000b01"[1](b01)      # "node1 mlx5_0" lid 2 4xNDR
[2](1/1/2) "H-0000000000000b02"[1](b02)      # "node2 mlx5_0" lid 3 4xNDR

Ca  1 "H-0000000000000b01"      # "node1 mlx5_0"
[1](B134D0F0/0/0/1)(b01) "S-0000000000000a00"[1] # lid 2 lmc 0 "MF0;leaf-1:MQM9700/U1" lid 1 4xNDR

Ca  1 "H-0000000000000b02"      # "node2 mlx5_0"
[1](1)(b02) "S-0000000000000a00"[2] # lid 3 lmc 0 "MF0;leaf-1:MQM9700/U1" lid 1 4xNDR
`,
		want: &ib.Fabric{
			Format: ib.IBDiag,
			Nodes: map[string]*ib.Node{
				"0000000000000a00": {GUID: "0000000000000a00", Type: ib.Switch, Desc: "MF0;leaf-1:MQM9700/U1", Ports: 65, LID: 1, Line: 2},
				"0000000000000b01": {GUID: "0000000000000b01", Type: ib.CA, Desc: "node1 mlx5_0", Ports: 1, LID: 2, PortGUIDs: map[int]string{1: "0000000000000b01"}, Line: 6},
				"0000000000000b02": {GUID: "0000000000000b02", Type: ib.CA, Desc: "node2 mlx5_0", Ports: 1, LID: 3, PortGUIDs: map[int]string{1: "0000000000000b02"}, Line: 9},
			},
			Links: []ib.Link{
				{A: "0000000000000a00", APort: 1, B: "0000000000000b01", BPort: 1, Width: "4x", Speed: "NDR", Line: 3},
				{A: "0000000000000a00", APort: 2, B: "0000000000000b02", BPort: 1, Width: "4x", Speed: "NDR", Line: 4},
			},
		},
	},
	"ibdiagnet2 HCA-side labels alone, without the switch side": {
		in: `Switch  65 "S-0000000000000a00"      # "leaf-1" enhanced port 0 lid 1 lmc 0

Ca  2 "H-0000000000000b01"      # "node1 mlx5_0"
[1](B134D0F0/0/0/1)(b01) "S-0000000000000a00"[1] # lid 2 lmc 0 "leaf-1" lid 1 4xNDR
[2](2)(b02) "S-0000000000000a00"[2] # lid 3 lmc 0 "leaf-1" lid 1 4xNDR
`,
		want: &ib.Fabric{
			Format: ib.IBDiag,
			Nodes: map[string]*ib.Node{
				"0000000000000a00": {GUID: "0000000000000a00", Type: ib.Switch, Desc: "leaf-1", Ports: 65, LID: 1, Line: 1},
				"0000000000000b01": {GUID: "0000000000000b01", Type: ib.CA, Desc: "node1 mlx5_0", Ports: 2, LID: 2,
					PortGUIDs: map[int]string{1: "0000000000000b01", 2: "0000000000000b02"}, Line: 3},
			},
			Links: []ib.Link{
				{A: "0000000000000a00", APort: 1, B: "0000000000000b01", BPort: 1, Width: "4x", Speed: "NDR", Line: 4},
				{A: "0000000000000a00", APort: 2, B: "0000000000000b01", BPort: 2, Width: "4x", Speed: "NDR", Line: 5},
			},
		},
	},
	// From testdata/ibtopotool-3.topo: a loopback cable, listed from both
	// of its ports.
	"switch self-link": {
		in: `Switch 36 "S-e41d2d030003e470" # "SwitchIB Mellanox Technologies" base port 0 lid 268 lmc 0
[1] "S-e41d2d030003e470"[2] # "SwitchIB Mellanox Technologies" lid 268 4xEDR
[2] "S-e41d2d030003e470"[1] # "SwitchIB Mellanox Technologies" lid 268 4xEDR
`,
		want: &ib.Fabric{
			Format: ib.Classic,
			Nodes: map[string]*ib.Node{
				"e41d2d030003e470": {GUID: "e41d2d030003e470", Type: ib.Switch, Desc: "SwitchIB Mellanox Technologies", Ports: 36, LID: 268, Line: 1},
			},
			Links: []ib.Link{{A: "e41d2d030003e470", APort: 1, B: "e41d2d030003e470", BPort: 2, Width: "4x", Speed: "EDR", Line: 2}},
		},
	},
	"remote node never declared": {
		in: `Switch	65 "S-2c5eab0300b87b40"		# "leaf" enhanced port 0 lid 73 lmc 0
[1]	"H-e09d7303007a4bd8"[1](e09d7303007a4bd8) 		# "a08-p1-dgx-04-c01 mlx5_5" lid 647 4xNDR
`,
		want: &ib.Fabric{
			Format: ib.Classic,
			Nodes: map[string]*ib.Node{
				leaf: {GUID: leaf, Type: ib.Switch, Desc: "leaf", Ports: 65, LID: 73, Line: 1},
			},
			Diagnostics: []ib.Diagnostic{{Line: 2,
				Text: `[1]	"H-e09d7303007a4bd8"[1](e09d7303007a4bd8) 		# "a08-p1-dgx-04-c01 mlx5_5" lid 647 4xNDR`,
				Msg:  "remote node never declared: e09d7303007a4bd8 (a truncated dump, or the node did not answer the scan)"}},
		},
	},
	// The dump stops in the middle of the last line (a full disk, a killed
	// ssh): the host is declared, its own link line is lost, the leaf's
	// view of the cable is kept.
	"cut mid-line": {
		in: classicDump[:strings.LastIndex(classicDump, `"S-2c5eab03`)+len(`"S-2c5eab03`)],
		want: func() *ib.Fabric {
			f := classicWant(0, ib.Diagnostic{Line: 15, Text: `[1](e09d7303007a4bd8) 	"S-2c5eab03`, Msg: "remote end: unterminated node id"})
			f.Nodes[host].LID = 0 // only its own link line says it
			return f
		}(),
	},
	// testdata/example-bad.out: the header and one CA, nothing else.
	"truncated after the first CA": {
		in: `#
# Topology file: generated on Fri Aug  8 06:33:24 2025
#
# Initiated from node b8e92403009ca838 port b8e92403009ca838

vendid=0x2c9
devid=0x1021
sysimgguid=0xb8e92403009ca838
caguid=0xb8e92403009ca838
Ca	1 "H-b8e92403009ca838"		# "dgx-gb200-n01-c1 HCA-1"
`,
		want: &ib.Fabric{
			Format: ib.Classic,
			Nodes: map[string]*ib.Node{
				"b8e92403009ca838": {GUID: "b8e92403009ca838", Type: ib.CA, Desc: "dgx-gb200-n01-c1 HCA-1", Ports: 1, Line: 10},
			},
		},
	},
	"port claimed by two cables": {
		in: `Switch	4 "S-0000000000000001"	# "leaf" enhanced port 0 lid 1 lmc 0
[1]	"H-0000000000000002"[1](2)	# "a mlx5_0" lid 2 4xHDR
Ca	1 "H-0000000000000002"	# "a mlx5_0"
Ca	1 "H-0000000000000003"	# "b mlx5_0"
[1](3)	"S-0000000000000001"[1]	# lid 3 lmc 0 "leaf" lid 1 4xHDR
`,
		want: &ib.Fabric{
			Format: ib.Classic,
			Nodes: map[string]*ib.Node{
				"0000000000000001": {GUID: "0000000000000001", Type: ib.Switch, Desc: "leaf", Ports: 4, LID: 1, Line: 1},
				"0000000000000002": {GUID: "0000000000000002", Type: ib.CA, Desc: "a mlx5_0", Ports: 1,
					PortGUIDs: map[int]string{1: "0000000000000002"}, Line: 3},
				"0000000000000003": {GUID: "0000000000000003", Type: ib.CA, Desc: "b mlx5_0", Ports: 1, LID: 3,
					PortGUIDs: map[int]string{1: "0000000000000003"}, Line: 4},
			},
			Links: []ib.Link{{A: "0000000000000001", APort: 1, B: "0000000000000002", BPort: 1, Width: "4x", Speed: "HDR", Line: 2}},
			Diagnostics: []ib.Diagnostic{{Line: 5, Text: `[1](3)	"S-0000000000000001"[1]	# lid 3 lmc 0 "leaf" lid 1 4xHDR`,
				Msg: "port 1 of 0000000000000001 is already cabled to port 1 of 0000000000000002 (line 2); kept that link"}},
		},
	},
	"bad header skips its links, duplicate header merges them": {
		in: `Switch	4 "S-0000000000000001"	# "leaf" enhanced port 0 lid 1 lmc 0
[5]	"S-0000000000000001"[1]	# "leaf" lid 1 4xHDR
Switch	4 "S-zz"	# "broken"
[1]	"S-0000000000000001"[2]	# "leaf" lid 1 4xHDR
Switch	4 "S-0000000000000001"	# "leaf" enhanced port 0 lid 1 lmc 0
[3]	"S-0000000000000001"[4]	# "leaf" lid 1 4xHDR
Ca	1 "H-0000000000000001"	# "same GUID"
`,
		want: &ib.Fabric{
			Format: ib.Classic,
			Nodes: map[string]*ib.Node{
				"0000000000000001": {GUID: "0000000000000001", Type: ib.Switch, Desc: "leaf", Ports: 4, LID: 1, Line: 1},
			},
			Links: []ib.Link{{A: "0000000000000001", APort: 3, B: "0000000000000001", BPort: 4, Width: "4x", Speed: "HDR", Line: 6}},
			Diagnostics: []ib.Diagnostic{
				{Line: 2, Text: `[5]	"S-0000000000000001"[1]	# "leaf" lid 1 4xHDR`, Msg: "port 5 beyond the 4 ports node 0000000000000001 declares"},
				{Line: 3, Text: `Switch	4 "S-zz"	# "broken"`, Msg: `node id "S-zz" has a bad GUID (want up to 16 hex digits)`},
				{Line: 4, Text: `[1]	"S-0000000000000001"[2]	# "leaf" lid 1 4xHDR`, Msg: "link line outside a node block (no Switch, Ca or Rt line before it)"},
				{Line: 5, Text: `Switch	4 "S-0000000000000001"	# "leaf" enhanced port 0 lid 1 lmc 0`, Msg: "node 0000000000000001 declared again (first at line 1); links merged"},
				{Line: 7, Text: `Ca	1 "H-0000000000000001"	# "same GUID"`, Msg: "GUID 0000000000000001 already declared as a switch at line 1; this ca and its links are skipped"},
			},
		},
	},
	"router": {
		in: `Switch	8 "S-0000000000000001"	# "leaf" base port 0 lid 1 lmc 0
[3]	"R-0000000000000abc"[1](abd)	# "router-1" lid 5 4xHDR
Rt	2 "R-0000000000000abc"	# "router-1"
[1](abd)	"S-0000000000000001"[3]	# lid 5 lmc 0 "leaf" lid 1 4xHDR
`,
		want: &ib.Fabric{
			Format: ib.Classic,
			Nodes: map[string]*ib.Node{
				"0000000000000001": {GUID: "0000000000000001", Type: ib.Switch, Desc: "leaf", Ports: 8, LID: 1, Line: 1},
				"0000000000000abc": {GUID: "0000000000000abc", Type: ib.Router, Desc: "router-1", Ports: 2, LID: 5,
					PortGUIDs: map[int]string{1: "0000000000000abd"}, Line: 3},
			},
			Links: []ib.Link{{A: "0000000000000001", APort: 3, B: "0000000000000abc", BPort: 1, Width: "4x", Speed: "HDR", Line: 2}},
		},
	},
	// Lines of testdata/osc-test.out: both views of one cable and an
	// unconnected port, which declares its switch and nothing else.
	"ports report, 4x ???": {
		in: `CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )
SW  1719 10 0x7cfe9003009ce5b0 4x EDR - CA   134  1 0x7cfe9003003b4bde ( 'ib-i1l1s01' - 'o0001 HCA-1' )
SW  2052 37 0x506b4b03005c2740 4x ???                                    'ib-i4l1s01'
`,
		want: &ib.Fabric{
			Format: ib.Ports,
			Nodes: map[string]*ib.Node{
				"7cfe9003003b4bde": {GUID: "7cfe9003003b4bde", Type: ib.CA, Desc: "o0001 HCA-1", LID: 134,
					PortGUIDs: map[int]string{1: "7cfe9003003b4bde"}, Line: 1},
				"7cfe9003009ce5b0": {GUID: "7cfe9003009ce5b0", Type: ib.Switch, Desc: "ib-i1l1s01", LID: 1719, Line: 1},
				"506b4b03005c2740": {GUID: "506b4b03005c2740", Type: ib.Switch, Desc: "ib-i4l1s01", LID: 2052, Line: 3},
			},
			Links: []ib.Link{{A: "7cfe9003003b4bde", APort: 1, B: "7cfe9003009ce5b0", BPort: 10, Width: "4x", Speed: "EDR", Line: 1}},
		},
	},
	// Lines of testdata/osc-test2.out and osc-test3.out: descriptions with
	// stray spaces or no quotes, and a SHARP aggregation node.
	"ports report, stray spaces, SHARP node": {
		in: `CA    78  1 0x946dae0300630bfe 4x HDR - SW    51 81 0x946dae0300630bf6 ( 'Mellanox Technologies Aggregation Node' - '5FB0405-leaf-IB01 ' )
SW    25 1 0x946dae0300618c83 4x SDR                                    ' 5FB0406-spine-IB02 '
SW   479 22 0x0002c9020040f161 4x QDR                                   Infiniscale-IV Mellanox Technologies
`,
		want: &ib.Fabric{
			Format: ib.Ports,
			Nodes: map[string]*ib.Node{
				"946dae0300630bfe": {GUID: "946dae0300630bfe", Type: ib.CA, Desc: "Mellanox Technologies Aggregation Node", LID: 78,
					Aggregation: true, PortGUIDs: map[int]string{1: "946dae0300630bfe"}, Line: 1},
				"946dae0300630bf6": {GUID: "946dae0300630bf6", Type: ib.Switch, Desc: "5FB0405-leaf-IB01", LID: 51, Line: 1},
				"946dae0300618c83": {GUID: "946dae0300618c83", Type: ib.Switch, Desc: "5FB0406-spine-IB02", LID: 25, Line: 2},
				"0002c9020040f161": {GUID: "0002c9020040f161", Type: ib.Switch, Desc: "Infiniscale-IV Mellanox Technologies", LID: 479, Line: 3},
			},
			Links: []ib.Link{{A: "946dae0300630bf6", APort: 81, B: "946dae0300630bfe", BPort: 1, Width: "4x", Speed: "HDR", Line: 1}},
		},
	},
	"two formats concatenated": {
		in: classicDump + "SW  2052 37 0x506b4b03005c2740 4x ???    'ib-i4l1s01'\n",
		want: classicWant(0, ib.Diagnostic{Line: 16, Text: "SW  2052 37 0x506b4b03005c2740 4x ???    'ib-i4l1s01'",
			Msg: "ports line in a classic dump; dumps in two formats were concatenated"}),
	},
	"ports report, malformed lines": {
		in: `SW  2052 37 0x506b4b03005c2740 4x ???    'ib-i4l1s01'
SW  2052 0 0x506b4b03005c2740 4x ???    'ib-i4l1s01'
SW  2052 1 0x506b4b03005c2740 4x EDR - XX 1 1 0x1 ( 'a' - 'b' )
SW  2052 2 0x506b4b03005c2740 4x EDR - CA 1 1 0x1 ( 'a' - 'b'
CA  2052 3 0x506b4b03005c2740 4x EDR
`,
		want: &ib.Fabric{
			Format: ib.Ports,
			Nodes: map[string]*ib.Node{
				"506b4b03005c2740": {GUID: "506b4b03005c2740", Type: ib.Switch, Desc: "ib-i4l1s01", LID: 2052, Line: 1},
			},
			Diagnostics: []ib.Diagnostic{
				{Line: 2, Text: "SW  2052 0 0x506b4b03005c2740 4x ???    'ib-i4l1s01'", Msg: `bad port number "0" (want 1-255)`},
				{Line: 3, Text: "SW  2052 1 0x506b4b03005c2740 4x EDR - XX 1 1 0x1 ( 'a' - 'b' )", Msg: `remote end: bad node type "XX" (want SW, CA or RT)`},
				{Line: 4, Text: "SW  2052 2 0x506b4b03005c2740 4x EDR - CA 1 1 0x1 ( 'a' - 'b'", Msg: "expected ( 'local desc' - 'remote desc' ) after the remote end"},
				{Line: 5, Text: "CA  2052 3 0x506b4b03005c2740 4x EDR", Msg: "GUID 506b4b03005c2740 is a ca here but a switch at line 1"},
			},
		},
	},
	"malformed link lines": {
		in: `Switch	4 "S-0000000000000001"	# "leaf" enhanced port 0 lid 1 lmc 0
[0]	"S-0000000000000001"[1]	# "leaf" lid 1 4xHDR
[x]	"S-0000000000000001"[1]
[1](1/1	"S-0000000000000001"[2]
[1](1//1)	"S-0000000000000001"[2]
[1](zz)	"S-0000000000000001"[2]
[1](1/)(2)	"S-0000000000000001"[2]
[1]	"S-0000000000000001"[2] junk
[1]	"S-0000000000000001"[9]	# "leaf" lid 1 4xHDR
[1]	"S-0000000000000001"[2]	# "leaf lid 1 4xHDR
[2]	"X-0000000000000001"[1]
[2]	"S-0000000000000001"
` + "\xff" + strings.Repeat("é", 150) + "\n",
		want: &ib.Fabric{
			Format: ib.Classic,
			Nodes: map[string]*ib.Node{
				"0000000000000001": {GUID: "0000000000000001", Type: ib.Switch, Desc: "leaf", Ports: 4, LID: 1, Line: 1},
			},
			Diagnostics: []ib.Diagnostic{
				{Line: 2, Text: `[0]	"S-0000000000000001"[1]	# "leaf" lid 1 4xHDR`, Msg: "local end: port number 0 out of range 1-255"},
				{Line: 3, Text: `[x]	"S-0000000000000001"[1]`, Msg: `local end: bad port number "x"`},
				{Line: 4, Text: `[1](1/1	"S-0000000000000001"[2]`, Msg: "unterminated parenthesis after port number"},
				{Line: 5, Text: `[1](1//1)	"S-0000000000000001"[2]`, Msg: `bad port label "1//1" (want letters and digits joined by slashes, such as 1/1/1 or B134D0F0/0/0/1)`},
				{Line: 6, Text: `[1](zz)	"S-0000000000000001"[2]`, Msg: `bad port GUID "zz"`},
				{Line: 7, Text: `[1](1/)(2)	"S-0000000000000001"[2]`, Msg: `bad port label "1/" (want letters and digits joined by slashes, such as 1/1/1 or B134D0F0/0/0/1)`},
				{Line: 8, Text: `[1]	"S-0000000000000001"[2] junk`, Msg: `unexpected text after remote port: "junk"`},
				{Line: 9, Text: `[1]	"S-0000000000000001"[9]	# "leaf" lid 1 4xHDR`, Msg: "remote port 9 beyond the 4 ports node 0000000000000001 declares"},
				{Line: 10, Text: `[1]	"S-0000000000000001"[2]	# "leaf lid 1 4xHDR`, Msg: "unterminated remote description"},
				{Line: 11, Text: `[2]	"X-0000000000000001"[1]`, Msg: `remote end: node id "X-0000000000000001" is not S-, H- or R- followed by a GUID`},
				{Line: 12, Text: `[2]	"S-0000000000000001"`, Msg: "remote end: expected a port number in brackets"},
				// Clipped to 200 bytes on a rune boundary, invalid UTF-8 replaced.
				{Line: 13, Text: "\uFFFD" + strings.Repeat("é", 98), Msg: unrecognised},
			},
		},
	},
	"ibdiagnet comment": {
		in: "# written by ibdiagnet2\n" + classicDump,
		want: func() *ib.Fabric {
			f := classicWant(1)
			f.Format = ib.IBDiag
			return f
		}(),
	},
	"ports report, description given later": {
		in: `SW  2052 37 0x506b4b03005c2740 4x ???
CA     0  1 0x7cfe9003003b4bde 4x EDR - SW  2052  1 0x506b4b03005c2740 ( 'o0001 HCA-1' - 'ib-i4l1s01' )
`,
		want: &ib.Fabric{
			Format: ib.Ports,
			Nodes: map[string]*ib.Node{
				"506b4b03005c2740": {GUID: "506b4b03005c2740", Type: ib.Switch, Desc: "ib-i4l1s01", LID: 2052, Line: 1},
				"7cfe9003003b4bde": {GUID: "7cfe9003003b4bde", Type: ib.CA, Desc: "o0001 HCA-1",
					PortGUIDs: map[int]string{1: "7cfe9003003b4bde"}, Line: 2},
			},
			Links: []ib.Link{{A: "506b4b03005c2740", APort: 1, B: "7cfe9003003b4bde", BPort: 1, Width: "4x", Speed: "EDR", Line: 2}},
		},
	},
	"empty input": {
		in:      "",
		wantErr: "ib: empty input",
	},
	"byte-order mark only": {
		in:      "\uFEFF",
		wantErr: "ib: empty input",
	},
	"only comments": {
		in:      "#\n# Topology file: generated on Wed Aug  6 16:11:23 2025\n\n",
		wantErr: "line 3: end of input, only comments and blank lines",
	},
	"binary garbage": {
		in:      "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe[\x00\"",
		wantErr: "line 1: " + unrecognised,
	},
	"link lines without a node": {
		in:      "\n[1]\t\"H-e09d7303007a4bd8\"[1](e09d7303007a4bd8)\t# \"x\" lid 1 4xNDR\n",
		wantErr: "line 2: link line outside a node block",
	},
}

func TestParse(t *testing.T) {
	for name, tc := range parseTests {
		t.Run(name, func(t *testing.T) {
			got, err := ib.Parse(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse() error = %v, want one containing %q", err, tc.wantErr)
				}
				if !errors.Is(err, ib.ErrNoNodes) {
					t.Errorf("Parse() error %v does not wrap ErrNoNodes", err)
				}
				if got != nil {
					t.Errorf("Parse() returned a fabric with its error: %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(ib.Fabric{})); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// errReader fails after its data, like a dump read over a dropped ssh.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestParseReadError(t *testing.T) {
	cause := errors.New("connection reset")
	_, err := ib.Parse(errReader{cause})
	if !errors.Is(err, cause) {
		t.Fatalf("Parse() error = %v, want it to wrap %v", err, cause)
	}
}

// fixtureFacts are facts a reviewer can check by reading the fixture, each
// counted with the command in its comment (run in testdata/).
var fixtureFacts = map[string]struct {
	format                        ib.Format
	switches, cas, aggregation    int
	links, selfLinks, diagnostics int
}{
	"example.out": {
		format:      ib.Classic,
		switches:    40,  // grep -c '^Switch' example.out
		cas:         582, // grep -c '^Ca' example.out
		aggregation: 40,  // grep '^Ca' example.out | grep -c 'Aggregation Node'
		// grep -c '^\[' example.out gives 2228 link lines; every cable is
		// listed from both ends (pairing (guid,port) ends with awk finds
		// 1114 pairs, each twice), so 2228/2.
		links: 1114,
	},
	"example-bad.out": {
		format: ib.Classic,
		cas:    1, // grep -c '^Ca' example-bad.out; no link lines: grep -c '^\[' gives 0
	},
	"X5.topofile": {
		format:   ib.Classic,
		switches: 11,  // grep -c '^Switch' X5.topofile
		cas:      89,  // grep -c '^Ca' X5.topofile
		links:    159, // grep -c '^\[' X5.topofile gives 318, each cable from both ends
	},
	"ibtopotool-1.topo": {
		format:   ib.Classic,
		switches: 2, // grep -c '^Switch' ibtopotool-1.topo
		cas:      4, // grep -c '^Ca' ibtopotool-1.topo
		links:    7, // grep -c '^\[' gives 14, each cable from both ends
	},
	"ibtopotool-2.topo": {
		format: ib.Classic, switches: 1, cas: 2, // grep -c '^Switch'; grep -c '^Ca'
		links: 2, // grep -c '^\[' gives 4
	},
	"ibtopotool-3.topo": {
		format:   ib.Classic,
		switches: 2, // grep -c '^Switch' ibtopotool-3.topo
		cas:      6, // grep -c '^Ca' ibtopotool-3.topo
		// grep -c '^\[' gives 20: 6 self-link lines of 3 loopback cables
		// (grep -c '^\[.*"S-e41d2d030003e470"' in the e41d2d030003e470
		// block), 7 cables seen from both ends.
		links: 10, selfLinks: 3,
		diagnostics: 1, // line 1: "src/query_smp.c:195; umad ... bad status 110"
	},
	"ibtopotool-4.topo": {
		format: ib.Classic, switches: 1, cas: 1, // grep -c '^Switch'; grep -c '^Ca'
		links: 1, // grep -c '^\[' gives 2
	},
	"ibdiag-ca-label.ibnetdiscover": {
		format:   ib.IBDiag,
		switches: 1, cas: 2, // grep -c '^Switch'; grep -c '^Ca'
		// grep -c '^\[' gives 4: both cables from both ends, the HCA ends
		// with ibdiagnet2's labels "(B134D0F0/0/0/1)" and "(1)".
		links: 2,
	},
	"small-3tier-2rail.txt": {
		format:   ib.Classic,
		switches: 28,  // grep -c '^Switch': 16 leaves, 8 spines, 4 cores
		cas:      128, // grep -c '^Ca': 64 hosts x 2 HCAs
		links:    176, // grep -c '^\[' gives 352, each cable from both ends: 128 HCA, 32 leaf-spine, 16 spine-core
	},
	"osc-test.out": {
		format: ib.Ports,
		// awk '{print $1, $4; if ($7 == "-") print $8, $11}' osc-test.out | sort -u
		switches: 4, cas: 3,
		links: 4, // 7 connected lines; 3 cables listed from both ends, one SW-SW from one end
	},
	"osc-test2.out": {
		format:   ib.Ports,
		switches: 5, cas: 2, aggregation: 1, // same awk; grep -c 'Aggregation Node' counts one GUID twice
		// The aggregation node's port 1 is cabled to two switches (lines 1
		// and 5): the second is a diagnostic.
		links: 2, diagnostics: 1,
	},
	"osc-test3.out": {
		format: ib.Ports, switches: 1, // one unconnected port, description not quoted
	},
}

func TestParseFixtures(t *testing.T) {
	for name, want := range fixtureFacts {
		t.Run(name, func(t *testing.T) {
			f := parseFile(t, name)
			s := summarize(f)
			got := struct {
				format                        ib.Format
				switches, cas, aggregation    int
				links, selfLinks, diagnostics int
			}{f.Format, s.Switches, s.CAs, s.Aggregation, s.Links, s.SelfLinks, s.Diagnostics}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(want)); diff != "" {
				t.Errorf("facts mismatch (-want +got):\n%s", diff)
			}
			golden(t, filepath.Join("testdata", "golden", name+".json"), s)
		})
	}
}

// TestParseExampleNodes checks single nodes of example.out against its text.
func TestParseExampleNodes(t *testing.T) {
	f := parseFile(t, "example.out")
	want := map[string]*ib.Node{
		// line 10: Switch	65 "S-2c5eab0300b87b40"		# "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" enhanced port 0 lid 73 lmc 0
		leaf: {GUID: leaf, Type: ib.Switch, Desc: "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", Ports: 65, LID: 73, Line: 10},
		// line 2015: Ca	1 "H-e09d7303007a4bd8"		# "a08-p1-dgx-04-c01 mlx5_5"
		// line 2016: [1](e09d7303007a4bd8) 	"S-2c5eab0300b87b40"[1]		# lid 647 ...
		host: {GUID: host, Type: ib.CA, Desc: "a08-p1-dgx-04-c01 mlx5_5", Ports: 1, LID: 647,
			PortGUIDs: map[int]string{1: host}, Line: 2015},
	}
	for guid, w := range want {
		if diff := cmp.Diff(w, f.Nodes[guid]); diff != "" {
			t.Errorf("node %s mismatch (-want +got):\n%s", guid, diff)
		}
	}
	// The leaf's block (lines 11-44) has 34 link lines: hosts on 1-17,
	// spines on 35-50, its aggregation node on 65.
	nb := f.Neighbors(leaf)
	if len(nb) != 34 {
		t.Errorf("Neighbors(%s) has %d entries, want 34", leaf, len(nb))
	}
	if len(nb) > 0 && nb[0] != (ib.Neighbor{GUID: host, Port: 1, RemotePort: 1}) {
		t.Errorf("Neighbors(%s)[0] = %+v, want the host on port 1", leaf, nb[0])
	}
	if got, want := f.Neighbors(host), []ib.Neighbor{{GUID: leaf, Port: 1, RemotePort: 1}}; !cmp.Equal(got, want) {
		t.Errorf("Neighbors(%s) = %+v, want %+v", host, got, want)
	}
	// grep '^Ca' example.out | grep -c 'MT4129 ConnectX7': HCAs that kept
	// the firmware's default description, so no host name.
	defaults := 0
	for _, n := range f.ByType(ib.CA) {
		if strings.HasPrefix(n.Desc, "MT4129 ConnectX7") {
			defaults++
		}
	}
	if defaults != 69 {
		t.Errorf("%d CAs with the default MT4129 description, want 69", defaults)
	}
}

func TestByType(t *testing.T) {
	f, err := ib.Parse(strings.NewReader(classicDump))
	if err != nil {
		t.Fatal(err)
	}
	guids := func(ns []*ib.Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.GUID)
		}
		return out
	}
	tests := map[string]struct {
		typ  ib.NodeType
		want []string
	}{
		"switches": {ib.Switch, []string{leaf}},
		"cas":      {ib.CA, []string{an, host}},
		"routers":  {ib.Router, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, guids(f.ByType(tc.typ))); diff != "" {
				t.Errorf("ByType(%v) mismatch (-want +got):\n%s", tc.typ, diff)
			}
		})
	}
}

func TestNeighborsSelfLink(t *testing.T) {
	f := parseFile(t, "ibtopotool-3.topo")
	const sw = "e41d2d030003e470"
	want := []ib.Neighbor{
		{GUID: sw, Port: 1, RemotePort: 2},
		{GUID: sw, Port: 2, RemotePort: 1},
		{GUID: "f4521403005764b0", Port: 3, RemotePort: 1},
		{GUID: sw, Port: 19, RemotePort: 21},
		{GUID: sw, Port: 21, RemotePort: 19},
		{GUID: sw, Port: 29, RemotePort: 30},
		{GUID: sw, Port: 30, RemotePort: 29},
		{GUID: "e41d2d030061f957", Port: 34, RemotePort: 1},
		{GUID: "0002c903003421b0", Port: 35, RemotePort: 2},
	}
	if diff := cmp.Diff(want, f.Neighbors(sw)); diff != "" {
		t.Errorf("Neighbors mismatch (-want +got):\n%s", diff)
	}
	if got := f.Neighbors("0000000000000000"); len(got) != 0 {
		t.Errorf("Neighbors(unknown) = %+v, want none", got)
	}
}

func TestStrings(t *testing.T) {
	tests := map[string]struct {
		got, want string
	}{
		"switch":       {ib.Switch.String(), "switch"},
		"ca":           {ib.CA.String(), "ca"},
		"router":       {ib.Router.String(), "router"},
		"bad type":     {ib.NodeType(9).String(), "NodeType(9)"},
		"classic":      {ib.Classic.String(), "classic"},
		"ports":        {ib.Ports.String(), "ports"},
		"ibdiag":       {ib.IBDiag.String(), "ibdiag"},
		"bad format":   {ib.Format(0).String(), "Format(0)"},
		"unset format": {ib.Format(-1).String(), "Format(-1)"},
	}
	for name, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: String() = %q, want %q", name, tc.got, tc.want)
		}
	}
}

func BenchmarkParseExample(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "example.out"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ib.Parse(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func parseFile(t *testing.T, name string) *ib.Fabric {
	t.Helper()
	r, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := ib.Parse(r)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return f
}

// summary is what a golden file holds: counts, and the first few nodes,
// links and diagnostics, enough to review a parser change in a diff.
type summary struct {
	Format           string
	Switches         int
	CAs              int
	Routers          int
	Aggregation      int
	Links            int
	SelfLinks        int
	LinkRates        map[string]int `json:",omitempty"` // "4xNDR" -> links
	Diagnostics      int
	FirstSwitches    []nodeSummary
	FirstCAs         []nodeSummary
	FirstLinks       []ib.Link
	FirstDiagnostics []ib.Diagnostic
}

type nodeSummary struct {
	GUID        string
	Type        string
	Desc        string
	Ports       int
	LID         int
	Aggregation bool           `json:",omitempty"`
	PortGUIDs   map[int]string `json:",omitempty"`
	Line        int
	Neighbors   int
}

func summarize(f *ib.Fabric) summary {
	s := summary{
		Format:      f.Format.String(),
		Switches:    len(f.ByType(ib.Switch)),
		CAs:         len(f.ByType(ib.CA)),
		Routers:     len(f.ByType(ib.Router)),
		Links:       len(f.Links),
		Diagnostics: len(f.Diagnostics),
		LinkRates:   map[string]int{},
	}
	for _, n := range f.Nodes {
		if n.Aggregation {
			s.Aggregation++
		}
	}
	for _, l := range f.Links {
		if l.A == l.B {
			s.SelfLinks++
		}
		s.LinkRates[l.Width+l.Speed]++
	}
	first := func(ns []*ib.Node) []nodeSummary {
		var out []nodeSummary
		for _, n := range ns[:min(3, len(ns))] {
			out = append(out, nodeSummary{n.GUID, n.Type.String(), n.Desc, n.Ports, n.LID, n.Aggregation, n.PortGUIDs, n.Line, len(f.Neighbors(n.GUID))})
		}
		return out
	}
	s.FirstSwitches = first(f.ByType(ib.Switch))
	s.FirstCAs = first(f.ByType(ib.CA))
	s.FirstLinks = f.Links[:min(3, len(f.Links))]
	s.FirstDiagnostics = f.Diagnostics[:min(5, len(f.Diagnostics))]
	return s
}

// golden compares v, as indented JSON, with the file at path; with -update
// it writes the file instead.
func golden(t *testing.T, path string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got); if the change is right, run with -update and review the diff:\n%s", path, diff)
	}
}

// TestNumbered checks the numbering Parse works out against the one
// Numbered works out from Nodes and Links alone (for a copy of the Fabric
// built by hand), on every fixture, and that a changed Fabric is numbered
// afresh.
func TestNumbered(t *testing.T) {
	for name := range fixtureFacts {
		t.Run(name, func(t *testing.T) {
			f := parseFile(t, name)
			nodes, ends := f.Numbered()
			byHand := &ib.Fabric{Format: f.Format, Nodes: f.Nodes, Links: f.Links}
			wantNodes, wantEnds := byHand.Numbered()
			guids := func(ns []*ib.Node) []string {
				out := make([]string, len(ns))
				for i, n := range ns {
					out[i] = n.GUID
				}
				return out
			}
			if diff := cmp.Diff(guids(wantNodes), guids(nodes)); diff != "" {
				t.Errorf("nodes (-by hand +parsed):\n%s", diff)
			}
			if diff := cmp.Diff(wantEnds, ends, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("link ends (-by hand +parsed):\n%s", diff)
			}
			for k, e := range ends {
				if nodes[e[0]].GUID != f.Links[k].A || nodes[e[1]].GUID != f.Links[k].B {
					t.Fatalf("link %d (%+v) numbered %v", k, f.Links[k], e)
				}
			}
			if len(f.Links) < 2 {
				return
			}
			f.Links = f.Links[1:]
			if _, ends := f.Numbered(); len(ends) != len(f.Links) || nodes[ends[0][0]].GUID != f.Links[0].A {
				t.Errorf("after a change of Links, Numbered still answers for the old ones")
			}
		})
	}
}

// onlyReader hides every method of a reader but Read, as a pipe has.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(b []byte) (int, error) { return o.r.Read(b) }

// TestParseReaders parses every fixture, and a dump whose link lines are
// found wrong only once every node is known (so their text is read
// again), in chunks of every size from one byte up, from a reader that
// cannot seek, and from a reader part-way through its input: the Fabric
// must be the same.
func TestParseReaders(t *testing.T) {
	inputs := map[string]string{
		// Line 4 names a switch the dump never declares; line 7 claims a
		// port line 3 already cabled.
		"late diagnostics": "Switch\t4 \"S-0000000000000a01\"\t# \"sw1\" lid 1\n" +
			"[1]\t\"H-0000000000000b01\"[1](b01)\t# \"node1 mlx5_0\" lid 2 4xNDR\n" +
			"[2]\t\"H-0000000000000b02\"[1]\t# \"node2 mlx5_0\" lid 3 4xHDR\n" +
			"   [3]\t\"S-0000000000000a09\"[1]\t# \"gone\" lid 9 4xNDR\n\n" +
			"Ca\t1 \"H-0000000000000b01\"\t# \"node1 mlx5_0\"\n" +
			"[1](b01)\t\"S-0000000000000a01\"[2]\t# lid 2 lmc 0 \"sw1\" lid 1 4xNDR\n" +
			"Ca\t1 \"H-0000000000000b02\"\t# \"node2 mlx5_0\"\n" +
			"[1]\t\"S-0000000000000a01\"[2]\t# lid 3 lmc 0 \"sw1\" lid 1 4xHDR",
	}
	for name := range fixtureFacts {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		inputs[name] = string(data)
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			want, wantErr := ib.Parse(strings.NewReader(in))
			check := func(how string, got *ib.Fabric, err error) {
				t.Helper()
				if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
					t.Fatalf("%s: error %v, want %v", how, err, wantErr)
				}
				if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(ib.Fabric{})); diff != "" {
					t.Fatalf("%s: Fabric differs (-whole +%s):\n%s", how, how, diff)
				}
			}
			for _, size := range []int{1, 2, 7, 64, 4096} {
				restore := ib.SetChunkSize(size)
				got, err := ib.Parse(strings.NewReader(in))
				restore()
				check(fmt.Sprintf("chunks of %d bytes", size), got, err)
			}
			got, err := ib.Parse(onlyReader{strings.NewReader(in)})
			check("a reader that cannot seek", got, err)
			r := strings.NewReader("prefix\n" + in)
			if _, err := r.Seek(int64(len("prefix\n")), io.SeekStart); err != nil {
				t.Fatal(err)
			}
			got, err = ib.Parse(r)
			check("a reader part-way through", got, err)
		})
	}
	f, err := ib.Parse(strings.NewReader(inputs["late diagnostics"]))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, d := range f.Diagnostics {
		texts = append(texts, fmt.Sprintf("%d %s", d.Line, d.Text))
	}
	if want := []string{"4 [3]\t\"S-0000000000000a09\"[1]\t# \"gone\" lid 9 4xNDR", "7 [1](b01)\t\"S-0000000000000a01\"[2]\t# lid 2 lmc 0 \"sw1\" lid 1 4xNDR"}; !slices.Equal(texts, want) {
		t.Errorf("diagnostics %q, want %q", texts, want)
	}
}
