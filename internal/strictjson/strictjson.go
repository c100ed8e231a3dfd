package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"

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
func Check(data []byte, v any) error {
	if err := jsonlimit.Check(data, jsonlimit.Limits{}); err != nil {
		return err
	}
	w := &walker{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	var t reflect.Type
	if v != nil {
		t = reflect.TypeOf(v)
	}
	if err := w.value(t); err != nil {
		return err
	}
	if _, err := w.dec.Token(); err != io.EOF {
		line, col := position(data, w.dec.InputOffset()-1)
		return &Error{Path: "$", Line: line, Column: col, Detail: "the document holds more than one JSON value", Err: ErrTrailing}
	}
	return nil
}

type walker struct {
	data []byte
	dec  *json.Decoder
	// path is the way to the value being walked, one step per level: a key, or an index (key "" and index ≥ 0);
	// its text is made only for an error.
	path []step
}

type step struct {
	key   string
	index int // -1 for a key
}

// pathText is the JSON path of the value being walked: $, then .name, ["…"] or [i] per step.
func (w *walker) pathText() string {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range w.path {
		if s.index >= 0 {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		} else {
			b.WriteString(member(s.key))
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

// value walks one JSON value at w.path against t.
func (w *walker) value(t reflect.Type) error {
	tok, err := w.dec.Token()
	if err != nil {
		if err == io.EOF && len(w.path) > 0 {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	t = shape(t)
	switch tok {
	case json.Delim('{'):
		return w.object(t)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		w.path = append(w.path, step{})
		for i := 0; w.dec.More(); i++ {
			w.path[len(w.path)-1] = step{index: i}
			if err := w.value(elem); err != nil {
				return err
			}
		}
		w.path = w.path[:len(w.path)-1]
		_, err := w.dec.Token() // ']'
		return err
	}
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
	var seen keySet
	w.path = append(w.path, step{index: -1})
	defer func() { w.path = w.path[:len(w.path)-1] }()
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		w.path[len(w.path)-1] = step{key: key, index: -1}
		if seen.add(key) {
			return w.refuse(fmt.Sprintf("the key %s appears twice in this object: a reader could take either one", strconv.Quote(key)), ErrDuplicateKey)
		}
		var next reflect.Type
		if fields != nil {
			ft, ok := fields.byName[key]
			if !ok {
				for _, name := range fields.names {
					if strings.EqualFold(name, key) {
						return w.refuse(fmt.Sprintf("the key %s differs from the field %s only by case: write %s", strconv.Quote(key), strconv.Quote(name), strconv.Quote(name)), ErrCaseFolded)
					}
				}
				return w.refuse(fmt.Sprintf("%s is not a field of this object", strconv.Quote(key)), ErrUnknownField)
			}
			next = ft
		} else {
			next = elem
		}
		if err := w.value(next); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // '}'
	return err
}

// keySet is the keys of one object so far: a short list (most objects have a few keys, and a list costs no
// allocation per object), a map past that.
type keySet struct {
	few  []string
	many map[string]bool
}

// add records key and reports whether it was there already.
func (k *keySet) add(key string) bool {
	if k.many != nil {
		if k.many[key] {
			return true
		}
		k.many[key] = true
		return false
	}
	for _, s := range k.few {
		if s == key {
			return true
		}
	}
	if len(k.few) < 16 {
		k.few = append(k.few, key)
		return false
	}
	k.many = map[string]bool{key: true}
	for _, s := range k.few {
		k.many[s] = true
	}
	return false
}

// refuse locates the key just read, at its opening quote.
func (w *walker) refuse(detail string, kind error) error {
	line, col := position(w.data, keyStart(w.data, w.dec.InputOffset()))
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

// keyStart is the offset of the opening quote of the string that ends at end (just past its closing quote).
func keyStart(data []byte, end int64) int64 {
	for i := end - 2; i > 0; i-- {
		if data[i] != '"' {
			continue
		}
		backslashes := 0
		for j := i - 1; j >= 0 && data[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return i
		}
	}
	return 0
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
