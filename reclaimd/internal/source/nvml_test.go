package source

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// step is the time between the two samples each case takes.
const step = 10 * time.Second

// The go-nvml servers answer Init, counts, handles, UUID (random), name,
// memory (none used) and MIG mode; utilisation, processes, PCIe, field
// values and GPM are left unset (a call panics). configure fills them in
// as a busy-and-idle DGX answers: even GPUs run a job (util 90+i, memory
// activity 40, 30000 MiB used, one process 1000+i), odd GPUs are idle and
// empty. PCIe moves 1000(i+1) KiB/s in and 500(i+1) out; the NVLink
// counters grow by 10240(i+1) KiB in and 5120(i+1) out per call, so that
// 10 s apart they read 1024(i+1) and 512(i+1) KiB/s. No GPU supports GPM.
func configure(s *server.Server) {
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.UUID = fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i)
		busy := i%2 == 0
		if busy {
			dev.MemoryInfo.Used = 30000 << 20
		}
		dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			if busy {
				return gonvml.Utilization{Gpu: uint32(90 + i), Memory: 40}, gonvml.SUCCESS
			}
			return gonvml.Utilization{}, gonvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
			if busy {
				return []gonvml.ProcessInfo{{Pid: uint32(1000 + i), UsedGpuMemory: 30000 << 20}}, gonvml.SUCCESS
			}
			return nil, gonvml.SUCCESS
		}
		dev.GetPcieThroughputFunc = func(c gonvml.PcieUtilCounter) (uint32, gonvml.Return) {
			if c == gonvml.PCIE_UTIL_RX_BYTES {
				return uint32(1000 * (i + 1)), gonvml.SUCCESS
			}
			return uint32(500 * (i + 1)), gonvml.SUCCESS
		}
		var rx, tx uint64 = 1 << 40, 1 << 40
		dev.GetFieldValuesFunc = func(values []gonvml.FieldValue) gonvml.Return {
			rx += uint64(10240 * (i + 1))
			tx += uint64(5120 * (i + 1))
			for k := range values {
				v := &values[k]
				if v.ScopeId != allLinks {
					v.NvmlReturn = uint32(gonvml.ERROR_INVALID_ARGUMENT)
					continue
				}
				v.ValueType = uint32(gonvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				switch v.FieldId {
				case gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
					binary.NativeEndian.PutUint64(v.Value[:], rx)
				case gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
					binary.NativeEndian.PutUint64(v.Value[:], tx)
				default:
					v.NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
				}
			}
			return gonvml.SUCCESS
		}
		dev.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
			return gonvml.GpmSupport{}, gonvml.SUCCESS
		}
	}
}

// want is what Sample should make of a configured server: the first sample
// (k 0) has no NVLink rates, the second has.
func want(s *server.Server, k int) []Sample {
	var out []Sample
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		g := Sample{
			GPU: i, UUID: dev.UUID, Model: dev.Config.Name, At: t0.Add(time.Duration(k) * step),
			UtilPercent: ptr(0), MemActivityPercent: ptr(0),
			MemTotalMiB: float64(dev.Config.MemoryMB),
			PCIeRxKBs:   ptr(float64(1000 * (i + 1))), PCIeTxKBs: ptr(float64(500 * (i + 1))),
			PIDs: []int{},
		}
		if i%2 == 0 {
			g.UtilPercent, g.MemActivityPercent = ptr(float64(90+i)), ptr(40)
			g.MemUsedMiB = 30000
			g.PIDs = []int{1000 + i}
		}
		if k > 0 {
			g.NVLinkRxKBs, g.NVLinkTxKBs = ptr(float64(1024*(i+1))), ptr(float64(512*(i+1)))
		}
		out = append(out, g)
	}
	return out
}

// migDevice is a MIG device as NVML describes one.
func migDevice(uuid string, gi, ci int, usedMiB uint64, pids ...uint32) *mock.Device {
	return &mock.Device{
		GetUUIDFunc:              func() (string, gonvml.Return) { return uuid, gonvml.SUCCESS },
		GetGpuInstanceIdFunc:     func() (int, gonvml.Return) { return gi, gonvml.SUCCESS },
		GetComputeInstanceIdFunc: func() (int, gonvml.Return) { return ci, gonvml.SUCCESS },
		GetMemoryInfoFunc: func() (gonvml.Memory, gonvml.Return) {
			return gonvml.Memory{Total: 9856 << 20, Used: usedMiB << 20}, gonvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]gonvml.ProcessInfo, gonvml.Return) {
			var out []gonvml.ProcessInfo
			for _, p := range pids {
				out = append(out, gonvml.ProcessInfo{Pid: p, GpuInstanceId: uint32(gi), ComputeInstanceId: uint32(ci)})
			}
			return out, gonvml.SUCCESS
		},
	}
}

