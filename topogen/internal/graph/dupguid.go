package graph

import "strings"

// KindDuplicateGUID is the finding for a GUID the fabric dump declares
// more than once: two scans pasted together, or HCAs with cloned GUIDs.
// The parser keeps one declaration (merging or dropping links), which can
// put hosts under the wrong leaf, so apply refuses such a scan unless
// forced.
const KindDuplicateGUID = "duplicate-guid"

// noteDuplicateGUIDs turns the parser's diagnostics about a GUID declared
// again into findings, one per GUID.
func (b *builder) noteDuplicateGUIDs() {
	seen := map[string]bool{}
	for _, d := range b.f.Diagnostics {
		guid, ok := duplicateGUID(d.Msg)
		if !ok || seen[guid] {
			continue
		}
		seen[guid] = true
		b.note(Warning, KindDuplicateGUID, guid, "declared more than once in the fabric dump (line %d: %s): hosts behind it may be misplaced", d.Line, d.Msg)
	}
}

// duplicateGUID reads the GUID out of the ib parser's two messages for a
// node declared again.
func duplicateGUID(msg string) (string, bool) {
	for _, f := range []struct{ prefix, marker string }{
		{"GUID ", " already declared as a "},
		{"node ", " declared again "},
	} {
		rest, ok := strings.CutPrefix(msg, f.prefix)
		if !ok {
			continue
		}
		if guid, _, ok := strings.Cut(rest, f.marker); ok && guid != "" && !strings.Contains(guid, " ") {
			return guid, true
		}
	}
	return "", false
}
