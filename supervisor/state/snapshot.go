package state

import (
	"bufio"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// A snapshot is the JSON encoding/json writes for data (an Encoder's
// Encode, its final newline included), and Restore reads it back with
// encoding/json. Persist writes the same bytes faster: the tasks, which a
// busy cluster has by the hundred thousand, are written by the task codec
// (codec.go) and every other field by encoding/json.

// snapshotField is one JSON field of data, in declaration order.
type snapshotField struct {
	name      string
	index     int
	omitEmpty bool
}

var (
	snapshotFields = dataFields()
	tasksField     = func() int {
		f, _ := reflect.TypeFor[data]().FieldByName("Tasks")
		return f.Index[0]
	}()
)

// dataFields reads data's JSON fields from its tags, as encoding/json does,
// so that a field added to data is in snapshots without more code here.
func dataFields() []snapshotField {
	t := reflect.TypeFor[data]()
	var out []snapshotField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		if f.Anonymous {
			panic("state: snapshot encoding does not handle embedded fields (" + f.Name + ")")
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		field := snapshotField{name: name, index: i}
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "":
			case "omitempty":
				field.omitEmpty = true
			default:
				panic(fmt.Sprintf("state: snapshot encoding does not handle the json option %q of %s", o, f.Name))
			}
		}
		out = append(out, field)
	}
	return out
}

// encode writes the snapshot as encoding/json's Encoder writes the state it
// copies.
func (s *snapshot) encode(w *bufio.Writer) error {
	v := reflect.ValueOf(s.d).Elem()
	buf := []byte{'{'}
	first := true
	for _, f := range snapshotFields {
		fv := v.Field(f.index)
		isTasks := f.index == tasksField
		if f.omitEmpty && (isTasks && len(s.tasks) == 0 || !isTasks && emptyJSONValue(fv)) {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(append(append(buf, '"'), f.name...), '"', ':')
		if isTasks {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
			if err := s.encodeTasks(w); err != nil {
				return err
			}
			continue
		}
		b, err := json.Marshal(fv.Interface())
		if err != nil {
			return fmt.Errorf("encode %s: %w", f.name, err)
		}
		buf = append(buf, b...)
	}
	buf = append(buf, '}', '\n')
	_, err := w.Write(buf)
	return err
}

// encodeTasks writes the tasks as encoding/json writes a map[string]*Task:
// sorted by key, each in json.Marshal's layout.
func (s *snapshot) encodeTasks(w *bufio.Writer) error {
	// Sorted by key through a small index: moving whole tasks is slower.
	type keyAt struct {
		key string
		at  int
	}
	order := make([]keyAt, len(s.tasks))
	for i := range s.tasks {
		order[i] = keyAt{s.tasks[i].key, i}
	}
	slices.SortFunc(order, func(a, b keyAt) int { return strings.Compare(a.key, b.key) })
	buf := make([]byte, 0, 64<<10)
	buf = append(buf, '{')
	for i, o := range order {
		kt := &s.tasks[o.at]
		if i > 0 {
			buf = append(buf, ',')
		}
		start := len(buf)
		var ok bool
		if buf, ok = appendString(buf, kt.key); ok {
			buf, ok = appendTask(append(buf, ':'), &kt.task, &compactTask)
		}
		if !ok {
			key, err := json.Marshal(kt.key)
			if err != nil {
				return fmt.Errorf("encode task %q: %w", kt.key, err)
			}
			task, err := json.Marshal(&kt.task)
			if err != nil {
				return fmt.Errorf("encode task %q: %w", kt.key, err)
			}
			buf = append(append(append(buf[:start], key...), ':'), task...)
		}
		if len(buf) >= 60<<10 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, '}')
	_, err := w.Write(buf)
	return err
}

// emptyJSONValue is encoding/json's test for omitempty.
func emptyJSONValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