// withMIG puts GPU 3 of s into MIG mode with two 1g.10gb-sized MIG devices
// in slots 0 and 2: one running pids 7001 and 7002, one empty.
func withMIG(s *server.Server) {
	dev := s.Devices[3].(*server.Device)
	dev.MigMode = gonvml.DEVICE_MIG_ENABLE
	dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED // as on a MIG parent
	}
	dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return nil, gonvml.ERROR_NO_PERMISSION // as for non-root on a MIG parent
	}
	dev.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 7, gonvml.SUCCESS }
	dev.GetMigDeviceHandleByIndexFunc = func(k int) (gonvml.Device, gonvml.Return) {
		switch k {
		case 0:
			return migDevice("MIG-aaaaaaaa-0000-0000-0000-000000000001", 1, 0, 5000, 7002, 7001), gonvml.SUCCESS
		case 2:
			return migDevice("MIG-aaaaaaaa-0000-0000-0000-000000000002", 2, 0, 0), gonvml.SUCCESS
		}
		return nil, gonvml.ERROR_NOT_FOUND
	}
}

func TestNVMLSample(t *testing.T) {
	tests := map[string]struct {
		server  func() *server.Server
		want    func(s *server.Server, k int) []Sample // for the k-th of two samples
		wantErr string                                 // substring of the second sample's error
		wantIs  gonvml.Return
	}{
		"DGX A100: busy and idle GPUs, NVLink rates from the second sample on": {
			server: func() *server.Server { s := dgxa100.New(); configure(s); return s },
			want:   want,
		},
		"ERROR_NOT_SUPPORTED leaves optional fields nil": {
			server: func() *server.Server {
				s := dgxa100.New()
				configure(s)
				for _, d := range s.Devices {
					dev := d.(*server.Device)
					dev.GetMigModeFunc = func() (int, int, gonvml.Return) { return 0, 0, gonvml.ERROR_NOT_SUPPORTED }
					dev.GetPcieThroughputFunc = func(gonvml.PcieUtilCounter) (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
					dev.GetFieldValuesFunc = func([]gonvml.FieldValue) gonvml.Return { return gonvml.ERROR_NOT_SUPPORTED }
					dev.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
						return gonvml.GpmSupport{}, gonvml.ERROR_NOT_SUPPORTED
					}
				}
				return s
			},
			want: func(s *server.Server, k int) []Sample {
				out := want(s, k)
				for i := range out {
					out[i].PCIeRxKBs, out[i].PCIeTxKBs, out[i].NVLinkRxKBs, out[i].NVLinkTxKBs = nil, nil, nil, nil
				}
				return out
			},
		},
		"NVLink fields unsupported one by one, as on a GPU without NVLink": {
			server: func() *server.Server {
				s := dgxa100.NewWithGPUs(dgxa100.New().Devices[0].(*server.Device).Config)
				configure(s)
				s.Devices[0].(*server.Device).GetFieldValuesFunc = func(values []gonvml.FieldValue) gonvml.Return {
					for k := range values {
						values[k].NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
					}
					return gonvml.SUCCESS
				}
				return s
			},
			want: func(s *server.Server, k int) []Sample {
				out := want(s, k)
				out[0].NVLinkRxKBs, out[0].NVLinkTxKBs = nil, nil
				return out
			},
		},
		"an NVLink counter that goes backwards gives no rate": {
			server: func() *server.Server {
				s := dgxa100.NewWithGPUs(dgxa100.New().Devices[0].(*server.Device).Config)
				configure(s)
				dev := s.Devices[0].(*server.Device)
				grow := dev.GetFieldValuesFunc
				calls := 0
				dev.GetFieldValuesFunc = func(values []gonvml.FieldValue) gonvml.Return {
					ret := grow(values)
					if calls++; calls == 2 { // the driver was reloaded
						binary.NativeEndian.PutUint64(values[0].Value[:], 5)
					}
					return ret
				}
				return s
			},
			want: func(s *server.Server, k int) []Sample {
				out := want(s, k)
				out[0].NVLinkRxKBs, out[0].NVLinkTxKBs = nil, nil
				return out
			},
		},
		"processes listed twice and out of order": {
			server: func() *server.Server {
				s := dgxa100.NewWithGPUs(dgxa100.New().Devices[0].(*server.Device).Config)
				configure(s)
				s.Devices[0].(*server.Device).GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
					return []gonvml.ProcessInfo{{Pid: 30}, {Pid: 10}, {Pid: 30}, {Pid: 20}}, gonvml.SUCCESS
				}
				return s
			},
			want: func(s *server.Server, k int) []Sample {
				out := want(s, k)
				out[0].PIDs = []int{10, 20, 30}
				return out
			},
		},
		"MIG on GPU 3: no utilisation, processes from the MIG devices": {
			server: func() *server.Server { s := dgxa100.New(); configure(s); withMIG(s); return s },
			want: func(s *server.Server, k int) []Sample {
				out := want(s, k)
				g := &out[3]
				g.MIG = true
				g.UtilPercent, g.MemActivityPercent = nil, nil
				g.PIDs = []int{7001, 7002}
				g.MIGInstances = []MIGInstance{
					{GPUInstance: 1, UUID: "MIG-aaaaaaaa-0000-0000-0000-000000000001", MemUsedMiB: 5000, MemTotalMiB: 9856, PIDs: []int{7001, 7002}},
					{GPUInstance: 2, UUID: "MIG-aaaaaaaa-0000-0000-0000-000000000002", MemTotalMiB: 9856, PIDs: []int{}},
				}
				return out
			},
		},
		"DeviceGetCount fails": {
			server: func() *server.Server {
				s := dgxa100.New()
				configure(s)
				s.DeviceGetCountFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_UNKNOWN }
				return s
			},
			wantErr: "count GPUs with NVML",
			wantIs:  gonvml.ERROR_UNKNOWN,
		},
		"a GPU fell off the bus": {
			server: func() *server.Server {
				s := dgxa100.New()
				configure(s)
				s.Devices[2].(*server.Device).GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
					return gonvml.Utilization{}, gonvml.ERROR_GPU_IS_LOST
				}
				return s
			},
			wantErr: "get utilisation of GPU 2 (GPU-00000000-0000-0000-0000-000000000002)",
			wantIs:  gonvml.ERROR_GPU_IS_LOST,
		},
		"processes cannot be listed": {
			server: func() *server.Server {
				s := dgxa100.New()
				configure(s)
				s.Devices[5].(*server.Device).GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
					return nil, gonvml.ERROR_NO_PERMISSION
				}
				return s
			},
			wantErr: "get compute processes of GPU 5",
			wantIs:  gonvml.ERROR_NO_PERMISSION,
		},
		"memory information fails": {
			server: func() *server.Server {
				s := dgxa100.New()
				configure(s)
				s.Devices[0].(*server.Device).GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
					return gonvml.Memory{}, gonvml.ERROR_UNKNOWN
				}
				return s
			},
			wantErr: "get memory information of GPU 0",
			wantIs:  gonvml.ERROR_UNKNOWN,
		},
		"a MIG device cannot be reached": {
			server: func() *server.Server {
				s := dgxa100.New()
				configure(s)
				withMIG(s)
				s.Devices[3].(*server.Device).GetMigDeviceHandleByIndexFunc = func(int) (gonvml.Device, gonvml.Return) {
					return nil, gonvml.ERROR_GPU_IS_LOST
				}
				return s
			},
			wantErr: "GPU 3 (GPU-00000000-0000-0000-0000-000000000003): get handle of MIG device 0",
			wantIs:  gonvml.ERROR_GPU_IS_LOST,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := tt.server()
			src, err := NewNVML(s)
			if err != nil {
				t.Fatalf("NewNVML() error = %v", err)
			}
			for k := range 2 {
				got, err := src.Sample(t.Context(), t0.Add(time.Duration(k)*step))
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("Sample() error = %v, want one containing %q", err, tt.wantErr)
					}
					if !errors.Is(err, tt.wantIs) {
						t.Errorf("Sample() error = %v, want errors.Is %v", err, tt.wantIs)
					}
					break
				}
				if err != nil {
					t.Fatalf("Sample() #%d error = %v", k, err)
				}
				if diff := cmp.Diff(tt.want(s, k), got); diff != "" {
					t.Errorf("Sample() #%d mismatch (-want +got):\n%s", k, diff)
				}
			}
			if err := src.Close(); err != nil {
				t.Errorf("Close() = %v", err)
			}
			if init, shut := len(s.InitCalls()), len(s.ShutdownCalls()); init != 1 || shut != 1 {
				t.Errorf("Init called %d times, Shutdown %d; want once each", init, shut)
			}
		})
	}
}

