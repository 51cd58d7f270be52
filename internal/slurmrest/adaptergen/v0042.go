package adaptergen

// v0042 is data parser v0.0.42, the oldest Strata speaks: lists of fixed
// words are plain strings, and there is no REST requeue.
var v0042 = Parser{
	Version:  "v0.0.42",
	RawSpec:  "slurm-24.11.json",
	Releases: "Slurm 24.11 through 26.05",
	Quirks: Quirks{
		PingStatus:    "Pinged",
		JobSharedEnum: "string",
		NodeStateEnum: "string",
		QOSFlagEnum:   "string",
	},
}
