package source

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"
)

// eventServer is a DGX A100 mock whose GPUs deliver the NVML events put in
// its queue; GPU 7 supports no event type (it is polled only). Row remap
// state is what remap holds for each GPU.
type eventServer struct {
	*server.Server
	mu         sync.Mutex
	queue      []gonvml.EventData
	registered map[int]uint64 // GPU -> event types registered
	freed      bool
	remap      map[int][2]bool // GPU -> pending, failed
}

func newEventServer(t *testing.T) *eventServer {
	t.Helper()
	s := &eventServer{Server: dgxa100.New(), registered: map[int]uint64{}, remap: map[int][2]bool{}}
	configure(s.Server)
	set := &mock.EventSet{
		WaitFunc: func(uint32) (gonvml.EventData, gonvml.Return) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.queue) == 0 {
				return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
			}
			e := s.queue[0]
			s.queue = s.queue[1:]
			return e, gonvml.SUCCESS
		},
		FreeFunc: func() gonvml.Return { s.mu.Lock(); s.freed = true; s.mu.Unlock(); return gonvml.SUCCESS },
	}
	s.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) { return set, gonvml.SUCCESS }
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) {
			if i == 7 {
				return 0, gonvml.ERROR_NOT_SUPPORTED
			}
			return gonvml.EventTypeAll, gonvml.SUCCESS
		}
		dev.RegisterEventsFunc = func(types uint64, _ gonvml.EventSet) gonvml.Return {
			s.mu.Lock()
			s.registered[i] = types
			s.mu.Unlock()
			return gonvml.SUCCESS
		}
		dev.GetRetiredPagesPendingStatusFunc = func() (gonvml.EnableState, gonvml.Return) {
			return 0, gonvml.ERROR_NOT_SUPPORTED // an A100 remaps rows instead
		}
		dev.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) {
			s.mu.Lock()
			defer s.mu.Unlock()
			r := s.remap[i]
			return 0, 0, r[0], r[1], gonvml.SUCCESS
		}
	}
	return s
}

func (s *eventServer) deliver(gpu int, eventType, data uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, gonvml.EventData{Device: s.Devices[gpu], EventType: eventType, EventData: data})
}

func uuidOf(gpu int) string {
	return "GPU-00000000-0000-0000-0000-" + strings.Repeat("0", 11) + string(rune('0'+gpu))
}

func TestNVMLFaults(t *testing.T) {
	s := newEventServer(t)
	n, err := NewNVML(s)
	if err != nil {
		t.Fatal(err)
	}
	faults, err := n.Faults(t.Context(), t0)
	if err != nil || len(faults) != 0 {
		t.Fatalf("first call: %v, %v; want no faults", faults, err)
	}
	for i := range 7 {
		if s.registered[i] != faultEvents {
			t.Errorf("GPU %d registered for %#x, want %#x", i, s.registered[i], uint64(faultEvents))
		}
	}
	if _, ok := s.registered[7]; ok {
		t.Error("GPU 7 supports no events but was registered")
	}

	s.deliver(3, gonvml.EventTypeXidCriticalError, 79)
	s.deliver(1, gonvml.EventTypeDoubleBitEccError, 0)
	s.deliver(2, gonvml.EventTypePState, 0) // no fault
	s.deliver(5, gonvml.EventTypeDramRetirementFailure, 0)
	s.mu.Lock()
	s.remap[7] = [2]bool{true, false} // polled: pending remap
	s.mu.Unlock()
	at := t0.Add(step)
	faults, err = n.Faults(t.Context(), at)
	if err != nil {
		t.Fatal(err)
	}
	want := []Fault{
		{At: at, GPU: 7, UUID: uuidOf(7), Kind: FaultRetiredPages},
		{At: at, GPU: 3, UUID: uuidOf(3), Kind: FaultXid, Code: 79},
		{At: at, GPU: 1, UUID: uuidOf(1), Kind: FaultECC},
		{At: at, GPU: 5, UUID: uuidOf(5), Kind: FaultRowRemap},
	}
	if diff := cmp.Diff(want, faults); diff != "" {
		t.Errorf("faults (-want +got):\n%s", diff)
	}
	// A standing remap is reported once; its failure is new.
	s.mu.Lock()
	s.remap[7] = [2]bool{true, true}
	s.mu.Unlock()
	faults, err = n.Faults(t.Context(), at.Add(step))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Fault{{At: at.Add(step), GPU: 7, UUID: uuidOf(7), Kind: FaultRowRemap}}, faults); diff != "" {
		t.Errorf("third call (-want +got):\n%s", diff)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if !s.freed {
		t.Error("Close left the event set")
	}
	if _, err := n.Faults(t.Context(), at); err == nil {
		t.Error("Faults after Close worked")
	}
}