// gpmServer is a DGX H100 whose GPUs support GPM: GPU i reports 60+i% of
// SMs busy between any two GPM samples.
func gpmServer(t *testing.T) (*server.Server, map[*mock.GpmSample]bool) {
	s := dgxh100.New()
	configure(s)
	live := map[*mock.GpmSample]bool{} // allocated and not freed
	index := map[gonvml.Device]int{}
	taken := map[*mock.GpmSample]gonvml.Device{}
	for i, d := range s.Devices {
		index[d] = i
		d.(*server.Device).GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
			return gonvml.GpmSupport{Version: gonvml.GPM_SUPPORT_VERSION, IsSupportedDevice: 1}, gonvml.SUCCESS
		}
	}
	s.GpmSampleAllocFunc = func() (gonvml.GpmSample, gonvml.Return) {
		g := &mock.GpmSample{}
		live[g] = true
		return g, gonvml.SUCCESS
	}
	s.GpmSampleFreeFunc = func(g gonvml.GpmSample) gonvml.Return {
		delete(live, g.(*mock.GpmSample))
		return gonvml.SUCCESS
	}
	s.GpmSampleGetFunc = func(dev gonvml.Device, g gonvml.GpmSample) gonvml.Return {
		taken[g.(*mock.GpmSample)] = dev
		return gonvml.SUCCESS
	}
	s.GpmMetricsGetFunc = func(m *gonvml.GpmMetricsGetType) gonvml.Return {
		s1, s2 := m.Sample1.(*mock.GpmSample), m.Sample2.(*mock.GpmSample)
		if s1 == s2 || taken[s1] == nil || taken[s1] != taken[s2] {
			t.Errorf("GpmMetricsGet with samples %p and %p: want two samples of one GPU", s1, s2)
		}
		if m.NumMetrics != 1 || m.Metrics[0].MetricId != uint32(gonvml.GPM_METRIC_SM_UTIL) {
			t.Errorf("GpmMetricsGet asked for %d metrics, the first %d; want GPM_METRIC_SM_UTIL alone", m.NumMetrics, m.Metrics[0].MetricId)
		}
		m.Metrics[0].Value = 60 + float64(index[taken[s2]])
		return gonvml.SUCCESS
	}
	return s, live
}

