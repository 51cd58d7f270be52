// Package hostlist expands and compresses Slurm host lists such as
// "gpu[01-04,10],login1" or "rack[1-2]-node[01-02]", the way Slurm's own
// hostlist functions do, so every Strata part reads node names alike.
package hostlist

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MaxHosts bounds an expansion, so a typo such as "n[1-100000000]" is an
// error and not an out-of-memory kill.
const MaxHosts = 1 << 20

// SyntaxError says where in a host list the parser stopped.
type SyntaxError struct {
	List   string
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("hostlist %q: at offset %d: %s", e.List, e.Offset, e.Msg)
}

// Expand returns the host names of list in order, duplicates kept.
// An empty list expands to nothing.
func Expand(list string) ([]string, error) {
	var out []string
	for start, depth, i := 0, 0, 0; i <= len(list); i++ {
		if i < len(list) {
			switch list[i] {
			case '[':
				depth++
				continue
			case ']':
				depth--
				if depth < 0 {
					return nil, &SyntaxError{list, i, "unmatched ']'"}
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if depth > 0 {
			return nil, &SyntaxError{list, start, "unmatched '['"}
		}
		item := strings.TrimSpace(list[start:i])
		if item != "" {
			hosts, err := expandOne(list, start, item, MaxHosts-len(out))
			if err != nil {
				return nil, err
			}
			out = append(out, hosts...)
		}
		start = i + 1
	}
	return out, nil
}

// expandOne expands one comma-free item with any number of bracket groups:
// "rack[1-2]-n[01-02]" is the cartesian product in left-to-right order.
func expandOne(list string, off int, item string, budget int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "]") {
			return nil, &SyntaxError{list, off, "unmatched ']'"}
		}
		if budget < 1 {
			return nil, &SyntaxError{list, off, fmt.Sprintf("expands to more than %d hosts", MaxHosts)}
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, &SyntaxError{list, off + open, "unmatched '['"}
	}
	end += open
	prefix, body, rest := item[:open], item[open+1:end], item[end+1:]
	if strings.ContainsAny(prefix, "]") {
		return nil, &SyntaxError{list, off, "unmatched ']'"}
	}
	ids, err := expandRanges(list, off+open+1, body, budget)
	if err != nil {
		return nil, err
	}
	tails := []string{""}
	if rest != "" {
		if tails, err = expandOne(list, off+end+1, rest, budget); err != nil {
			return nil, err
		}
	}
	if len(ids)*len(tails) > budget {
		return nil, &SyntaxError{list, off, fmt.Sprintf("expands to more than %d hosts", MaxHosts)}
	}
	out := make([]string, 0, len(ids)*len(tails))
	for _, id := range ids {
		for _, t := range tails {
			out = append(out, prefix+id+t)
		}
	}
	return out, nil
}

// expandRanges expands "01-03,7" into 01 02 03 7, keeping zero padding.
func expandRanges(list string, off int, body string, budget int) ([]string, error) {
	if body == "" {
		return nil, &SyntaxError{list, off, "empty brackets"}
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isDigits(lo) || (isRange && !isDigits(hi)) {
			return nil, &SyntaxError{list, off, fmt.Sprintf("range %q is not numeric", r)}
		}
		a, errA := strconv.ParseUint(lo, 10, 63)
		b := a
		var errB error
		if isRange {
			b, errB = strconv.ParseUint(hi, 10, 63)
		}
		if errA != nil || errB != nil {
			return nil, &SyntaxError{list, off, fmt.Sprintf("range %q is out of bounds", r)}
		}
		if b < a {
			return nil, &SyntaxError{list, off, fmt.Sprintf("range %q runs backwards", r)}
		}
		if b-a >= uint64(budget-len(out)) {
			return nil, &SyntaxError{list, off, fmt.Sprintf("expands to more than %d hosts", MaxHosts)}
		}
		width := len(lo)
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
	}
	return out, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Compress returns the shortest Slurm host list for hosts, in sorted order
// with duplicates removed: names that differ only in a trailing number of the
// same width share one bracket group ("gpu[1-3,7]", "n[001-004]"). Names
// without a trailing number are listed as they are. Expand(Compress(h))
// returns the sorted, de-duplicated h.
func Compress(hosts []string) string {
	type key struct {
		prefix string
		width  int // 0 for names without a numeric suffix
	}
	groups := map[key][]uint64{}
	var order []key
	for _, h := range hosts {
		if h == "" {
			continue
		}
		i := len(h)
		for i > 0 && h[i-1] >= '0' && h[i-1] <= '9' {
			i--
		}
		k := key{prefix: h}
		var n uint64
		if digits := h[i:]; digits != "" && len(digits) <= 18 && !strings.ContainsAny(h[:i], "[],") {
			n, _ = strconv.ParseUint(digits, 10, 64)
			k = key{prefix: h[:i], width: 1}
			if digits[0] == '0' && len(digits) > 1 {
				k.width = len(digits) // zero-padded: only numbers of this width belong here
			}
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], n)
	}
	// An unpadded number as wide as a padded group ("n10" beside "n01") joins it.
	for _, k := range order {
		if k.width < 2 {
			continue
		}
		nat := key{prefix: k.prefix, width: 1}
		var keep []uint64
		for _, n := range groups[nat] {
			if len(strconv.FormatUint(n, 10)) == k.width {
				groups[k] = append(groups[k], n)
			} else {
				keep = append(keep, n)
			}
		}
		if len(keep) != len(groups[nat]) {
			groups[nat] = keep
		}
	}
	sort.Slice(order, func(a, b int) bool {
		if order[a].prefix != order[b].prefix {
			return order[a].prefix < order[b].prefix
		}
		return order[a].width < order[b].width
	})
	var parts []string
	for _, k := range order {
		if k.width != 0 && len(groups[k]) == 0 {
			continue
		}
		if k.width == 0 {
			parts = append(parts, k.prefix)
			continue
		}
		ns := groups[k]
		sort.Slice(ns, func(a, b int) bool { return ns[a] < ns[b] })
		var ranges []string
		count := 0
		for i := 0; i < len(ns); {
			j := i
			for j+1 < len(ns) && (ns[j+1] == ns[j] || ns[j+1] == ns[j]+1) {
				j++
			}
			w := k.width
			if w == 1 {
				w = 0
			}
			if ns[i] == ns[j] {
				ranges = append(ranges, fmt.Sprintf("%0*d", w, ns[i]))
				count++
			} else {
				ranges = append(ranges, fmt.Sprintf("%0*d-%0*d", w, ns[i], w, ns[j]))
				count += 2
			}
			i = j + 1
		}
		if count == 1 {
			parts = append(parts, k.prefix+ranges[0])
		} else {
			parts = append(parts, k.prefix+"["+strings.Join(ranges, ",")+"]")
		}
	}
	return strings.Join(parts, ",")
}
