package controller_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-hpc/strata/internal/reclaimapi"
)

// TestAnswersAreTheContract: every answer in testdata/api (what reclaimd
// serves, TestAPIAnswersForThePortal) decodes strictly into its type of
// internal/reclaimapi, the contract the portal reads, and encodes back to
// the very same bytes: nothing reclaimd serves is unknown to the contract,
// and nothing the contract holds is lost or spelled otherwise.
func TestAnswersAreTheContract(t *testing.T) {
	for file, v := range map[string]any{
		"decisions.json":       &reclaimapi.Decisions{},
		"failures.json":        &reclaimapi.Failures{},
		"nodes-health.json":    &reclaimapi.NodesHealth{},
		"attempts-910101.json": &reclaimapi.Attempts{},
	} {
		t.Run(file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "api", file))
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("%s does not decode into %T: %v", file, v, err)
			}
			var out bytes.Buffer
			enc := json.NewEncoder(&out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			if out.String() != string(body) {
				t.Errorf("%T encodes %s otherwise:\n%s", v, file, out.String())
			}
		})
	}
}
