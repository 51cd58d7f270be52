package nvml

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"
)

var collectedAt = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The PCI buses of a DGX A100's GPUs, in index (bus) order.
var dgxA100Buses = []uint32{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd}

// The go-nvml servers answer Init, counts, handles, UUID, name, minor,
// memory and MIG mode, but their GetPciInfo has no bus id, their UUIDs are
// random, and NVLink, fabric and affinity calls are left unset (a call
// panics). configure fills those in as a DGX A100 answers them: GPUs 0-3 on
// NUMA node 0 (CPUs 0-63 and their SMT siblings 128-191), 4-7 on node 1, 12
// NVLinks per GPU, all to the six NVSwitches, no fabric. Minor numbers run
// backwards (minor 7 is index 0) so that the test sees Collect sort by minor
// and keep the index.
func configure(s *server.Server) {
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		bus := dgxA100Buses[i%len(dgxA100Buses)] + uint32(i/len(dgxA100Buses))
		dev.UUID = fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i)
		dev.Minor = len(s.Devices) - 1 - i
		dev.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
			return gonvml.PciInfo{
				Bus:         bus,
				PciDeviceId: dev.Config.PciDeviceId,
				BusId:       cChars(fmt.Sprintf("00000000:%02X:00.0", bus)),
			}, gonvml.SUCCESS
		}
		dev.GetNvLinkStateFunc = func(link int) (gonvml.EnableState, gonvml.Return) {
			if link >= 12 {
				return 0, gonvml.ERROR_INVALID_ARGUMENT
			}
			return gonvml.FEATURE_ENABLED, gonvml.SUCCESS
		}
		dev.GetNvLinkRemotePciInfoFunc = func(link int) (gonvml.PciInfo, gonvml.Return) {
			// Two links to each of six NVSwitches at c4..c9.
			return gonvml.PciInfo{BusId: cChars(fmt.Sprintf("00000000:%02X:00.0", 0xc4+link/2))}, gonvml.SUCCESS
		}
		dev.GetGpuFabricInfo_v4Func = func() (gonvml.GpuFabricInfo_v4, gonvml.Return) {
			return gonvml.GpuFabricInfo_v4{}, gonvml.ERROR_NOT_SUPPORTED
		}
		node := i * 2 / len(s.Devices)
		dev.GetCpuAffinityWithinScopeFunc = func(n int, scope gonvml.AffinityScope) ([]uint, gonvml.Return) {
			if scope != gonvml.AFFINITY_SCOPE_NODE {
				return nil, gonvml.ERROR_INVALID_ARGUMENT
			}
			return mask(n, node*64, node*64+63, 128+node*64, 128+node*64+63), gonvml.SUCCESS
		}
		dev.GetMemoryAffinityFunc = func(n int, scope gonvml.AffinityScope) ([]uint, gonvml.Return) {
			return mask(n, node, node), gonvml.SUCCESS
		}
	}
}

// dgxA100Want is what Collect should make of a configured dgxa100.New().
func dgxA100Want() Node {
	n := Node{
		Hostname: "dgx01", CollectedAt: collectedAt, Source: SourceNVML,
		Driver: "550.54.15", CUDA: "12.4",
	}
	for minor := range 8 {
		index := 7 - minor
		cpus, numa := "0-63,128-191", 0
		if index >= 4 {
			cpus, numa = "64-127,192-255", 1
		}
		n.GPUs = append(n.GPUs, GPU{
			Index:       index,
			Minor:       minor,
			UUID:        fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", index),
			Name:        "Mock NVIDIA A100-SXM4-40GB",
			Type:        "a100",
			PCIBusID:    fmt.Sprintf("0000:%02x:00.0", dgxA100Buses[index]),
			NUMANode:    numa,
			CPUAffinity: cpus,
			MemoryMiB:   40960,
			NVLinks:     []Link{{Peer: -1, Count: 12}},
		})
	}
	return n
}

