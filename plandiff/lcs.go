package plandiff

// Edit operations of a word-level diff.
const (
	OpEqual  = " "
	OpInsert = "+"
	OpDelete = "-"
)

// WordEdit is one word of an argv diff: kept, inserted (only in HEAD) or deleted (only in BASE).
type WordEdit struct {
	Op   string `json:"op"`
	Word string `json:"word"`
}

// maxLCSCells bounds the dynamic-programming table. Plans' argv are a few dozen words; a pathological plan file
// falls back to "everything deleted, everything inserted" rather than allocating without bound.
const maxLCSCells = 4 << 20

// wordDiff is the longest-common-subsequence diff of two word lists. Common prefix and suffix are trimmed first,
// so a typical change (one flag's value) costs almost nothing.
func wordDiff(a, b []string) []WordEdit {
	prefix := make([]WordEdit, 0, max(len(a), len(b)))
	var suffix []WordEdit
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		prefix = append(prefix, WordEdit{OpEqual, a[0]})
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		suffix = append(suffix, WordEdit{OpEqual, a[len(a)-1]})
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	out := prefix
	if len(a)*len(b) > maxLCSCells {
		for _, w := range a {
			out = append(out, WordEdit{OpDelete, w})
		}
		for _, w := range b {
			out = append(out, WordEdit{OpInsert, w})
		}
	} else {
		out = append(out, lcsEdits(a, b)...)
	}
	for i := len(suffix) - 1; i >= 0; i-- {
		out = append(out, suffix[i])
	}
	return out
}

func lcsEdits(a, b []string) []WordEdit {
	n, m := len(a), len(b)
	// l[i][j] is the LCS length of a[i:] and b[j:], stored row-major.
	l := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return l[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case a[i] == b[j]:
				l[i*(m+1)+j] = at(i+1, j+1) + 1
			case at(i+1, j) >= at(i, j+1):
				l[i*(m+1)+j] = at(i+1, j)
			default:
				l[i*(m+1)+j] = at(i, j+1)
			}
		}
	}
	out := make([]WordEdit, 0, n+m)
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, WordEdit{OpEqual, a[i]})
			i++
			j++
		case at(i+1, j) >= at(i, j+1):
			out = append(out, WordEdit{OpDelete, a[i]})
			i++
		default:
			out = append(out, WordEdit{OpInsert, b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, WordEdit{OpDelete, a[i]})
	}
	for ; j < m; j++ {
		out = append(out, WordEdit{OpInsert, b[j]})
	}
	return out
}
