package nvml

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the parsers' output")

// golden compares got with the file at path, or rewrites the file under -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s\nIf the change is right, rerun with -update and review the diff.", path, diff)
	}
}

func fixtures(t testing.TB, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures match testdata/%s (%v)", pattern, err)
	}
	return files
}

func parseXMLFile(t *testing.T, path string) Node {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := ParseQueryXML(f)
	if err != nil {
		t.Fatalf("ParseQueryXML(%s): %v", path, err)
	}
	return n
}

// TestParseQueryXMLGolden parses every fixture, writes it with Write under
// the fixture's name as hostname, and compares with testdata/golden/smi.
func TestParseQueryXMLGolden(t *testing.T) {
	for _, path := range fixtures(t, "smi/*.xml") {
		name := strings.TrimSuffix(filepath.Base(path), ".xml")
		t.Run(name, func(t *testing.T) {
			n := parseXMLFile(t, path)
			n.Hostname = name
			var buf bytes.Buffer
			if err := Write(&buf, n); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "golden", "smi", name+".json"), buf.Bytes())
			back, err := Read(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(n, back); diff != "" {
				t.Errorf("Read(Write()) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseQueryXMLByHand states facts a reviewer can check in the XML.
func TestParseQueryXMLByHand(t *testing.T) {
	tests := map[string]struct {
		file   string
		driver string
		cuda   string
		at     time.Time
		gpus   []GPU
	}{
		// attached_gpus says 4, but the capture lists one GPU (minor 1) with
		// MIG on and four MIG devices.
		"A100 SXM4 with MIG": {
			file: "a100-sxm4-v12.xml", driver: "535.54.03", cuda: "12.2",
			at: time.Date(2023, 8, 4, 11, 44, 30, 0, time.UTC),
			gpus: []GPU{{
				Index: 0, Minor: 1, UUID: "GPU-513536b6-7d19-9063-b049-1e69664bb298",
				Name: "NVIDIA A100-SXM4-80GB", Type: "a100", PCIBusID: "0000:01:00.0",
				NUMANode: -1, MemoryMiB: 81920, MIG: true,
			}},
		},
		"A10G: bus 00000000:00:1E.0": {
			file: "a10g.xml", driver: "515.105.01", cuda: "11.7",
			at: time.Date(2023, 4, 24, 16, 11, 51, 0, time.UTC),
			gpus: []GPU{{
				Index: 0, Minor: 0, UUID: "GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94",
				Name: "NVIDIA A10G", Type: "a10g", PCIBusID: "0000:00:1e.0",
				NUMANode: -1, MemoryMiB: 23028,
			}},
		},
		"Tesla T4": {
			file: "tesla-t4.xml", driver: "515.105.01", cuda: "11.7",
			at: time.Date(2023, 4, 24, 16, 22, 39, 0, time.UTC),
			gpus: []GPU{{
				Index: 0, Minor: 0, UUID: "GPU-d37e67a5-91dd-3774-a5cb-99096249601a",
				Name: "Tesla T4", Type: "t4", PCIBusID: "0000:00:1e.0",
				NUMANode: -1, MemoryMiB: 15360,
			}},
		},
		"Quadro P400: no MIG or fabric elements (driver 418)": {
			file: "quadro-p400.xml", driver: "418.43", cuda: "10.1",
			at: time.Date(2019, 3, 11, 17, 3, 27, 0, time.UTC),
			gpus: []GPU{{
				Index: 0, Minor: 0, UUID: "GPU-8f750be4-dfbc-23b9-b33f-da729a536494",
				Name: "Quadro P400", Type: "p400", PCIBusID: "0000:43:00.0",
				NUMANode: -1, MemoryMiB: 1998,
			}},
		},
		"GeForce RTX 3090": {
			file: "rtx-3090-v12.xml", driver: "525.147.05", cuda: "12.0",
			at: time.Date(2024, 5, 3, 11, 54, 37, 0, time.UTC),
			gpus: []GPU{{
				Index: 0, Minor: 0, UUID: "GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
				Name: "NVIDIA GeForce RTX 3090", Type: "rtx3090", PCIBusID: "0000:00:10.0",
				NUMANode: -1, MemoryMiB: 24576,
			}},
		},
		"RTX 4000 SFF Ada, DTD v13 with fabric N/A": {
			file: "rtx-4000-sff-ada-v13.xml", driver: "595.84", cuda: "13.2",
			at: time.Date(2026, 8, 6, 1, 3, 40, 0, time.UTC),
			gpus: []GPU{{
				Index: 0, Minor: 0, UUID: "GPU-37037c3f-65c8-ec4d-24a9-420204ad8026",
				Name: "NVIDIA RTX 4000 SFF Ada Generation", Type: "rtx4000ada", PCIBusID: "0000:06:00.0",
				NUMANode: -1, MemoryMiB: 20475,
			}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			n := parseXMLFile(t, filepath.Join("testdata", "smi", tt.file))
			want := Node{Source: SourceNvidiaSMI, Driver: tt.driver, CUDA: tt.cuda, CollectedAt: tt.at, GPUs: tt.gpus}
			if diff := cmp.Diff(want, n); diff != "" {
				t.Errorf("ParseQueryXML(%s) mismatch (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}

// A made-up dump in the v13 layout of what nvidia-smi prints on a GB200
// tray; the fixtures hold no GPU with a fabric.
const smiTwoGPUs = `<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">
<nvidia_smi_log>
	<timestamp>Thu Aug  6 01:03:40 2026</timestamp>
	<driver_version>580.65.06</driver_version>
	<cuda_version>13.0</cuda_version>
	<attached_gpus>2</attached_gpus>
	<gpu id="00000009:01:00.0">
		<product_name>NVIDIA GB200</product_name>
		<mig_mode><current_mig>Disabled</current_mig><pending_mig>Disabled</pending_mig></mig_mode>
		<uuid>GPU-bbbbbbbb-0000-0000-0000-000000000001</uuid>
		<minor_number>0</minor_number>
		<pci><pci_bus_id>00000009:01:00.0</pci_bus_id></pci>
		<fb_memory_usage><total>189471 MiB</total></fb_memory_usage>
		<fabric>
			<state>Completed</state>
			<status>Success</status>
			<cliqueId>32766</cliqueId>
			<clusterUuid>5CD30DC8-1234-4567-89AB-CDEF01234567</clusterUuid>
			<health><summary>Healthy</summary><bandwidth>Full</bandwidth></health>
		</fabric>
	</gpu>
	<gpu id="00000008:01:00.0">
		<product_name>NVIDIA GB200</product_name>
		<uuid>GPU-bbbbbbbb-0000-0000-0000-000000000000</uuid>
		<minor_number>1</minor_number>
		<pci><pci_bus_id>00000008:01:00.0</pci_bus_id></pci>
		<fabric>
			<state>In Progress</state>
			<cliqueId>N/A</cliqueId>
			<clusterUuid>00000000-0000-0000-0000-000000000000</clusterUuid>
			<health><summary>Limited Capacity</summary></health>
		</fabric>
	</gpu>
</nvidia_smi_log>
`

var parseQueryXMLTests = map[string]struct {
	xml     string
	want    []GPU
	wantErr string // substring; "" for success
}{
	"fabric states, order by minor": {
		xml: smiTwoGPUs,
		want: []GPU{
			{
				Index: 0, Minor: 0, UUID: "GPU-bbbbbbbb-0000-0000-0000-000000000001", Name: "NVIDIA GB200", Type: "gb200",
				PCIBusID: "0009:01:00.0", NUMANode: -1, MemoryMiB: 189471,
				Fabric: &Fabric{ClusterUUID: "5cd30dc8-1234-4567-89ab-cdef01234567", CliqueID: 32766, State: FabricCompleted, Health: "healthy"},
			},
			{
				Index: 1, Minor: 1, UUID: "GPU-bbbbbbbb-0000-0000-0000-000000000000", Name: "NVIDIA GB200", Type: "gb200",
				PCIBusID: "0008:01:00.0", NUMANode: -1,
				Fabric: &Fabric{State: FabricInProgress, Health: "limited_capacity"},
			},
		},
	},
	// The cases without want are checked in TestParseQueryXMLDetails.
	"minor N/A (Windows)": {
		xml: strings.Replace(smiTwoGPUs, "<minor_number>1</minor_number>", "<minor_number>N/A</minor_number>", 1),
	},
	"bus id from the id attribute": {
		xml: strings.Replace(smiTwoGPUs, "<pci><pci_bus_id>00000008:01:00.0</pci_bus_id></pci>", "", 1),
	},
	"no GPUs": {
		xml:  `<nvidia_smi_log><driver_version>580.65.06</driver_version><attached_gpus>0</attached_gpus></nvidia_smi_log>`,
		want: []GPU{},
	},
	"fabric Not Supported": {
		xml: strings.Replace(smiTwoGPUs, "<state>In Progress</state>", "<state>Not Supported</state>", 1),
	},
	"unknown fabric state": {
		xml:     strings.Replace(smiTwoGPUs, "<state>In Progress</state>", "<state>Degraded</state>", 1),
		wantErr: `gpu 1 (00000008:01:00.0): <fabric><state> "Degraded" is not`,
	},
	"bad clique id": {
		xml:     strings.Replace(smiTwoGPUs, "<cliqueId>32766</cliqueId>", "<cliqueId>-1</cliqueId>", 1),
		wantErr: `<cliqueId> "-1" is not a number`,
	},
	"duplicate minor": {
		xml:     strings.Replace(smiTwoGPUs, "<minor_number>1</minor_number>", "<minor_number>0</minor_number>", 1),
		wantErr: "0 is also the minor number of gpus[0]",
	},
	"duplicate UUID": {
		xml:     strings.Replace(smiTwoGPUs, "000000000000</uuid>", "000000000001</uuid>", 1),
		wantErr: "is also the UUID of gpus[0]",
	},
	"no UUID": {
		xml:     strings.Replace(smiTwoGPUs, "<uuid>GPU-bbbbbbbb-0000-0000-0000-000000000000</uuid>", "", 1),
		wantErr: "gpu 1 (00000008:01:00.0): no <uuid>",
	},
	"bad bus id": {
		xml:     strings.Replace(smiTwoGPUs, "<pci_bus_id>00000008:01:00.0</pci_bus_id>", "<pci_bus_id>8:1</pci_bus_id>", 1),
		wantErr: `PCI bus id "8:1"`,
	},
	"memory in GiB": {
		xml:     strings.Replace(smiTwoGPUs, "189471 MiB", "185 GiB", 1),
		wantErr: `<fb_memory_usage><total> "185 GiB" is not like`,
	},
	"MIG mode unknown": {
		xml:     strings.Replace(smiTwoGPUs, "<current_mig>Disabled</current_mig>", "<current_mig>Pending</current_mig>", 1),
		wantErr: `<current_mig> "Pending"`,
	},
	"bad timestamp": {
		xml:     strings.Replace(smiTwoGPUs, "Thu Aug  6 01:03:40 2026", "2026-08-06T01:03:40Z", 1),
		wantErr: "<timestamp>",
	},
	"other root element": {
		xml:     `<nvidia_smi><gpu/></nvidia_smi>`,
		wantErr: "expected element type <nvidia_smi_log>",
	},
	"truncated": {
		xml:     smiTwoGPUs[:len(smiTwoGPUs)/2],
		wantErr: "parse nvidia-smi -q -x output",
	},
	"empty": {
		xml:     "",
		wantErr: "EOF",
	},
}

func TestParseQueryXML(t *testing.T) {
	for name, tt := range parseQueryXMLTests {
		t.Run(name, func(t *testing.T) {
			n, err := ParseQueryXML(strings.NewReader(tt.xml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseQueryXML() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseQueryXML() error = %v", err)
			}
			if tt.want != nil {
				if diff := cmp.Diff(tt.want, n.GPUs); diff != "" {
					t.Errorf("GPUs mismatch (-want +got):\n%s", diff)
				}
			}
			if n.Source != SourceNvidiaSMI {
				t.Errorf("Source = %q", n.Source)
			}
		})
	}
}

func TestParseQueryXMLDetails(t *testing.T) {
	parse := func(xml string) Node {
		t.Helper()
		n, err := ParseQueryXML(strings.NewReader(xml))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := parse(parseQueryXMLTests["minor N/A (Windows)"].xml); n.GPUs[0].Minor != -1 || n.GPUs[0].Index != 1 {
		t.Errorf("minor N/A: first GPU %+v, want index 1 with minor -1 (sorted first)", n.GPUs[0])
	}
	if n := parse(parseQueryXMLTests["bus id from the id attribute"].xml); n.GPUs[1].PCIBusID != "0008:01:00.0" {
		t.Errorf("bus id from the id attribute: %q", n.GPUs[1].PCIBusID)
	}
	if n := parse(parseQueryXMLTests["fabric Not Supported"].xml); n.GPUs[1].Fabric != nil {
		t.Errorf("fabric Not Supported: Fabric = %+v, want nil", n.GPUs[1].Fabric)
	}
}
