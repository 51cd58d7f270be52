package adaptergen

// v0045 is data parser v0.0.45. Against v0.0.42 its lists of fixed words
// became enums, a ping's status moved to "status", the association
// condition of POST /accounts_association became required, and it gained
// GET /job/{job_id}/requeue.
var v0045 = Parser{
	Version:  "v0.0.45",
	RawSpec:  "slurm-26.05.json",
	Releases: "Slurm 26.05 and later",
	Quirks: Quirks{
		PingStatus:             "Status",
		JobSharedEnum:          "V0045JobDescMsgShared",
		NodeStateEnum:          "V0045UpdateNodeMsgState",
		QOSFlagEnum:            "V0045QosFlags",
		AccountsAddCondByValue: true,
		Requeue:                true,
	},
}
