package nvml

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// validNode is a small node every Read/Write case starts from.
func validNode() Node {
	return Node{
		Hostname:    "gpu-a01",
		CollectedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		Source:      SourceNVML,
		Driver:      "580.65.06",
		CUDA:        "13.0",
		GPUs: []GPU{
			{
				Index: 0, Minor: 0, UUID: "GPU-aaaa", Name: "NVIDIA GB200", Type: "gb200",
				PCIBusID: "0008:01:00.0", NUMANode: 0, CPUAffinity: "0-71", MemoryMiB: 189471,
				Fabric:  &Fabric{ClusterUUID: "5cd30dc8-1234-4567-89ab-cdef01234567", CliqueID: 32766, State: FabricCompleted, Health: "healthy"},
				NVLinks: []Link{{Peer: -1, Count: 18}},
			},
			{
				Index: 1, Minor: 1, UUID: "GPU-bbbb", Name: "NVIDIA GB200", Type: "gb200",
				PCIBusID: "0009:01:00.0", NUMANode: 0, CPUAffinity: "0-71", MemoryMiB: 189471,
				Fabric:  &Fabric{ClusterUUID: "5cd30dc8-1234-4567-89ab-cdef01234567", CliqueID: 32766, State: FabricCompleted, Health: "healthy"},
				NVLinks: []Link{{Peer: -1, Count: 18}},
			},
		},
	}
}

const validJSON = `{
  "hostname": "gpu-a01",
  "collected_at": "2026-03-01T12:00:00Z",
  "source": "nvml",
  "driver_version": "580.65.06",
  "cuda_version": "13.0",
  "gpus": [
    {
      "index": 0,
      "minor": 0,
      "uuid": "GPU-aaaa",
      "name": "NVIDIA GB200",
      "type": "gb200",
      "pci_bus_id": "0008:01:00.0",
      "numa_node": 0,
      "cpu_affinity": "0-71",
      "memory_mib": 189471,
      "fabric": {
        "cluster_uuid": "5cd30dc8-1234-4567-89ab-cdef01234567",
        "clique_id": 32766,
        "state": "completed",
        "health": "healthy"
      },
      "nvlinks": [
        {
          "peer": -1,
          "count": 18
        }
      ]
    },
    {
      "index": 1,
      "minor": 1,
      "uuid": "GPU-bbbb",
      "name": "NVIDIA GB200",
      "type": "gb200",
      "pci_bus_id": "0009:01:00.0",
      "numa_node": 0,
      "cpu_affinity": "0-71",
      "memory_mib": 189471,
      "fabric": {
        "cluster_uuid": "5cd30dc8-1234-4567-89ab-cdef01234567",
        "clique_id": 32766,
        "state": "completed",
        "health": "healthy"
      },
      "nvlinks": [
        {
          "peer": -1,
          "count": 18
        }
      ]
    }
  ]
}
`

func TestWriteRead(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, validNode()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(validJSON, buf.String()); diff != "" {
		t.Errorf("Write() mismatch (-want +got):\n%s", diff)
	}
	got, err := Read(strings.NewReader(validJSON))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(validNode(), got); diff != "" {
		t.Errorf("Read() mismatch (-want +got):\n%s", diff)
	}
}

