package nvml

import (
	"slices"
	"strings"
	"unicode"
)

// GRESType derives the short lower-case type that gres.conf and job requests
// (--gres=gpu:h100:8) use from a product name as NVML and nvidia-smi report it:
//
//	NVIDIA H100 80GB HBM3               -> h100
//	NVIDIA A100-SXM4-80GB               -> a100
//	Tesla T4                            -> t4
//	NVIDIA GeForce RTX 3090 Ti          -> rtx3090ti
//	NVIDIA RTX A6000                    -> rtxa6000
//	NVIDIA RTX 4000 SFF Ada Generation  -> rtx4000ada
//	NVIDIA TITAN V                      -> titanv
//
// The rule: split the lower-cased name at spaces, hyphens and underscores;
// drop the brand words (nvidia, tesla, geforce, quadro); the model is the
// first word that holds a digit, prefixed by the series words right before it
// (rtx, gtx, gts, gt, pro) and followed by "ti" or "super" when the next word
// is one, and by "ada" when the name says "Ada" (RTX 4000 and RTX 4000 Ada are
// different boards). Memory size and form factor (80GB, SXM4, PCIe, NVL) are
// dropped, so an H100 PCIe and an H100 SXM share the type h100. TITAN takes
// the word after it. A name with no digit at all becomes its remaining words
// joined. Only a-z and 0-9 survive, so the result is a valid GRES type.
func GRESType(name string) string {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return unicode.IsSpace(r) || r == '-' || r == '_'
	})
	for i, w := range words {
		words[i] = strings.Map(func(r rune) rune {
			if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
				return r
			}
			return -1
		}, w)
	}
	words = slices.DeleteFunc(words, func(w string) bool {
		return slices.Contains([]string{"", "nvidia", "tesla", "geforce", "quadro"}, w)
	})
	if len(words) == 0 {
		return ""
	}
	for i, w := range words {
		if w == "titan" {
			if i+1 < len(words) {
				return "titan" + words[i+1]
			}
			return "titan"
		}
		if !strings.ContainsAny(w, "0123456789") {
			continue
		}
		start := i
		for start > 0 && isSeriesWord(words[start-1]) {
			start--
		}
		t := strings.Join(words[start:i+1], "")
		if i+1 < len(words) && (words[i+1] == "ti" || words[i+1] == "super") {
			t += words[i+1]
		}
		for _, rest := range words[i+1:] {
			if rest == "ada" {
				t += "ada"
				break
			}
		}
		return t
	}
	return strings.Join(words, "")
}

func isSeriesWord(w string) bool {
	switch w {
	case "rtx", "gtx", "gts", "gt", "pro":
		return true
	}
	return false
}
