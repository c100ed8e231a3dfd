package config

import (
	"bytes"
	"runtime"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// parseChunkBytes is the size above which a file is parsed in pieces, and about the size of a piece: the lexer
// holds every token of what it parses in one array that it grows by appending, so small pieces keep those arrays
// small and short-lived (4 kB pieces halved the bytes a 10,000-node file allocates while parsing, against 128
// kB ones), and the cores parse pieces side by side.
const parseChunkBytes = 4 << 10

// parseBody parses src as HCL native syntax. A large file is split between top-level blocks and its pieces are
// parsed concurrently, each with its own start position, into one body with the blocks in file order: the same
// body, token for token and range for range, as parsing the file whole. When any piece has a diagnostic or a
// top-level attribute (which a body checks for duplicates across the whole file), the file is parsed whole
// instead, so that diagnostics are exactly the parser's own.
func parseBody(name string, src []byte) (*hclsyntax.Body, hcl.Diagnostics) {
	if cuts := topLevelCuts(src, parseChunkBytes); len(cuts) > 0 {
		if body := parsePieces(name, src, cuts); body != nil {
			return body, nil
		}
	}
	f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if f == nil {
		return nil, diags
	}
	body, _ := f.Body.(*hclsyntax.Body)
	return body, diags
}

// topLevelCuts returns byte offsets, about every size bytes, that start a line right after a line holding only
// "}" at its first column: where a top-level block may have closed. A cut that is not really between two
// top-level items (a "}" line inside a heredoc, say) leaves the piece before it unterminated, which its parse
// reports, and parseBody then parses the file whole.
func topLevelCuts(src []byte, size int) []int {
	var cuts []int
	for from := size; from < len(src); {
		i := bytes.Index(src[from:], []byte("\n}\n"))
		if i < 0 {
			break
		}
		cut := from + i + 3
		if cut >= len(src) {
			break
		}
		// A byte-order mark is skipped at the start of what the lexer reads and invalid anywhere else.
		if !bytes.HasPrefix(src[cut:], []byte("\xef\xbb\xbf")) {
			cuts = append(cuts, cut)
		}
		from = cut + size
	}
	return cuts
}

// parsePieces parses src cut at cuts, concurrently, and joins the pieces' blocks; nil when a piece has a
// diagnostic or a top-level attribute.
func parsePieces(name string, src []byte, cuts []int) *hclsyntax.Body {
	bounds := append(append([]int{0}, cuts...), len(src))
	bodies := make([]*hclsyntax.Body, len(bounds)-1)
	clean := make([]bool, len(bodies))
	// Lines and columns where each piece starts, counted once over the file.
	starts := make([]hcl.Pos, len(bodies))
	starts[0] = hcl.InitialPos
	for k := 1; k < len(bodies); k++ {
		prev := starts[k-1]
		starts[k] = hcl.Pos{Line: prev.Line + bytes.Count(src[bounds[k-1]:bounds[k]], []byte("\n")), Column: 1, Byte: bounds[k]}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for k := range bodies {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f, diags := hclsyntax.ParseConfig(src[bounds[k]:bounds[k+1]], name, starts[k])
			if f == nil || len(diags) > 0 {
				return
			}
			b, ok := f.Body.(*hclsyntax.Body)
			if !ok || len(b.Attributes) > 0 {
				return
			}
			bodies[k], clean[k] = b, true
		}()
	}
	wg.Wait()
	n := 0
	for k := range bodies {
		if !clean[k] {
			return nil
		}
		n += len(bodies[k].Blocks)
	}
	first, last := bodies[0], bodies[len(bodies)-1]
	body := &hclsyntax.Body{
		Attributes: hclsyntax.Attributes{},
		Blocks:     make(hclsyntax.Blocks, 0, n),
		SrcRange:   hcl.RangeBetween(first.SrcRange, last.SrcRange),
		EndRange:   last.EndRange,
	}
	for _, b := range bodies {
		body.Blocks = append(body.Blocks, b.Blocks...)
	}
	return body
}