func TestNVMLSMActive(t *testing.T) {
	s, live := gpmServer(t)
	src, err := NewNVML(s)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		got, err := src.Sample(t.Context(), t0.Add(time.Duration(k)*step))
		if err != nil {
			t.Fatalf("Sample() #%d error = %v", k, err)
		}
		for i, g := range got {
			var want *float64
			if k > 0 {
				want = ptr(60 + float64(i))
			}
			if diff := cmp.Diff(want, g.SMActivePercent); diff != "" {
				t.Errorf("sample %d, GPU %d: SM active (-want +got):\n%s", k, i, diff)
			}
		}
	}
	if got, want := len(live), 2*len(s.Devices); got != want {
		t.Errorf("%d GPM samples allocated, want %d (two per GPU, reused)", got, want)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if len(live) != 0 {
		t.Errorf("Close left %d GPM samples unfreed", len(live))
	}
	if _, err := src.Sample(t.Context(), t0); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Sample() after Close error = %v, want one saying the source is closed", err)
	}
	if err := src.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
}

// A driver older than GPM lacks its symbols: go-nvml would crash calling
// them, so the source must not, and SM activity stays unknown.
func TestNVMLWithoutGPMSymbols(t *testing.T) {
	s, _ := gpmServer(t)
	s.LookupSymbolFunc = func(symbol string) error {
		if strings.HasPrefix(symbol, "nvmlGpm") {
			return errors.New("undefined symbol: " + symbol)
		}
		return nil
	}
	for _, d := range s.Devices {
		d.(*server.Device).GpmQueryDeviceSupportFunc = nil // calling it panics
	}
	s.GpmSampleAllocFunc = nil
	src, err := NewNVML(s)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for k := range 2 {
		got, err := src.Sample(t.Context(), t0.Add(time.Duration(k)*step))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range got {
			if g.SMActivePercent != nil {
				t.Errorf("GPU %d: SM active %v, want nil without GPM", g.GPU, *g.SMActivePercent)
			}
		}
	}
}

