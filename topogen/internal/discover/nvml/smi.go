package nvml

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// smiLog is the part of `nvidia-smi -q -x` (DTD nvsmi_device_v10..v13) this
// package reads.
type smiLog struct {
	XMLName   xml.Name `xml:"nvidia_smi_log"`
	Timestamp string   `xml:"timestamp"`
	Driver    string   `xml:"driver_version"`
	CUDA      string   `xml:"cuda_version"`
	GPUs      []smiGPU `xml:"gpu"`
}

type smiGPU struct {
	ID          string     `xml:"id,attr"` // the bus id again
	ProductName string     `xml:"product_name"`
	UUID        string     `xml:"uuid"`
	Minor       string     `xml:"minor_number"`
	PCIBusID    string     `xml:"pci>pci_bus_id"`
	CurrentMIG  string     `xml:"mig_mode>current_mig"`
	MemoryTotal string     `xml:"fb_memory_usage>total"`
	Fabric      *smiFabric `xml:"fabric"`
}

// smiFabric is <fabric>: DTD v12 has state and status, v13 adds cliqueId,
// clusterUuid and health.
type smiFabric struct {
	State         string `xml:"state"`
	CliqueID      string `xml:"cliqueId"`
	ClusterUUID   string `xml:"clusterUuid"`
	HealthSummary string `xml:"health>summary"`
}

// smiTimestamp is the layout of <timestamp>, "Fri Aug  4 11:44:30 2023". It
// carries no zone: the node's local time, read here as UTC.
const smiTimestamp = time.ANSIC

// ParseQueryXML reads the output of `nvidia-smi -q -x`. The Node it returns
// has Source "nvidia-smi", no Hostname (the caller knows it), CollectedAt
// from <timestamp> read as UTC (zero when absent), and no NVLinks, CPU
// affinity or NUMA node, which the XML does not hold: Merge adds them from
// `nvidia-smi topo -m`.
//
// The XML has no index element. nvidia-smi lists GPUs in index order, so
// Index is the position in the file; a dump made with -i (one GPU) therefore
// numbers that GPU 0 whatever its real index. <attached_gpus> counts all GPUs
// of the node, not those listed, and is not checked.
func ParseQueryXML(r io.Reader) (Node, error) {
	var log smiLog
	dec := xml.NewDecoder(r)
	if err := dec.Decode(&log); err != nil {
		return Node{}, fmt.Errorf("parse nvidia-smi -q -x output: %w", err)
	}
	n := Node{
		Source: SourceNvidiaSMI,
		Driver: notApplicable(log.Driver),
		CUDA:   notApplicable(log.CUDA),
		GPUs:   []GPU{},
	}
	if ts := strings.TrimSpace(log.Timestamp); ts != "" {
		t, err := time.Parse(smiTimestamp, ts)
		if err != nil {
			return Node{}, fmt.Errorf("nvidia-smi -q -x: <timestamp> %q is not like %q", ts, smiTimestamp)
		}
		n.CollectedAt = t
	}
	var errs []error
	for i, x := range log.GPUs {
		g, err := x.gpu(i)
		if err != nil {
			errs = append(errs, fmt.Errorf("gpu %d (%s): %w", i, strings.TrimSpace(x.ID), err))
			continue
		}
		n.GPUs = append(n.GPUs, g)
	}
	if len(errs) == 0 {
		errs = validateGPUs(n.GPUs)
	}
	if len(errs) > 0 {
		return Node{}, fmt.Errorf("nvidia-smi -q -x: %w", errors.Join(errs...))
	}
	sortGPUs(n.GPUs)
	return n, nil
}

func (x smiGPU) gpu(index int) (GPU, error) {
	g := GPU{
		Index:    index,
		Minor:    -1,
		UUID:     notApplicable(x.UUID),
		Name:     notApplicable(x.ProductName),
		NUMANode: -1,
	}
	var errs []error
	if g.UUID == "" {
		errs = append(errs, errors.New("no <uuid>"))
	}
	if g.Name == "" {
		errs = append(errs, errors.New("no <product_name>"))
	}
	g.Type = GRESType(g.Name)
	bus := notApplicable(x.PCIBusID)
	if bus == "" {
		bus = notApplicable(x.ID)
	}
	var err error
	if g.PCIBusID, err = NormalizeBusID(bus); err != nil {
		errs = append(errs, err)
	}
	if m := notApplicable(x.Minor); m != "" {
		if g.Minor, err = strconv.Atoi(m); err != nil || g.Minor < 0 {
			errs = append(errs, fmt.Errorf("<minor_number> %q is not a minor number", m))
		}
	}
	if mem := notApplicable(x.MemoryTotal); mem != "" {
		v, unit, _ := strings.Cut(mem, " ")
		if g.MemoryMiB, err = strconv.ParseInt(v, 10, 64); err != nil || unit != "MiB" || g.MemoryMiB < 0 {
			errs = append(errs, fmt.Errorf("<fb_memory_usage><total> %q is not like \"81920 MiB\"", mem))
		}
	}
	switch mig := notApplicable(x.CurrentMIG); mig {
	case "Enabled":
		g.MIG = true
	case "Disabled", "":
	default:
		errs = append(errs, fmt.Errorf("<mig_mode><current_mig> %q is neither Enabled nor Disabled", mig))
	}
	if x.Fabric != nil {
		if g.Fabric, err = x.Fabric.fabric(); err != nil {
			errs = append(errs, err)
		}
	}
	return g, errors.Join(errs...)
}

// fabric returns nil when the GPU has no fabric (state N/A or Not Supported).
func (x smiFabric) fabric() (*Fabric, error) {
	state := snake(notApplicable(x.State))
	switch state {
	case "", FabricNotSupported:
		return nil, nil
	case FabricCompleted, FabricInProgress, FabricNotStarted:
	default:
		return nil, fmt.Errorf("<fabric><state> %q is not Completed, In Progress, Not Started or Not Supported", x.State)
	}
	f := &Fabric{State: state, Health: snake(notApplicable(x.HealthSummary))}
	if id := notApplicable(x.CliqueID); id != "" {
		v, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("<fabric><cliqueId> %q is not a number", id)
		}
		f.CliqueID = uint32(v)
	}
	if u := strings.ToLower(notApplicable(x.ClusterUUID)); u != "" && strings.Trim(u, "0-") != "" {
		f.ClusterUUID = u
	}
	return f, nil
}

// notApplicable trims s and maps nvidia-smi's "N/A" to "".
func notApplicable(s string) string {
	s = strings.TrimSpace(s)
	if s == "N/A" {
		return ""
	}
	return s
}

// snake turns nvidia-smi's "In Progress" into "in_progress".
func snake(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), "_")
}