func TestCollect(t *testing.T) {
	tests := map[string]struct {
		server  func() *server.Server
		want    func(s *server.Server) Node
		wantErr string        // substring of the error; "" for success
		wantIs  gonvml.Return // checked with errors.Is when not SUCCESS
	}{
		"DGX A100: eight GPUs behind NVSwitches": {
			server: func() *server.Server {
				s := dgxa100.New()
				configure(s)
				return s
			},
			want: func(*server.Server) Node { return dgxA100Want() },
		},
		"NVLink bridges between GPU pairs, MIG on one GPU": {
			// Links 0-3 of GPU 2k go to GPU 2k+1 and back; links 4-11 to NVSwitches.
			server: func() *server.Server {
				s := dgxa100.New()
				configure(s)
				for i, d := range s.Devices {
					dev := d.(*server.Device)
					buddy := dgxA100Buses[i^1]
					switchLinks := dev.GetNvLinkRemotePciInfoFunc
					dev.GetNvLinkRemotePciInfoFunc = func(link int) (gonvml.PciInfo, gonvml.Return) {
						if link < 4 {
							return gonvml.PciInfo{BusId: cChars(fmt.Sprintf("00000000:%02x:00.0", buddy))}, gonvml.SUCCESS
						}
						return switchLinks(link)
					}
				}
				s.Devices[3].(*server.Device).MigMode = gonvml.DEVICE_MIG_ENABLE
				return s
			},
			want: func(*server.Server) Node {
				n := dgxA100Want()
				for i := range n.GPUs {
					g := &n.GPUs[i]
					g.NVLinks = []Link{{Peer: -1, Count: 8}, {Peer: g.Index ^ 1, Count: 4}}
					g.MIG = g.Index == 3
				}
				return n
			},
		},
		"GB200-style tray: fabric complete with cluster UUID and clique": {
			server: func() *server.Server {
				s := dgxb200.NewWithGPUs(gpus.Multiple(4, gpus.B200_SXM5_180GB)...)
				configure(s)
				for _, d := range s.Devices {
					dev := d.(*server.Device)
					dev.GetNvLinkStateFunc = func(link int) (gonvml.EnableState, gonvml.Return) {
						if link >= 18 {
							return 0, gonvml.ERROR_INVALID_ARGUMENT
						}
						return gonvml.FEATURE_ENABLED, gonvml.SUCCESS
					}
					dev.GetNvLinkRemotePciInfoFunc = func(int) (gonvml.PciInfo, gonvml.Return) {
						return gonvml.PciInfo{}, gonvml.ERROR_NOT_SUPPORTED // switches have no bus id to give
					}
					dev.GetGpuFabricInfo_v4Func = func() (gonvml.GpuFabricInfo_v4, gonvml.Return) {
						info := gonvml.GpuFabricInfo_v4{
							ClusterUuid:   [16]uint8{0x5c, 0xd3, 0x0d, 0xc8, 0x12, 0x34, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67},
							NumCliques:    3,
							State:         gonvml.GPU_FABRIC_STATE_COMPLETED,
							HealthSummary: gonvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY,
						}
						info.Cliques[0] = gonvml.GpuFabricClique_v1{Type: gonvml.GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER, Id: 32766}
						info.Cliques[1] = gonvml.GpuFabricClique_v1{Type: gonvml.GPU_FABRIC_CLIQUE_TYPE_MULTICAST_POINTER, Id: 1}
						info.Cliques[2] = gonvml.GpuFabricClique_v1{Type: gonvml.GPU_FABRIC_CLIQUE_TYPE_UNICAST_LOGICAL_ENDPOINT, Id: 2}
						return info, gonvml.SUCCESS
					}
				}
				return s
			},
			want: func(*server.Server) Node {
				n := dgxA100Want()
				n.Driver, n.CUDA = "560.28.03", "12.6" // dgxb200's driver
				n.GPUs = n.GPUs[4:]                    // indices 3..0
				for i := range n.GPUs {
					g := &n.GPUs[i]
					g.Minor -= 4
					g.Name, g.Type, g.MemoryMiB = "NVIDIA B200 180GB HBM3e", "b200", 184320
					g.CPUAffinity, g.NUMANode = "0-63,128-191", 0
					if g.Index >= 2 {
						g.CPUAffinity, g.NUMANode = "64-127,192-255", 1
					}
					g.NVLinks = []Link{{Peer: -1, Count: 18}}
					g.Fabric = &Fabric{
						ClusterUUID: "5cd30dc8-1234-4567-89ab-cdef01234567",
						CliqueID:    32766,
						State:       FabricCompleted,
						Health:      "healthy",
					}
				}
				return n
			},
		},
		"older driver: v1 fabric info only, plain CPU affinity": {
			server: func() *server.Server {
				s := dgxb200.NewWithGPUs(gpus.Multiple(2, gpus.B200_SXM5_180GB)...)
				configure(s)
				s.LookupSymbolFunc = func(symbol string) error {
					switch symbol {
					case "nvmlDeviceGetGpuFabricInfo_v4", "nvmlDeviceGetCpuAffinityWithinScope":
						return errors.New("undefined symbol: " + symbol)
					}
					return nil
				}
				for _, d := range s.Devices {
					dev := d.(*server.Device)
					dev.GetGpuFabricInfo_v4Func = nil // calling it would panic
					dev.GetCpuAffinityWithinScopeFunc = nil
					dev.GetGpuFabricInfoFunc = func() (gonvml.GpuFabricInfo, gonvml.Return) {
						// A single-node NVSwitch system: zero cluster UUID.
						return gonvml.GpuFabricInfo{State: gonvml.GPU_FABRIC_STATE_IN_PROGRESS, CliqueId: 0}, gonvml.SUCCESS
					}
					dev.GetCpuAffinityFunc = func(n int) ([]uint, gonvml.Return) {
						return mask(n, 0, 3, 8, 8, 10, 11), gonvml.SUCCESS
					}
				}
				return s
			},
			want: func(*server.Server) Node {
				n := dgxA100Want()
				n.Driver, n.CUDA = "560.28.03", "12.6"
				n.GPUs = n.GPUs[6:] // indices 1, 0
				for i := range n.GPUs {
					g := &n.GPUs[i]
					g.Minor -= 6
					g.Name, g.Type, g.MemoryMiB = "NVIDIA B200 180GB HBM3e", "b200", 184320
					g.CPUAffinity = "0-3,8,10-11"
					g.NUMANode = g.Index // two GPUs over two NUMA nodes
					g.Fabric = &Fabric{State: FabricInProgress}
				}
				return n
			},
		},
		"ERROR_NOT_SUPPORTED leaves optional fields empty": {
			server: func() *server.Server {
				s := dgxa100.New()
				configure(s)
				s.SystemGetDriverVersionFunc = func() (string, gonvml.Return) { return "", gonvml.ERROR_NOT_SUPPORTED }
				s.SystemGetCudaDriverVersionFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
				for _, d := range s.Devices {
					dev := d.(*server.Device)
					dev.GetMinorNumberFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
					dev.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) { return gonvml.Memory{}, gonvml.ERROR_NOT_SUPPORTED }
					dev.GetMigModeFunc = func() (int, int, gonvml.Return) { return 0, 0, gonvml.ERROR_NOT_SUPPORTED }
					dev.GetNvLinkStateFunc = func(int) (gonvml.EnableState, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
					dev.GetNvLinkRemotePciInfoFunc = nil // never reached
					dev.GetCpuAffinityWithinScopeFunc = func(int, gonvml.AffinityScope) ([]uint, gonvml.Return) {
						return nil, gonvml.ERROR_NOT_SUPPORTED
					}
					dev.GetMemoryAffinityFunc = func(int, gonvml.AffinityScope) ([]uint, gonvml.Return) {
						return nil, gonvml.ERROR_NOT_SUPPORTED
					}
				}
				return s
			},
			want: func(*server.Server) Node {
				n := Node{Hostname: "dgx01", CollectedAt: collectedAt, Source: SourceNVML}
				for i := range 8 {
					n.GPUs = append(n.GPUs, GPU{
						Index: i, Minor: -1, NUMANode: -1,
						UUID:     fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i),
						Name:     "Mock NVIDIA A100-SXM4-40GB",
						Type:     "a100",
						PCIBusID: fmt.Sprintf("0000:%02x:00.0", dgxA100Buses[i]),
					})
				}
				return n
			},
		},
		"no GPUs": {
			server: func() *server.Server { return dgxa100.NewWithGPUs() },
			want: func(*server.Server) Node {
				return Node{Hostname: "dgx01", CollectedAt: collectedAt, Source: SourceNVML,
					Driver: "550.54.15", CUDA: "12.4", GPUs: []GPU{}}
			},
		},
		"Init fails": {
			server: func() *server.Server {
				s := dgxa100.New()
				s.InitFunc = func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }
				return s
			},
			wantErr: "initialise NVML",
			wantIs:  gonvml.ERROR_LIBRARY_NOT_FOUND,
		},
		"DeviceGetCount fails": {
			server: func() *server.Server {
				s := dgxa100.New()
				s.DeviceGetCountFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_UNKNOWN }
				return s
			},
			wantErr: "count GPUs",
			wantIs:  gonvml.ERROR_UNKNOWN,
		},
		"a GPU fell off the bus": {
			server: func() *server.Server {
				s := dgxa100.New()
				configure(s)
				s.Devices[3].(*server.Device).GetUUIDFunc = func() (string, gonvml.Return) {
					return "", gonvml.ERROR_GPU_IS_LOST
				}
				return s
			},
			wantErr: "get UUID of GPU 3",
			wantIs:  gonvml.ERROR_GPU_IS_LOST,
		},
		"GetPciInfo of the bare mock has no bus id": {
			server:  func() *server.Server { return dgxa100.New() },
			wantErr: "GPU 0",
		},
		"two GPUs report one UUID": {
			server: func() *server.Server {
				s := dgxa100.New()
				configure(s)
				s.Devices[5].(*server.Device).UUID = s.Devices[2].(*server.Device).UUID
				return s
			},
			wantErr: "gpus[5].uuid (GPU index 2): GPU-00000000-0000-0000-0000-000000000002 is also the UUID of gpus[2] (GPU index 5)",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := tt.server()
			got, err := Collect(t.Context(), s, "dgx01", collectedAt)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Collect() error = %v, want one containing %q", err, tt.wantErr)
				}
				if tt.wantIs != gonvml.SUCCESS && !errors.Is(err, tt.wantIs) {
					t.Errorf("Collect() error = %v, want errors.Is %v", err, tt.wantIs)
				}
			} else if err != nil {
				t.Fatalf("Collect() error = %v", err)
			} else if diff := cmp.Diff(tt.want(s), got); diff != "" {
				t.Errorf("Collect() mismatch (-want +got):\n%s", diff)
			}
			wantShutdown := 1
			if tt.wantIs == gonvml.ERROR_LIBRARY_NOT_FOUND {
				wantShutdown = 0 // nothing to shut down after a failed Init
			}
			if init, shut := len(s.InitCalls()), len(s.ShutdownCalls()); init != 1 || shut != wantShutdown {
				t.Errorf("Init called %d times, Shutdown %d; want 1 and %d", init, shut, wantShutdown)
			}
		})
	}
}