func TestNewNVMLInitFails(t *testing.T) {
	s := dgxa100.New()
	s.InitFunc = func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }
	_, err := NewNVML(s)
	if !errors.Is(err, gonvml.ERROR_LIBRARY_NOT_FOUND) || !strings.Contains(err.Error(), "is the NVIDIA driver installed") {
		t.Fatalf("NewNVML() error = %v, want ERROR_LIBRARY_NOT_FOUND with a hint", err)
	}
}

func TestNVMLSampleCancelled(t *testing.T) {
	s := dgxa100.New()
	configure(s)
	src, err := NewNVML(s)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := src.Sample(ctx, t0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sample(cancelled) error = %v, want context.Canceled", err)
	}
}

// Sample hands out copies: changing one must not reach the next.
func TestSampleClone(t *testing.T) {
	s := Sample{
		UtilPercent: ptr(1), MemActivityPercent: ptr(2), SMActivePercent: ptr(3),
		PCIeRxKBs: ptr(4), PCIeTxKBs: ptr(5), NVLinkRxKBs: ptr(6), NVLinkTxKBs: ptr(7),
		PIDs: []int{1}, JobIDs: []int64{2},
		MIGInstances: []MIGInstance{{PIDs: []int{3}, JobIDs: []int64{4}}},
	}
	c := s.Clone()
	if diff := cmp.Diff(s, c); diff != "" {
		t.Fatalf("Clone() differs (-orig +clone):\n%s", diff)
	}
	*c.UtilPercent, *c.MemActivityPercent, *c.SMActivePercent = 0, 0, 0
	*c.PCIeRxKBs, *c.PCIeTxKBs, *c.NVLinkRxKBs, *c.NVLinkTxKBs = 0, 0, 0, 0
	c.PIDs[0], c.JobIDs[0], c.MIGInstances[0].PIDs[0], c.MIGInstances[0].JobIDs[0] = 0, 0, 0, 0
	if *s.UtilPercent != 1 || *s.MemActivityPercent != 2 || *s.SMActivePercent != 3 || *s.PCIeRxKBs != 4 ||
		*s.PCIeTxKBs != 5 || *s.NVLinkRxKBs != 6 || *s.NVLinkTxKBs != 7 || s.PIDs[0] != 1 || s.JobIDs[0] != 2 ||
		s.MIGInstances[0].PIDs[0] != 3 || s.MIGInstances[0].JobIDs[0] != 4 {
		t.Errorf("changing the clone changed the original: %+v", s)
	}
}