func TestWriteSortsWithoutTouchingItsArgument(t *testing.T) {
	n := validNode()
	n.GPUs[0].Minor, n.GPUs[1].Minor = 1, 0
	var buf bytes.Buffer
	if err := Write(&buf, n); err != nil {
		t.Fatal(err)
	}
	if n.GPUs[0].Index != 0 {
		t.Errorf("Write reordered its argument's GPUs")
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.GPUs[0].Minor != 0 || got.GPUs[0].Index != 1 {
		t.Errorf("GPUs not sorted by minor: %+v", got.GPUs)
	}
}

func TestWriteEmptyGPUs(t *testing.T) {
	n := validNode()
	n.GPUs = nil
	var buf bytes.Buffer
	if err := Write(&buf, n); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"gpus": []`) {
		t.Errorf("Write() of a node without GPUs wrote %s, want \"gpus\": []", buf.String())
	}
}

var readTests = map[string]struct {
	json    string
	wantErr string // substring; "" for success
}{
	"valid": {json: validJSON},
	"unknown field": {
		json:    strings.Replace(validJSON, `"source": "nvml",`, `"source": "nvml", "rack": "r1",`, 1),
		wantErr: `unknown field "rack"`,
	},
	"unknown field in a GPU": {
		json:    strings.Replace(validJSON, `"index": 1,`, `"index": 1, "serial": "x",`, 1),
		wantErr: `unknown field "serial"`,
	},
	"trailing data": {
		json:    validJSON + "{}",
		wantErr: "data after the node object",
	},
	"not JSON": {
		json:    "hostname: gpu-a01",
		wantErr: "decode node JSON",
	},
	"empty": {
		json:    "",
		wantErr: "decode node JSON",
	},
	"no hostname": {
		json:    strings.Replace(validJSON, `"gpu-a01"`, `""`, 1),
		wantErr: "hostname: empty",
	},
	"unknown source": {
		json:    strings.Replace(validJSON, `"source": "nvml"`, `"source": "dcgm"`, 1),
		wantErr: `source: "dcgm" is neither`,
	},
	"duplicate index": {
		json:    strings.Replace(validJSON, `"index": 1,`, `"index": 0,`, 1),
		wantErr: "gpus[1].index (GPU index 0): 0 is also the index of gpus[0] (GPU index 0)",
	},
	"duplicate minor": {
		json:    strings.Replace(validJSON, `"minor": 1,`, `"minor": 0,`, 1),
		wantErr: "minor (GPU index 1): 0 is also the minor number of gpus[0] (GPU index 0)",
	},
	"two unknown minors are fine": {
		json: strings.Replace(strings.Replace(validJSON, `"minor": 1,`, `"minor": -1,`, 1), `"minor": 0,`, `"minor": -1,`, 1),
	},
	"duplicate UUID": {
		json:    strings.Replace(validJSON, `"GPU-bbbb"`, `"GPU-aaaa"`, 1),
		wantErr: "uuid (GPU index 1): GPU-aaaa is also the UUID of gpus[0]",
	},
	"empty UUID": {
		json:    strings.Replace(validJSON, `"GPU-bbbb"`, `""`, 1),
		wantErr: "gpus[1].uuid (GPU index 1): empty",
	},
	"bus id as nvidia-smi prints it": {
		json:    strings.Replace(validJSON, `"0009:01:00.0"`, `"00000009:01:00.0"`, 1),
		wantErr: `"00000009:01:00.0" is not normalised; want "0009:01:00.0"`,
	},
	"duplicate bus id": {
		json:    strings.Replace(validJSON, `"0009:01:00.0"`, `"0008:01:00.0"`, 1),
		wantErr: "0008:01:00.0 is also the bus id of gpus[0]",
	},
	"bad CPU list": {
		json:    strings.Replace(validJSON, `"cpu_affinity": "0-71",`, `"cpu_affinity": "71-0",`, 1),
		wantErr: "range 71-0 runs backwards",
	},
	"bad fabric state": {
		json:    strings.Replace(validJSON, `"completed"`, `"Completed"`, 1),
		wantErr: `fabric.state (GPU index 0): "Completed" is not one of`,
	},
	"NVLink to a GPU the node lacks": {
		json:    strings.Replace(validJSON, `"peer": -1,`, `"peer": 4,`, 1),
		wantErr: "nvlinks[0] (GPU index 0): peer 4 is no GPU of this node",
	},
	"NVLink to itself": {
		json:    strings.Replace(validJSON, `"peer": -1,`, `"peer": 0,`, 1),
		wantErr: "peer 0 is the GPU itself",
	},
	"NVLink count zero": {
		json:    strings.Replace(validJSON, `"count": 18`, `"count": 0`, 1),
		wantErr: "count 0 is not positive",
	},
	"all problems at once": {
		json: strings.NewReplacer(`"GPU-bbbb"`, `"GPU-aaaa"`, `"minor": 1,`, `"minor": 0,`).Replace(validJSON),
		wantErr: "gpus[1].minor (GPU index 1): 0 is also the minor number of gpus[0] (GPU index 0)\n" +
			"gpus[1].uuid (GPU index 1): GPU-aaaa is also the UUID of gpus[0] (GPU index 0)",
	},
}

func TestRead(t *testing.T) {
	for name, tt := range readTests {
		t.Run(name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.json))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Read() error = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Read() error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNormalizeBusID(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    string
		wantErr bool
	}{
		"nvidia-smi 8-digit domain": {in: "00000000:18:00.0", want: "0000:18:00.0"},
		"upper-case hex":            {in: "00000000:00:1E.0", want: "0000:00:1e.0"},
		"sysfs form":                {in: "0000:bd:00.0", want: "0000:bd:00.0"},
		"no domain":                 {in: "18:00.0", want: "0000:18:00.0"},
		"domain above 0xffff":       {in: "00010000:01:00.0", want: "10000:01:00.0"},
		"Azure-style domain":        {in: "0001:00:00.0", want: "0001:00:00.0"},
		"surrounding space":         {in: " 0000:18:00.0\n", want: "0000:18:00.0"},
		"empty":                     {in: "", wantErr: true},
		"N/A":                       {in: "N/A", wantErr: true},
		"no function":               {in: "0000:18:00", wantErr: true},
		"bus too long":              {in: "0000:118:00.0", wantErr: true},
		"device above 1f":           {in: "0000:18:20.0", wantErr: true},
		"function above 7":          {in: "0000:18:00.8", wantErr: true},
		"not hex":                   {in: "0000:1g:00.0", wantErr: true},
		"sign":                      {in: "+000:18:00.0", wantErr: true},
		"four fields":               {in: "0:0000:18:00.0", wantErr: true},
		"domain of nine digits":     {in: "000000000:18:00.0", wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := NormalizeBusID(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("NormalizeBusID(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseCPUList(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    string
		wantErr bool
	}{
		"nvidia-smi topo -m":  {in: "0-55,112-167", want: "0-55,112-167"},
		"single CPU":          {in: "7", want: "7"},
		"unsorted, adjacent":  {in: "8-15,0-7,16", want: "0-16"},
		"overlapping":         {in: "0-10,5-20,30", want: "0-20,30"},
		"spaces after commas": {in: "0-3, 8-11", want: "0-3,8-11"},
		"empty":               {in: "", wantErr: true},
		"N/A":                 {in: "N/A", wantErr: true},
		"backwards":           {in: "5-1", wantErr: true},
		"open range":          {in: "5-", wantErr: true},
		"negative":            {in: "-1", wantErr: true},
		"trailing comma":      {in: "0-3,", wantErr: true},
		"huge":                {in: "0-99999999999999999999", wantErr: true},
		"above the bound":     {in: "0-65537", wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCPUList(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseCPUList(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestCPUListFromMask(t *testing.T) {
	tests := map[string]struct {
		mask []uint
		want string
	}{
		"empty":                 {mask: []uint{0, 0}, want: ""},
		"first word":            {mask: []uint{0xff}, want: "0-7"},
		"range across words":    {mask: []uint{1 << 63, 1}, want: "63-64"},
		"two NUMA halves":       {mask: mask(256, 0, 63, 128, 191), want: "0-63,128-191"},
		"single bits":           {mask: []uint{0b1010_0101}, want: "0,2,5,7"},
		"high word only":        {mask: []uint{0, 0, 1 << 2}, want: "130"},
		"every bit of the mask": {mask: []uint{^uint(0), ^uint(0)}, want: "0-127"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := cpuListFromMask(tt.mask, 64); got != tt.want {
				t.Errorf("cpuListFromMask(%x) = %q, want %q", tt.mask, got, tt.want)
			}
		})
	}
}

func TestSingleBit(t *testing.T) {
	tests := map[string]struct {
		mask []uint
		want int
	}{
		"none":             {mask: []uint{0, 0}, want: -1},
		"node 0":           {mask: []uint{1}, want: 0},
		"node 3":           {mask: []uint{8}, want: 3},
		"node 65":          {mask: []uint{0, 2}, want: 65},
		"two in a word":    {mask: []uint{3}, want: -1},
		"one in each word": {mask: []uint{1, 1}, want: -1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := singleBit(tt.mask, 64); got != tt.want {
				t.Errorf("singleBit(%x) = %d, want %d", tt.mask, got, tt.want)
			}
		})
	}
}