// TestCollectDGXA100 restates the headline facts of the DGX A100 case by
// hand: what a reviewer checks without reading the table above.
func TestCollectDGXA100(t *testing.T) {
	s := dgxa100.New()
	configure(s)
	n, err := Collect(t.Context(), s, "dgx01", collectedAt)
	if err != nil {
		t.Fatal(err)
	}
	if len(n.GPUs) != 8 {
		t.Fatalf("got %d GPUs, want 8", len(n.GPUs))
	}
	for i, g := range n.GPUs {
		dev := s.Devices[g.Index].(*server.Device)
		if g.Minor != i || g.Index != 7-i {
			t.Errorf("gpus[%d]: minor %d index %d, want minor %d index %d (sorted by minor)", i, g.Minor, g.Index, i, 7-i)
		}
		if g.UUID != dev.UUID || g.Type != "a100" {
			t.Errorf("gpus[%d]: UUID %q type %q, want %q and a100", i, g.UUID, g.Type, dev.UUID)
		}
		if len(g.NVLinks) != 1 || g.NVLinks[0] != (Link{Peer: -1, Count: 12}) {
			t.Errorf("gpus[%d]: NVLinks %v, want 12 links to NVSwitches", i, g.NVLinks)
		}
	}
	if err := Write(&strings.Builder{}, n); err != nil {
		t.Errorf("Write(Collect()) = %v", err)
	}
}

func TestCollectCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s := dgxa100.New()
	configure(s)
	if _, err := Collect(ctx, s, "dgx01", collectedAt); !errors.Is(err, context.Canceled) {
		t.Fatalf("Collect(cancelled) error = %v, want context.Canceled", err)
	}
	if len(s.ShutdownCalls()) != 1 {
		t.Errorf("Shutdown called %d times, want once", len(s.ShutdownCalls()))
	}
}

// mask sets the inclusive ranges lo0, hi0, lo1, hi1, ... in a bitmask sized
// for n bits, as NVML fills one.
func mask(n int, bounds ...int) []uint {
	words := make([]uint, (n+bits.UintSize-1)/bits.UintSize)
	for k := 0; k+1 < len(bounds); k += 2 {
		for b := bounds[k]; b <= bounds[k+1]; b++ {
			words[b/bits.UintSize] |= 1 << uint(b%bits.UintSize)
		}
	}
	return words
}

func cChars(s string) [32]int8 {
	var b [32]int8
	for i := range min(len(s), len(b)-1) {
		b[i] = int8(s[i])
	}
	return b
}

func TestCollectNeedsHostname(t *testing.T) {
	s := dgxa100.New()
	configure(s)
	if _, err := Collect(t.Context(), s, " ", collectedAt); err == nil || !strings.Contains(err.Error(), "empty hostname") {
		t.Fatalf("Collect(hostname \" \") error = %v, want one about the empty hostname", err)
	}
	if len(s.InitCalls()) != 0 {
		t.Errorf("Collect initialised NVML before checking its arguments")
	}
}