// A failing registration is reported, and the GPU is still polled.
func TestNVMLFaultsRegisterFails(t *testing.T) {
	s := newEventServer(t)
	s.Devices[2].(*server.Device).RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return { return gonvml.ERROR_NO_PERMISSION }
	s.remap[2] = [2]bool{false, true}
	n, err := NewNVML(s)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	faults, err := n.Faults(t.Context(), t0)
	if err == nil || !strings.Contains(err.Error(), "GPU 2") || !strings.Contains(err.Error(), "register") {
		t.Errorf("err = %v, want GPU 2's registration failure", err)
	}
	if len(faults) != 1 || faults[0].Kind != FaultRowRemap || faults[0].GPU != 2 {
		t.Errorf("faults = %v, want GPU 2's row remap failure", faults)
	}
}

func TestFaultFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faults.csv")
	ff := &FaultFile{Path: path}
	if got, err := ff.Faults(t.Context(), t0); err != nil || got != nil {
		t.Fatalf("no file yet: %v, %v", got, err)
	}
	appendTo := func(text string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
	}
	appendTo("# injected\n3,xid,79\n\n 0 , ecc_uncorrectable \n9,xid\n1,row_remap_failure,4\n2,retired_pages_pending\n4,xi")
	got, err := ff.Faults(t.Context(), t0)
	want := []Fault{{At: t0, GPU: 3, Kind: FaultXid, Code: 79}, {At: t0, GPU: 0, Kind: FaultECC}, {At: t0, GPU: 2, Kind: FaultRetiredPages}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("faults (-want +got):\n%s", diff)
	}
	for _, w := range []string{path + ":5: xid needs its code", path + ":6: row_remap_failure takes no code"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("err = %v, want %q", err, w)
		}
	}
	// The unended line is read once it ends; nothing is read twice.
	appendTo("d,48\n")
	got, err = ff.Faults(t.Context(), t0.Add(step))
	if err != nil || len(got) != 1 || got[0] != (Fault{At: t0.Add(step), GPU: 4, Kind: FaultXid, Code: 48}) {
		t.Errorf("the line ended (4,xi + d,48): %v, %v", got, err)
	}
	appendTo("5,xid,48\n")
	got, err = ff.Faults(t.Context(), t0.Add(2*step))
	if err != nil || len(got) != 1 || got[0] != (Fault{At: t0.Add(2 * step), GPU: 5, Kind: FaultXid, Code: 48}) {
		t.Errorf("after one more line: %v, %v", got, err)
	}
	// Truncated: read from the start again.
	if err := os.WriteFile(path, []byte("6,xid,94\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = ff.Faults(t.Context(), t0.Add(3*step))
	if err != nil || len(got) != 1 || got[0].GPU != 6 || got[0].Code != 94 {
		t.Errorf("after truncation: %v, %v", got, err)
	}
}

func FuzzParseFaultLine(f *testing.F) {
	for _, s := range []string{"3,xid,79", "0,ecc_uncorrectable", "# c", "", "1,xid,0", "1024,xid,1", "1,row_remap_failure,2", "a,b,c,d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fault, ok, err := ParseFaultLine(line)
		if err != nil || !ok {
			return
		}
		if !fault.Kind.Known() || fault.GPU < 0 || fault.GPU > maxGPUIndex || fault.Code < 0 || fault.Code > MaxFaultCode ||
			(fault.Kind == FaultXid) != (fault.Code != 0) {
			t.Fatalf("%q read as %+v", line, fault)
		}
	})
}
