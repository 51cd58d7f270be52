package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/topogen/internal/config"
)

// fileTests covers every file in testdata (TestFiles fails on a file
// missing here). A .good file loads as Default() changed by want; a .bad
// file fails with exactly the error lines listed, each prefixed with the
// file's path: a file that decodes gets every problem at once, each with
// its key's path.
var fileTests = map[string]struct {
	want     func(c *config.Config)
	wantErrs []string
}{
	"minimal.good.yaml":       {want: func(*config.Config) {}},
	"comments-only.good.yaml": {want: func(*config.Config) {}},
	"block.good.yaml": {want: func(c *config.Config) {
		c.Slurm.Format = "block"
		c.Slurm.NodeSource = "none"
		c.NVLink = config.NVLink{NodesDir: "/srv/topogen/nodes", BlockPrefix: "gb200-nvl", Degraded: "include", BlockSizes: []int{18, 36, 72}}
	}},
	"yaml-rails.good.yaml": {want: func(c *config.Config) {
		c.Slurm.Format = "yaml"
		c.Slurm.TopologyFile = "/etc/slurm/topology.yaml"
		c.Slurm.RestartCommand = "systemctl restart slurmctld"
		c.Slurm.NodeSource = "slurmrestd"
		c.Slurm.REST = config.REST{URL: "https://slurm-head:6820", User: "slurm", TokenFile: "/run/strata/jwt"}
		c.Fabric = config.Fabric{
			IBNetDiscover: "/srv/ib/fabric.out",
			HostRule:      `^(\S+)\.cluster `,
			GUIDMap:       "/etc/strata/guids.map",
			IncludeHCA:    "mlx5_0$",
			ExcludeHCA:    "storage",
			ExcludeGUIDs:  []string{"0x0002c90300000010", "H-e09d730300859298"},
			SwitchNames:   "guid",
		}
	}},
	"unknown-key.bad.yaml": {wantErrs: []string{
		"unmarshal errors:",
		"  line 5: field topolgy_file not found in type config.Slurm",
	}},
	"two-unknown-keys.bad.yaml": {wantErrs: []string{
		"unmarshal errors:",
		"  line 4: field formt not found in type config.Slurm",
		"  line 7: field include not found in type config.Fabric",
	}},
	"wrong-type.bad.yaml": {wantErrs: []string{
		"unmarshal errors:",
		"  line 4: cannot unmarshal !!str `thirty-six` into int",
	}},
	"bad-format.bad.yaml": {wantErrs: []string{
		`slurm.format: "dragonfly": want one of tree, block, yaml`,
	}},
	"host-rule-no-group.bad.yaml": {wantErrs: []string{
		`fabric.host_rule: "^\\S+ mlx5_\\d+$" has no capture group: put the host name part in ( ), e.g. ^(\S+) HCA-\d+`,
	}},
	"bad-regexp.bad.yaml": {wantErrs: []string{
		"fabric.include_hca: error parsing regexp: missing closing ]: `[0-3`",
	}},
	"yaml-format-conf-file.bad.yaml": {wantErrs: []string{
		`slurm.topology_file: format yaml writes topology.yaml, but the file is "/etc/slurm/topology.conf"`,
	}},
	"tree-format-yaml-file.bad.yaml": {wantErrs: []string{
		`slurm.topology_file: format tree writes topology.conf, but the file is "/etc/slurm/topology.yaml": set format: yaml`,
	}},
	"decreasing-block-sizes.bad.yaml": {wantErrs: []string{
		"nvlink.block_sizes[2]: 36: sizes must be positive and increasing",
	}},
	"slurmrestd-without-token.bad.yaml": {wantErrs: []string{
		"slurm.rest: node_source slurmrestd needs url and token_file",
	}},
	"wrong-api-version.bad.yaml": {wantErrs: []string{
		`apiVersion: "strata/v2" is not supported: use strata/v1`,
	}},
	"bad-block-prefix.bad.yaml": {wantErrs: []string{
		`nvlink.block_prefix: "nvl[": use letters, digits, '.', '_' and '-' only, not at either end`,
	}},
	"every-problem-at-once.bad.yaml": {wantErrs: []string{
		`apiVersion: "v1" is not supported: use strata/v1`,
		`kind: "Topogen": want TopogenConfig`,
		`slurm.node_source: "sinfo": want one of slurmrestd, slurm.conf, none`,
		`fabric.switch_names: "lid": want one of auto, guid, description`,
		`nvlink.degraded: "ignore": want one of exclude, include`,
		"slurm.topology_file: required",
		`fabric.host_rule: ".*" has no capture group: put the host name part in ( ), e.g. ^(\S+) HCA-\d+`,
		"fabric.exclude_hca: error parsing regexp: missing closing ): `(`",
		"nvlink.block_sizes[0]: 0: sizes must be positive and increasing",
	}},
}

func TestFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := fileTests[filepath.Base(f)]; !ok {
			t.Errorf("%s has no case in fileTests", f)
		}
	}
	for name, tc := range fileTests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			got, err := config.Load(path)
			if strings.HasSuffix(name, ".good.yaml") != (tc.want != nil) || (tc.want != nil) == (tc.wantErrs != nil) {
				t.Fatal("a .good file needs want and a .bad file wantErrs")
			}
			if tc.wantErrs != nil {
				if err == nil {
					t.Fatalf("Load succeeded, want errors %q", tc.wantErrs)
				}
				want := make([]string, len(tc.wantErrs))
				for i, e := range tc.wantErrs {
					if strings.HasPrefix(e, "  ") {
						want[i] = e // a continuation line of the YAML decoder's error
					} else {
						want[i] = path + ": " + e
					}
				}
				if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
					t.Errorf("error lines (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := config.Default()
			tc.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultValidates(t *testing.T) {
	if errs := config.Default().Validate(); len(errs) > 0 {
		t.Errorf("Default().Validate() = %v, want no problem", errs)
	}
}

// exampleFile is the configuration the packages install as
// /etc/strata/topogen.yaml.
const exampleFile = "../../../etc/strata/topogen.yaml"

func TestExampleFile(t *testing.T) {
	got, err := config.Load(exampleFile)
	if err != nil {
		t.Fatalf("the shipped example does not load: %v", err)
	}
	// The example shows every key at its default, so installing it
	// changes nothing, and every default it states is true.
	if diff := cmp.Diff(config.Default(), got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("example differs from the defaults (-Default +example):\n%s", diff)
	}
}

// TestExampleFileMentionsEveryKey: every key of the configuration is in
// the example, set or commented out, so an admin can learn them all there.
func TestExampleFileMentionsEveryKey(t *testing.T) {
	data, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		"apiVersion:", "kind:",
		"slurm:", "format:", "topology_file:", "scontrol:", "restart_command:", "node_source:", "slurm_conf:",
		"rest:", "url:", "user:", "token_file:",
		"fabric:", "ibnetdiscover:", "host_rule:", "guid_map:", "include_hca:", "exclude_hca:", "exclude_guids:", "switch_names:",
		"nvlink:", "nodes_dir:", "block_prefix:", "degraded:", "block_sizes:",
	} {
		if !strings.Contains(string(data), key) {
			t.Errorf("%s does not mention %s", exampleFile, key)
		}
	}
	for _, want := range []string{"# restart_command: systemctl restart slurmctld", "# include_hca: 'mlx5_0$'"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks the commented-out example %q", exampleFile, want)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := config.Load(filepath.Join(t.TempDir(), "topogen.yaml"))
	// topogen falls back to the defaults when the default file is
	// missing, so the error must say so through errors.Is.
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file = %v, want an os.ErrNotExist error", err)
	}
}

func TestParseNameInErrors(t *testing.T) {
	_, err := config.Parse("/etc/strata/topogen.yaml", []byte("apiVersion: strata/v1\nkind: TopogenConfig\nslurm: [tree]\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "/etc/strata/topogen.yaml: ") || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("Parse error = %v, want one naming the file and line 3", err)
	}
}

// FuzzParse: no input makes Parse panic, and what it accepts validates.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*"))
	files = append(files, exampleFile)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		if errs := cfg.Validate(); len(errs) > 0 {
			t.Errorf("Parse accepted a config that does not validate: %v", errs)
		}
	})
}
