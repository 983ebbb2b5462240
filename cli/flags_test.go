package cli

import (
	"flag"
	"io"
	"reflect"
	"testing"
)

func newTestFlagSet(g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerGlobals(fs, g)
	fs.String("task", "", "")
	return fs
}

func TestParseInterspersed(t *testing.T) {
	cases := []struct {
		args    []string
		wantPos []string
		json    bool
		err     bool
	}{
		{[]string{"s1", "-json"}, []string{"s1"}, true, false},
		{[]string{"-json", "s1"}, []string{"s1"}, true, false},
		{[]string{"s1", "--", "-json"}, []string{"s1", "-json"}, false, false},
		{[]string{"s1", "hello", "-json", "x"}, []string{"s1", "hello", "x"}, true, false},
		{[]string{"s1", "-task", "t", "--", "--", "-x"}, []string{"s1", "--", "-x"}, false, false},
		{[]string{"s1", "-nope"}, nil, false, true},
		{[]string{"-task"}, nil, false, true},
		{nil, nil, false, false},
	}
	for _, tc := range cases {
		var g globals
		pos, err := parseInterspersed(newTestFlagSet(&g), tc.args)
		if (err != nil) != tc.err {
			t.Errorf("%v: err %v", tc.args, err)
			continue
		}
		if tc.err {
			continue
		}
		if !reflect.DeepEqual(pos, tc.wantPos) || g.json != tc.json {
			t.Errorf("%v: pos %q json %v, want %q %v", tc.args, pos, g.json, tc.wantPos, tc.json)
		}
	}
}
