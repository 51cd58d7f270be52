package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// faultEvents are the NVML events the agent reports as faults.
const faultEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError |
	nvml.EventTypeDramRetirementEvent | nvml.EventTypeDramRetirementFailure

// maxEventsPerCall bounds the events one Faults call reads, so that a
// GPU flooding events cannot hold the sampling loop.
const maxEventsPerCall = 1024

// faultWatch is NVML's event set and what Faults polls between calls.
type faultWatch struct {
	set nvml.EventSet // nil until registered
	// registered is, by UUID, the GPUs whose events the set receives.
	registered map[string]bool
	// pending is, by UUID, the memory faults that a poll found standing
	// (retired pages pending, row remap failed): each is reported when it
	// appears, not again while it stands.
	pending map[string]map[FaultKind]bool
	// devices are the GPUs registered, to name an event's GPU even when
	// NVML can no longer read it (Xid 79).
	devices []watched
}

type watched struct {
	dev   nvml.Device
	index int
	uuid  string
}

// free releases the event set.
func (w *faultWatch) free() {
	if w.set != nil {
		_ = w.set.Free() // nothing to do about a failure
	}
	*w = faultWatch{}
}

// Faults returns the fault events NVML delivered since the last call,
// stamped now (NVML's events carry no time: they are read every
// sampling round, so at most one interval late), and the memory faults
// that polls find newly standing. The first call creates the event set
// and registers every GPU for the events it supports of Xid critical
// errors, double-bit ECC errors and DRAM retirement events and failures;
// a GPU that supports none of them is polled only. An Xid that makes
// the GPU unreadable (79) still arrives here, though Sample fails.
func (n *NVML) Faults(ctx context.Context, now time.Time) ([]Fault, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("read GPU faults: the NVML source is closed")
	}
	if n.watch.registered == nil {
		n.watch.registered = map[string]bool{}
		n.watch.pending = map[string]map[FaultKind]bool{}
	}
	var errs []error
	var out []Fault
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("count GPUs with NVML: %w", ret)
	}
	for i := range count {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		dev, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			errs = append(errs, fmt.Errorf("get NVML handle of GPU %d: %w", i, ret))
			continue
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			errs = append(errs, fmt.Errorf("get UUID of GPU %d: %w", i, ret))
			continue
		}
		if err := n.register(dev, i, uuid); err != nil {
			errs = append(errs, fmt.Errorf("GPU %d (%s): %w", i, uuid, err))
		}
		out = append(out, n.poll(dev, i, uuid, now)...)
	}
	if n.watch.set != nil {
		for range maxEventsPerCall {
			e, ret := n.watch.set.Wait(0)
			if ret == nvml.ERROR_TIMEOUT {
				break
			}
			if ret != nvml.SUCCESS {
				errs = append(errs, fmt.Errorf("wait for NVML events: %w", ret))
				break
			}
			if f, ok := n.watch.faultOf(e, now); ok {
				out = append(out, f)
			}
		}
	}
	return out, errors.Join(errs...)
}

// register adds dev to the event set, once.
func (n *NVML) register(dev nvml.Device, index int, uuid string) error {
	if n.watch.registered[uuid] {
		return nil
	}
	n.watch.devices = append(n.watch.devices, watched{dev: dev, index: index, uuid: uuid})
	supported, ret := dev.GetSupportedEventTypes()
	if ret == nvml.ERROR_NOT_SUPPORTED {
		n.watch.registered[uuid] = true // polled only
		return nil
	}
	if ret != nvml.SUCCESS {
		return fmt.Errorf("get supported event types: %w", ret)
	}
	types := supported & faultEvents
	if types == 0 {
		n.watch.registered[uuid] = true
		return nil
	}
	if n.watch.set == nil {
		set, ret := n.lib.EventSetCreate()
		if ret != nvml.SUCCESS {
			return fmt.Errorf("create NVML event set: %w", ret)
		}
		n.watch.set = set
	}
	if ret := dev.RegisterEvents(types, n.watch.set); ret != nvml.SUCCESS {
		return fmt.Errorf("register for NVML events %#x: %w", types, ret)
	}
	n.watch.registered[uuid] = true
	return nil
}

// poll reports the memory faults that have come to stand on dev since
// the last poll. Unsupported queries (page retirement is pre-Ampere, row
// remapping Ampere and later) are skipped.
func (n *NVML) poll(dev nvml.Device, i int, uuid string, now time.Time) []Fault {
	standing := map[FaultKind]bool{}
	if st, ret := dev.GetRetiredPagesPendingStatus(); ret == nvml.SUCCESS && st == nvml.FEATURE_ENABLED {
		standing[FaultRetiredPages] = true
	}
	if _, _, pending, failed, ret := dev.GetRemappedRows(); ret == nvml.SUCCESS {
		if pending {
			standing[FaultRetiredPages] = true
		}
		if failed {
			standing[FaultRowRemap] = true
		}
	}
	var out []Fault
	prev := n.watch.pending[uuid]
	for _, k := range []FaultKind{FaultRetiredPages, FaultRowRemap} {
		if standing[k] && !prev[k] {
			out = append(out, Fault{At: now, GPU: i, UUID: uuid, Kind: k})
		}
	}
	n.watch.pending[uuid] = standing
	return out
}

// faultOf reads one NVML event; false for an event that is no fault.
func (w *faultWatch) faultOf(e nvml.EventData, now time.Time) (Fault, bool) {
	f := Fault{At: now, GPU: -1}
	for _, d := range w.devices {
		if e.Device != nil && d.dev == e.Device {
			f.GPU, f.UUID = d.index, d.uuid
		}
	}
	if f.GPU < 0 && e.Device != nil {
		if idx, ret := e.Device.GetIndex(); ret == nvml.SUCCESS {
			f.GPU = idx
		}
		if uuid, ret := e.Device.GetUUID(); ret == nvml.SUCCESS {
			f.UUID = uuid
		}
	}
	switch {
	case e.EventType&nvml.EventTypeXidCriticalError != 0:
		f.Kind, f.Code = FaultXid, int(min(e.EventData, MaxFaultCode))
	case e.EventType&nvml.EventTypeDoubleBitEccError != 0:
		f.Kind = FaultECC
	case e.EventType&nvml.EventTypeDramRetirementFailure != 0:
		f.Kind = FaultRowRemap
	case e.EventType&nvml.EventTypeDramRetirementEvent != 0:
		f.Kind = FaultRetiredPages
	default:
		return Fault{}, false
	}
	if f.GPU < 0 {
		// NVML names no GPU it knows: the fault is the node's, reported
		// on GPU 0 with no UUID rather than lost.
		f.GPU = 0
	}
	return f, true
}
