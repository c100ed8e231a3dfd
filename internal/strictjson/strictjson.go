package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/kewplan/kewplan/internal/jsonlimit"
)

// The kinds of refusal, wrapped by *Error.
var (
	ErrDuplicateKey = errors.New("duplicate key")
	ErrCaseFolded   = errors.New("key differs from a field's name only by case")
	ErrUnknownField = errors.New("unknown field")
	ErrTrailing     = errors.New("more than one JSON value")
)

// Error locates a refused key: Path is its JSON path ($.saved.Policy), Line and Column (1-based, bytes) of its
// opening quote. Detail says what is wrong in a sentence, Err is one of the Err* values.
type Error struct {
	Path         string
	Line, Column int
	Detail       string
	Err          error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (line %d, column %d): %s", e.Path, e.Line, e.Column, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// Decode decodes the one JSON value in data into v, a non-nil pointer, refusing what Check refuses and every
// field encoding/json would drop (DisallowUnknownFields). A document past jsonlimit's default depth, and data
// with more than one value, are refused too. Type errors are encoding/json's.
func Decode(data []byte, v any) error {
	checkErr := Check(data, v)
	var se *Error
	var le *jsonlimit.Error
	if errors.As(checkErr, &se) || errors.As(checkErr, &le) {
		return checkErr
	}
	// Malformed JSON (checkErr set) is reported as the decoder reports it, with its own offsets.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	return checkErr
}

// Check walks data against the type of v (a pointer, or a value whose type describes the document) and returns
// an *Error for the first duplicate, case-folded or unknown key; malformed JSON is a *json.SyntaxError. It bounds
// nesting at jsonlimit.DefaultMaxDepth first (a *jsonlimit.Error), which also bounds the walk's recursion.
//
// The walk is its own scanner over the bytes: keys are compared where they lie in data (a key with an escape or
// a byte outside UTF-8 is decoded first, as encoding/json would decode it), so a document is checked without an
// allocation per token.
func Check(data []byte, v any) error {
	if err := jsonlimit.Check(data, jsonlimit.Limits{}); err != nil {
		return err
	}
	w := &walker{data: data}
	var t reflect.Type
	if v != nil {
		t = reflect.TypeOf(v)
	}
	err := w.value(t)
	if err == nil {
		if w.space(); w.off < len(w.data) {
			line, col := position(data, int64(w.off))
			return &Error{Path: "$", Line: line, Column: col, Detail: "the document holds more than one JSON value", Err: ErrTrailing}
		}
		return nil
	}
	if err == errSyntax {
		// Malformed JSON is reported as encoding/json reports it, with its offset.
		var any any
		if jerr := json.Unmarshal(data, &any); jerr != nil {
			return jerr
		}
		return fmt.Errorf("malformed JSON at byte %d", w.off)
	}
	return err
}

// errSyntax is the walk's own signal of malformed JSON; Check replaces it with encoding/json's error.
var errSyntax = errors.New("malformed JSON")

type walker struct {
	data []byte
	off  int // the next byte to read
	// path is the way to the value being walked, one step per level: a key, or an index (key "" and index ≥ 0);
	// its text is made only for an error.
	path []step
	// keyAt is the offset of the opening quote of the key just read.
	keyAt int
}

type step struct {
	key   []byte // decoded
	index int    // -1 for a key
}

// pathText is the JSON path of the value being walked: $, then .name, ["…"] or [i] per step.
func (w *walker) pathText() string {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range w.path {
		if s.index >= 0 {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		} else {
			b.WriteString(member(string(s.key)))
		}
	}
	return b.String()
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// shape is what the walk knows of a Go type: nil (anything goes, duplicates are still refused).
func shape(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessage || t.Kind() == reflect.Interface {
		return nil
	}
	return t
}

// space skips white space.
func (w *walker) space() {
	for w.off < len(w.data) {
		switch w.data[w.off] {
		case ' ', '\t', '\n', '\r':
			w.off++
		default:
			return
		}
	}
}

// value walks one JSON value at w.path against t.
func (w *walker) value(t reflect.Type) error {
	w.space()
	if w.off >= len(w.data) {
		return errSyntax
	}
	switch c := w.data[w.off]; {
	case c == '{':
		w.off++
		return w.object(shape(t))
	case c == '[':
		w.off++
		return w.array(shape(t))
	case c == '"':
		_, err := w.str()
		return err
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	case c == 'n':
		return w.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return w.number()
	}
	return errSyntax
}

// empty reads the closing bracket of an array or object just opened, if it is the next byte.
func (w *walker) empty(closing byte) bool {
	w.space()
	if w.off < len(w.data) && w.data[w.off] == closing {
		w.off++
		return true
	}
	return false
}

// next reads what follows an element or member: a comma (more follow) or the closing bracket.
func (w *walker) next(closing byte) (more bool, err error) {
	w.space()
	if w.off >= len(w.data) {
		return false, errSyntax
	}
	c := w.data[w.off]
	w.off++
	switch c {
	case ',':
		return true, nil
	case closing:
		return false, nil
	}
	return false, errSyntax
}

// array walks an array's elements; its opening bracket was read.
func (w *walker) array(t reflect.Type) error {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	if w.empty(']') {
		return nil
	}
	w.path = append(w.path, step{})
	for i := 0; ; i++ {
		w.path[len(w.path)-1] = step{index: i}
		if err := w.value(elem); err != nil {
			return err
		}
		more, err := w.next(']')
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	w.path = w.path[:len(w.path)-1]
	return nil
}

// object walks an object's members; its opening brace was read.
func (w *walker) object(t reflect.Type) error {
	var fields *fieldSet
	var elem reflect.Type
	switch {
	case t != nil && t.Kind() == reflect.Struct:
		fields = fieldsOf(t)
	case t != nil && t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	if w.empty('}') {
		return nil
	}
	var seen keySet
	w.path = append(w.path, step{index: -1})
	for {
		w.space()
		if w.off >= len(w.data) || w.data[w.off] != '"' {
			return errSyntax
		}
		w.keyAt = w.off
		key, err := w.str()
		if err != nil {
			return err
		}
		w.path[len(w.path)-1] = step{key: key, index: -1}
		if seen.add(key) {
			return w.refuse(fmt.Sprintf("the key %s appears twice in this object: a reader could take either one", strconv.Quote(string(key))), ErrDuplicateKey)
		}
		var next reflect.Type
		if fields != nil {
			ft, ok := fields.byName[string(key)]
			if !ok {
				for _, name := range fields.names {
					if strings.EqualFold(name, string(key)) {
						return w.refuse(fmt.Sprintf("the key %s differs from the field %s only by case: write %s", strconv.Quote(string(key)), strconv.Quote(name), strconv.Quote(name)), ErrCaseFolded)
					}
				}
				return w.refuse(fmt.Sprintf("%s is not a field of this object", strconv.Quote(string(key))), ErrUnknownField)
			}
			next = ft
		} else {
			next = elem
		}
		w.space()
		if w.off >= len(w.data) || w.data[w.off] != ':' {
			return errSyntax
		}
		w.off++
		if err := w.value(next); err != nil {
			return err
		}
		more, err := w.next('}')
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	w.path = w.path[:len(w.path)-1]
	return nil
}

// str reads a string at w.off (its opening quote) and returns its decoded bytes: a slice of data when it holds
// no escape and only UTF-8, else what encoding/json decodes it to (invalid UTF-8 becomes U+FFFD there).
func (w *walker) str() ([]byte, error) {
	start := w.off + 1
	plain := true
	for i := start; i < len(w.data); i++ {
		switch c := w.data[i]; {
		case c == '"':
			w.off = i + 1
			raw := w.data[start:i]
			if plain || utf8.Valid(raw) && bytes.IndexByte(raw, '\\') < 0 {
				return raw, nil
			}
			var s string
			if err := json.Unmarshal(w.data[start-1:i+1], &s); err != nil {
				return nil, errSyntax
			}
			return []byte(s), nil
		case c == '\\':
			plain = false
			i++ // the escaped byte; encoding/json's decode above checks the escape
		case c < 0x20:
			w.off = i
			return nil, errSyntax
		case c >= 0x80:
			plain = false
		}
	}
	w.off = len(w.data)
	return nil, errSyntax
}

// literal reads true, false or null.
func (w *walker) literal(word string) error {
	if !bytes.HasPrefix(w.data[w.off:], []byte(word)) {
		return errSyntax
	}
	w.off += len(word)
	return nil
}

// number reads a number as JSON's grammar has it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (w *walker) number() error {
	d := w.data
	i := w.off
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case digits() == 0:
		return errSyntax
	}
	if i < len(d) && d[i] == '.' {
		i++
		if digits() == 0 {
			return errSyntax
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			return errSyntax
		}
	}
	w.off = i
	return nil
}

// keySet is the keys of one object so far: a short array (most objects have a few keys, and an array costs no
// allocation), a map past that.
type keySet struct {
	few  [16][]byte
	n    int
	many map[string]bool
}

// add records key and reports whether it was there already.
func (k *keySet) add(key []byte) bool {
	if k.many != nil {
		if k.many[string(key)] {
			return true
		}
		k.many[string(key)] = true
		return false
	}
	for _, s := range k.few[:k.n] {
		if bytes.Equal(s, key) {
			return true
		}
	}
	if k.n < len(k.few) {
		k.few[k.n] = key
		k.n++
		return false
	}
	k.many = map[string]bool{string(key): true}
	for _, s := range k.few {
		k.many[string(s)] = true
	}
	return false
}

// refuse locates the key just read, at its opening quote.
func (w *walker) refuse(detail string, kind error) error {
	line, col := position(w.data, int64(w.keyAt))
	return &Error{Path: w.pathText(), Line: line, Column: col, Detail: detail, Err: kind}
}

// member is the path step of key: .name for a plain name, else ["…"].
func member(key string) string {
	plain := key != ""
	for i, r := range key {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return "." + key
	}
	return "[" + strconv.Quote(key) + "]"
}

// position is the 1-based line and column of byte offset off in data.
func position(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	return line, int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
}

// fieldSet is a struct type's JSON fields as encoding/json sees them: names (tag name or field name) and the type
// each decodes into.
type fieldSet struct {
	byName map[string]reflect.Type
	names  []string
}

var fieldCache sync.Map // reflect.Type → *fieldSet

func fieldsOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(*fieldSet)
	}
	fs := &fieldSet{byName: map[string]reflect.Type{}}
	collectFields(t, fs, map[reflect.Type]bool{})
	fieldCache.Store(t, fs)
	return fs
}

// collectFields follows encoding/json's rules: exported fields, `json:"name"` tags, "-" skipped, the fields of an
// untagged embedded struct promoted (a shallower field wins over a deeper one of the same name).
func collectFields(t reflect.Type, fs *fieldSet, visiting map[reflect.Type]bool) {
	if visiting[t] {
		return
	}
	visiting[t] = true
	defer delete(visiting, t)
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := fs.byName[name]; !dup {
			fs.byName[name] = f.Type
			fs.names = append(fs.names, name)
		}
	}
	for _, et := range embedded {
		collectFields(et, fs, visiting)
	}
}
