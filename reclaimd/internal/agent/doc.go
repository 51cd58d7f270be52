// Package agent is the node agent of reclaimd (`reclaimd agent`, one per GPU
// node). It samples every GPU of the node through a source (NVML, or a
// replay), keeps a short rolling window of samples per GPU in memory, maps
// the processes on each GPU to Slurm job ids through /proc, and serves what
// it knows over HTTP:
//
//   - GET /v1/snapshot: the windows as JSON (type Snapshot), which the
//     reclaimd controller reads; with ?after=CURSOR only the samples taken
//     since the snapshot that gave the cursor (SnapshotAfter);
//   - GET /healthz: 200 while samples are fresh, 503 with the reason when
//     the source fails or the data are stale;
//   - GET /metrics: Prometheus metrics from a private registry, labelled by
//     GPU index and model only.
//
// Nothing here decides what is idle: the controller does, from the windows
// of all nodes and what Slurm says about jobs.
package agent
