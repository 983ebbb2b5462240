package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"
)

// encoding/json, even with DisallowUnknownFields, lets two kinds of key
// through that a strict reading must refuse: a key given twice in one object
// (the last one silently wins, so two readers of the same body can see two
// different requests) and a key that names a field only when case is ignored
// ({"Title":…} sets Title). checkKeys finds both by walking the body's
// tokens alongside the Go type it is decoded into.

// keyError is a key that checkKeys refuses.
type keyError struct {
	path string // where the key is, such as "workspace.path" or "items[2].name"
	msg  string // what is wrong with it, after the quoted path
}

func (e *keyError) Error() string { return fmt.Sprintf("%q %s", e.path, e.msg) }

// under puts err's key inside the object key or array index seg.
func under(err error, seg string) error {
	var ke *keyError
	if !errors.As(err, &ke) {
		return err
	}
	switch {
	case ke.path == "":
		ke.path = seg
	case strings.HasPrefix(ke.path, "["):
		ke.path = seg + ke.path
	default:
		ke.path = seg + "." + ke.path
	}
	return err
}

// checkKeys checks that every object in body (its first JSON value) has each
// key at most once, and that every key of an object decoded into a struct
// is exactly the name of one of its fields: its json tag name, or its Go
// name when it has none (the fields of embedded structs count). Map keys
// may be anything; values that decode themselves (json.Unmarshaler, such as
// json.RawMessage) and values of type any are checked for duplicates only.
// body must already have decoded into t without error.
func checkKeys(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers are skipped: spare parsing them as floats
	return walkValue(dec, t)
}

// walkValue reads one value. t is the Go type it decodes into, nil when any
// key is acceptable.
func walkValue(dec *json.Decoder, t reflect.Type) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("read JSON: %w", err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar has no keys
	}
	t = shapeOf(t)
	if delim == '{' {
		return walkObject(dec, t)
	}
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	for i := 0; dec.More(); i++ {
		if err := walkValue(dec, elem); err != nil {
			return under(err, fmt.Sprintf("[%d]", i))
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return fmt.Errorf("read JSON: %w", err)
	}
	return nil
}

// walkObject reads the members of an object whose '{' has been read.
func walkObject(dec *json.Decoder, t reflect.Type) error {
	var fields map[string]reflect.Type // the struct's field names; nil: any key
	var elem reflect.Type              // a map's value type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = structFields(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("read JSON: %w", err)
		}
		key, _ := tok.(string) // the decoder has checked that it is one
		if seen[key] {
			return &keyError{path: key, msg: "appears more than once in its object"}
		}
		seen[key] = true
		vt := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				return unknownKey(key, fields)
			}
			vt = ft
		}
		if err := walkValue(dec, vt); err != nil {
			return under(err, key)
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return fmt.Errorf("read JSON: %w", err)
	}
	return nil
}

// unknownKey refuses a key that is no field's exact name. encoding/json has
// accepted the body, so the key matches a field when case is ignored: name
// that field.
func unknownKey(key string, fields map[string]reflect.Type) error {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return &keyError{path: key, msg: fmt.Sprintf("is not a known field: field names are case-sensitive (did you mean %q?)", name)}
		}
	}
	return &keyError{path: key, msg: "is not a known field"}
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// shapeOf is the type whose keys a JSON value is checked against: t without
// its pointers, or nil when t decodes itself (json.Unmarshaler) or is nil.
func shapeOf(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
			return nil
		}
		if t.Kind() != reflect.Pointer {
			return t
		}
		t = t.Elem()
	}
	return nil
}

// fieldCache holds structFields' answer per struct type.
var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// structFields maps the JSON names of a struct's fields to their types, as
// encoding/json names them: the tag's name, else the Go name; unexported
// and "-" fields left out; the fields of an embedded struct without a tag
// promoted, a shallower field hiding a deeper one of the same name.
func structFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	depth := map[string]int{}
	expanded := map[reflect.Type]bool{} // stops a struct that embeds itself
	var add func(t reflect.Type, d int)
	add = func(t reflect.Type, d int) {
		expanded[t] = true
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if !validTagName(name) {
				name = ""
			}
			if sf.Anonymous {
				ft := sf.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name == "" && ft.Kind() == reflect.Struct {
					if !expanded[ft] {
						add(ft, d+1)
					}
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if old, ok := depth[name]; ok && old <= d {
				continue
			}
			fields[name], depth[name] = sf.Type, d
		}
	}
	add(t, 0)
	fieldCache.Store(t, fields)
	return fields
}

// validTagName is encoding/json's rule for a usable tag name; a field with
// any other keeps its Go name.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
