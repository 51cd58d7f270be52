package service

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/strata-hpc/strata/portal-api/internal/api"
)

// maxReclaimBytes bounds reclaimd's answer about one job.
const maxReclaimBytes = 4 << 20

// GetJobReclaim gives reclaimd's record of a job the caller may read.
func (s *Server) GetJobReclaim(w http.ResponseWriter, r *http.Request, clusterName api.ClusterName, id api.JobID) {
	_, c, ok := s.find(w, r, clusterName, id)
	if !ok {
		return
	}
	if c.ReclaimdURL == "" {
		writeError(w, http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q has no reclaimd", clusterName),
			"its admins give the cluster a reclaimd_url")
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, c.ReclaimdURL+"/v1/jobs/"+strconv.FormatInt(id, 10)+"/reclaim", nil)
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.Internal, "reclaimd's URL does not make a request", "")
		return
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		s.log.Warn("reclaimd unreachable", "cluster", clusterName, "error", err)
		writeError(w, http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("reclaimd of cluster %q does not answer", clusterName), "try again shortly")
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReclaimBytes+1))
	switch {
	case err != nil || len(body) > maxReclaimBytes:
		writeError(w, http.StatusBadGateway, api.Unavailable, "reclaimd's answer could not be read", "try again shortly")
		return
	case resp.StatusCode == http.StatusNotFound:
		writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("reclaimd has no record of job %d: it never judged it idle", id), "")
		return
	case resp.StatusCode != http.StatusOK:
		s.log.Warn("reclaimd refused", "cluster", clusterName, "job_id", id, "status", resp.StatusCode)
		writeError(w, http.StatusBadGateway, api.Unavailable, fmt.Sprintf("reclaimd answered %d", resp.StatusCode), "try again shortly")
		return
	}
	var out api.Reclaim
	if err := json.Unmarshal(body, &out); err != nil || out.JobId != id {
		writeError(w, http.StatusBadGateway, api.Unavailable, "reclaimd's answer is not a reclaim record of this job", "")
		return
	}
	if out.Decisions == nil {
		out.Decisions = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, out)
}
