package graph

import "testing"

func TestDeviceIndex(t *testing.T) {
	tests := map[string]struct {
		desc   string
		device string
		index  int
		ok     bool
	}{
		"mlx5 counts from 0":       {"a08-p1-dgx-04-c01 mlx5_5", "mlx5_5", 5, true},
		"HCA-N counts from 1":      {"a05-p1-dgx-01-c01 HCA-1", "HCA-1", 0, true},
		"hfi":                      {"node7 hfi1_12", "hfi1_12", 12, true},
		"mlx4":                     {"old mlx4_1", "mlx4_1", 1, true},
		"description is a device":  {"mlx5_0", "mlx5_0", 0, true},
		"firmware default":         {"MT4129 ConnectX7   Mellanox Technologies", "", 0, false},
		"model number at the end":  {"MT4129 ConnectX7", "", 0, false},
		"no number after mlx":      {"node mlx_0", "", 0, false},
		"other device":             {"node ib0", "", 0, false},
		"too many digits":          {"node mlx5_12345", "", 0, false},
		"nothing":                  {"", "", 0, false},
		"HCA-0 stays 0":            {"x HCA-0", "HCA-0", 0, true},
		"digits before underscore": {"x 5_0", "", 0, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dev, idx, ok := deviceIndex(tc.desc)
			if dev != tc.device || idx != tc.index || ok != tc.ok {
				t.Errorf("deviceIndex(%q) = %q, %d, %v; want %q, %d, %v", tc.desc, dev, idx, ok, tc.device, tc.index, tc.ok)
			}
		})
	}
}

func FuzzDeviceIndex(f *testing.F) {
	for _, s := range []string{"a mlx5_5", "b HCA-1", "c hfi1_0", "MT4129 ConnectX7", "_", "mlx_", "HCA-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, desc string) {
		dev, idx, ok := deviceIndex(desc)
		if !ok {
			return
		}
		if idx < 0 || len(dev) > len(desc) || desc[len(desc)-len(dev):] != dev {
			t.Fatalf("deviceIndex(%q) = %q, %d: not a suffix, or a negative index", desc, dev, idx)
		}
	})
}

// FuzzDefaultHost holds the hand-written matcher of the default host rule
// to the regexp it stands for.
func FuzzDefaultHost(f *testing.F) {
	for _, s := range []string{
		"a08-p1-dgx-04-c01 mlx5_5", "node1 HCA-1", "n hfi1_0", "n qib0", "n ib0", "n ibp12s0f1", "n ib",
		"MT4129 ConnectX7", "a  mlx5_0", "a\tmlx5_0", " mlx5_0", "a mlx5_0 ", "a mlx5_", "a mlx_0", "a HCA-",
		"a ibx1\xff", "a ib1 x", "a\xffb mlx5_0", "a mlx5_0\n", "a ib1\v", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := ""
		if m := defaultHostRule.FindStringSubmatch(s); m != nil {
			want = m[1]
		}
		if got := defaultHost(s); got != want {
			t.Fatalf("defaultHost(%q) = %q, the rule's regexp gives %q", s, got, want)
		}
	})
}
