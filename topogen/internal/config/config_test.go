package config_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/internal/strictyaml/strictyamltest"
	"github.com/strata-hpc/strata/topogen/internal/config"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/*.bad.yaml")

// goodFiles are what each testdata/*.good.yaml loads to: Default()
// changed by the function.
var goodFiles = map[string]func(c *config.Config){
	"minimal.good.yaml":       func(*config.Config) {},
	"comments-only.good.yaml": func(*config.Config) {},
	"block.good.yaml": func(c *config.Config) {
		c.Slurm.Format = "block"
		c.Slurm.NodeSource = "none"
		c.NVLink = config.NVLink{NodesDir: "/srv/topogen/nodes", BlockPrefix: "gb200-nvl", Degraded: "include", BlockSizes: []int{18, 36, 72}}
	},
	"yaml-rails.good.yaml": func(c *config.Config) {
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
			MaxDumpMiB:    512,
		}
	},
}

// TestFiles: every .good file loads to its goodFiles entry; every .bad
// file fails with the diagnostics of its .golden file, all at once, each
// with its line and column (-update rewrites them).
func TestFiles(t *testing.T) {
	good := strictyamltest.Files(t, "testdata", *update, func(path string) error {
		_, err := config.Load(path)
		return err
	})
	for _, f := range good {
		name := filepath.Base(f)
		change, ok := goodFiles[name]
		if !ok {
			t.Errorf("%s has no case in goodFiles", f)
			continue
		}
		got, err := config.Load(f)
		if err != nil {
			continue // reported by Files
		}
		want := config.Default()
		change(&want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
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
		"max_dump_mib:", "nvlink:", "nodes_dir:", "block_prefix:", "degraded:", "block_sizes:",
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
	want := "/etc/strata/topogen.yaml:3:8: slurm: want a mapping, got a list (hint: write key: value lines indented under it)"
	if err == nil || err.Error() != want {
		t.Errorf("Parse error = %v, want %s", err, want)
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