// TestNVMLMIGActivity: a DGX H100 (go-nvml's mock) whose GPU 3 is in MIG
// mode with two 1g GPU instances made through the mock's own MIG calls.
// Neither the parent nor a MIG device answers GetUtilizationRates; each
// MIG device's activity comes from GPM on its GPU instance: nil on the
// first sample, then its own graphics and DRAM use, per instance. Its GPM
// samples are two per instance, freed on Close. Without the MIG GPM
// symbol (an older driver) the instances have no activity: stale.
func TestNVMLMIGActivity(t *testing.T) {
	for _, withSymbol := range []bool{true, false} {
		t.Run(fmt.Sprintf("nvmlGpmMigSampleGet=%v", withSymbol), func(t *testing.T) {
			s, live := gpmServer(t)
			dev := s.Devices[3].(*server.Device)
			if ret, _ := dev.SetMigMode(gonvml.DEVICE_MIG_ENABLE); ret != gonvml.SUCCESS {
				t.Fatalf("SetMigMode: %v", ret)
			}
			info, ret := dev.GetGpuInstanceProfileInfo(gonvml.GPU_INSTANCE_PROFILE_1_SLICE)
			if ret != gonvml.SUCCESS {
				t.Fatalf("GetGpuInstanceProfileInfo: %v", ret)
			}
			var ids []int
			for range 2 {
				gi, ret := dev.CreateGpuInstance(&info)
				if ret != gonvml.SUCCESS {
					t.Fatalf("CreateGpuInstance: %v", ret)
				}
				gii, ret := gi.GetInfo()
				if ret != gonvml.SUCCESS {
					t.Fatalf("GpuInstance.GetInfo: %v", ret)
				}
				ids = append(ids, int(gii.Id))
			}
			dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
				return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED // as on a MIG parent
			}
			dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
				return nil, gonvml.ERROR_NO_PERMISSION
			}
			dev.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 7, gonvml.SUCCESS }
			migs := []*mock.Device{
				migDevice("MIG-bbbbbbbb-0000-0000-0000-000000000001", ids[0], 0, 9000, 8101),
				migDevice("MIG-bbbbbbbb-0000-0000-0000-000000000002", ids[1], 0, 0),
			}
			for _, m := range migs {
				m.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
					return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED // as on a MIG device
				}
			}
			dev.GetMigDeviceHandleByIndexFunc = func(k int) (gonvml.Device, gonvml.Return) {
				if k < len(migs) {
					return migs[k], gonvml.SUCCESS
				}
				return nil, gonvml.ERROR_NOT_FOUND
			}
			// GPU instance i's graphics engines are busy 70/(i+1) % of the
			// time, its DRAM 30/(i+1) %.
			migTaken := map[*mock.GpmSample]int{}
			s.GpmMigSampleGetFunc = func(d gonvml.Device, gi int, g gonvml.GpmSample) gonvml.Return {
				if d != gonvml.Device(dev) {
					t.Errorf("GpmMigSampleGet on %v, want the MIG devices' parent", d)
				}
				migTaken[g.(*mock.GpmSample)] = gi
				return gonvml.SUCCESS
			}
			smUtil := s.GpmMetricsGetFunc
			s.GpmMetricsGetFunc = func(m *gonvml.GpmMetricsGetType) gonvml.Return {
				if m.NumMetrics == 1 {
					return smUtil(m)
				}
				s1, s2 := m.Sample1.(*mock.GpmSample), m.Sample2.(*mock.GpmSample)
				gi, ok := migTaken[s2]
				if !ok || migTaken[s1] != gi || s1 == s2 {
					t.Errorf("GpmMetricsGet with samples %p and %p: want two samples of one GPU instance", s1, s2)
				}
				if m.NumMetrics != 2 || m.Metrics[0].MetricId != uint32(gonvml.GPM_METRIC_GRAPHICS_UTIL) ||
					m.Metrics[1].MetricId != uint32(gonvml.GPM_METRIC_DRAM_BW_UTIL) {
					t.Errorf("GpmMetricsGet for a MIG device asked for %d metrics %v, want GRAPHICS_UTIL and DRAM_BW_UTIL", m.NumMetrics, m.Metrics[:2])
				}
				div := float64(slices.Index(ids, gi) + 1)
				m.Metrics[0].Value, m.Metrics[1].Value = 70/div, 30/div
				return gonvml.SUCCESS
			}
			if !withSymbol {
				s.LookupSymbolFunc = func(symbol string) error {
					if symbol == "nvmlGpmMigSampleGet" {
						return errors.New("undefined symbol: " + symbol)
					}
					return nil
				}
				s.GpmMigSampleGetFunc = nil // calling it panics
			}
			src, err := NewNVML(s)
			if err != nil {
				t.Fatal(err)
			}
			for k := range 3 {
				got, err := src.Sample(t.Context(), t0.Add(time.Duration(k)*step))
				if err != nil {
					t.Fatalf("Sample() #%d: %v", k, err)
				}
				g := got[3]
				if !g.MIG || g.UtilPercent != nil || len(g.MIGInstances) != 2 {
					t.Fatalf("GPU 3: MIG %v, util %v, %d MIG devices; want MIG, no whole-GPU util, 2 devices", g.MIG, g.UtilPercent, len(g.MIGInstances))
				}
				for i, m := range g.MIGInstances {
					var wantUtil, wantMem *float64
					if k > 0 && withSymbol {
						wantUtil, wantMem = ptr(70/float64(i+1)), ptr(30/float64(i+1))
					}
					if m.GPUInstance != ids[i] {
						t.Errorf("MIG device %d: GPU instance %d, want %d", i, m.GPUInstance, ids[i])
					}
					if diff := cmp.Diff([]*float64{wantUtil, wantMem}, []*float64{m.UtilPercent, m.MemActivityPercent}); diff != "" {
						t.Errorf("sample %d, MIG device %d (GPU instance %d): util, mem activity (-want +got):\n%s", k, i, m.GPUInstance, diff)
					}
				}
			}
			wantLive := 2 * len(s.Devices) // the whole GPUs' (GPU 3's too, from before MIG)
			if withSymbol {
				wantLive += 2 * len(migs)
			}
			if got := len(live); got > wantLive {
				t.Errorf("%d GPM samples allocated, want at most %d (two per GPU and MIG device, reused)", got, wantLive)
			}
			if err := src.Close(); err != nil {
				t.Fatal(err)
			}
			if len(live) != 0 {
				t.Errorf("Close left %d GPM samples unfreed", len(live))
			}
		})
	}
}
