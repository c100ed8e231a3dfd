package money

import (
	"math"
	"strconv"
	"strings"
)

// significant is how many significant digits a figure under a dollar keeps: enough that a cap and a cost near it
// read apart, and that no non-zero figure reads as zero.
const significant = 4

// Amount renders a dollar figure without its sign: at least two decimals ("2.00", "1234.57"), and under a few
// dollars as many more as four significant digits need, trailing zeros beyond the cents trimmed ("0.05634",
// "0.00005", "1.005"). Zero is "0.00".
func Amount(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	if v == 0 {
		return "0.00"
	}
	decimals := 2
	if d := significant - int(math.Floor(math.Log10(math.Abs(v)))) - 1; d > decimals {
		decimals = d
	}
	return trim(strconv.FormatFloat(v, 'f', decimals, 64))
}

// USD renders a dollar figure with its sign: "$0.05634", "$12.50", "-$0.10".
func USD(v float64) string {
	if v < 0 {
		return "-$" + Amount(-v)
	}
	return "$" + Amount(v)
}

// Distinct renders two dollar figures (a cap and a reading) so that two different ones never read equal: as
// Amount, or with every digit they need when Amount would show them the same.
func Distinct(a, b float64) (string, string) {
	x, y := Amount(a), Amount(b)
	if x == y && a != b {
		x, y = exact(a), exact(b)
	}
	return x, y
}

// exact is the shortest decimal that reads back as v, with at least two decimals.
func exact(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	dot := strings.IndexByte(s, '.')
	switch {
	case dot < 0:
		return s + ".00"
	case len(s)-dot-1 < 2:
		return s + strings.Repeat("0", 2-(len(s)-dot-1))
	}
	return s
}

// trim drops trailing zeros after the cents.
func trim(s string) string {
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		return s
	}
	end := len(s)
	for end > dot+3 && s[end-1] == '0' {
		end--
	}
	return s[:end]
}
