package nvml

import "testing"

// Names as NVML and nvidia-smi print them; the first six are in the
// fixtures and the go-nvml mocks.
var gresTypeTests = map[string]struct {
	name string
	want string
}{
	"H100 SXM":                 {"NVIDIA H100 80GB HBM3", "h100"},
	"A100 SXM, hyphenated":     {"NVIDIA A100-SXM4-80GB", "a100"},
	"go-nvml mock A100":        {"Mock NVIDIA A100-SXM4-40GB", "a100"},
	"A10G":                     {"NVIDIA A10G", "a10g"},
	"Tesla T4":                 {"Tesla T4", "t4"},
	"GeForce RTX 3090":         {"NVIDIA GeForce RTX 3090", "rtx3090"},
	"Quadro P400":              {"Quadro P400", "p400"},
	"RTX 4000 SFF Ada":         {"NVIDIA RTX 4000 SFF Ada Generation", "rtx4000ada"},
	"Quadro RTX 4000 (Turing)": {"Quadro RTX 4000", "rtx4000"},
	"RTX 6000 Ada":             {"NVIDIA RTX 6000 Ada Generation", "rtx6000ada"},
	"RTX A6000":                {"NVIDIA RTX A6000", "rtxa6000"},
	"RTX PRO 6000 Blackwell":   {"NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtxpro6000"},
	"GeForce RTX 3090 Ti":      {"NVIDIA GeForce RTX 3090 Ti", "rtx3090ti"},
	"GeForce RTX 4080 SUPER":   {"NVIDIA GeForce RTX 4080 SUPER", "rtx4080super"},
	"GeForce GTX 1080 Ti":      {"NVIDIA GeForce GTX 1080 Ti", "gtx1080ti"},
	"TITAN V":                  {"NVIDIA TITAN V", "titanv"},
	"TITAN RTX":                {"NVIDIA TITAN RTX", "titanrtx"},
	"V100 SXM2":                {"Tesla V100-SXM2-32GB", "v100"},
	"A100 PCIe":                {"NVIDIA A100 80GB PCIe", "a100"},
	"H100 NVL":                 {"NVIDIA H100 NVL", "h100"},
	"H200":                     {"NVIDIA H200 141GB HBM3e", "h200"},
	"B200":                     {"NVIDIA B200 180GB HBM3e", "b200"},
	"GB200":                    {"NVIDIA GB200", "gb200"},
	"GH200":                    {"NVIDIA GH200 480GB", "gh200"},
	"L40S":                     {"NVIDIA L40S", "l40s"},
	"L4":                       {"NVIDIA L4", "l4"},
	"MIG device name":          {"NVIDIA A100-SXM4-40GB MIG 1g.5gb", "a100"},
	"extra spaces":             {"  NVIDIA   H100  ", "h100"},
	"no digit":                 {"NVIDIA Graphics Device", "graphicsdevice"},
	"brand only":               {"NVIDIA", ""},
	"empty":                    {"", ""},
	"odd characters dropped":   {"NVIDIA A100/ (test)", "a100"},
}

func TestGRESType(t *testing.T) {
	for name, tt := range gresTypeTests {
		t.Run(name, func(t *testing.T) {
			if got := GRESType(tt.name); got != tt.want {
				t.Errorf("GRESType(%q) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}
