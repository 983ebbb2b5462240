package state

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// frozenCommands is every command type this build knows, with the type
// byte it is persisted under and its body. The numbers are in raft logs and
// snapshots: a command may be added here, never renumbered or removed.
var frozenCommands = []struct {
	name string
	typ  CommandType
	wire byte
	body any
}{
	{"CmdRegisterNode", CmdRegisterNode, 1, &RegisterNodeBody{}},
	{"CmdCreateTask", CmdCreateTask, 2, &CreateTaskBody{}},
	{"CmdSetTaskState", CmdSetTaskState, 3, &SetTaskStateBody{}},
	{"CmdCreateSession", CmdCreateSession, 4, &CreateSessionBody{}},
	{"CmdSetSessionState", CmdSetSessionState, 5, &SetSessionStateBody{}},
	{"CmdSetResumeToken", CmdSetResumeToken, 6, &SetResumeTokenBody{}},
	{"CmdPutExecutor", CmdPutExecutor, 7, &PutExecutorBody{}},
	{"CmdSetExecutorState", CmdSetExecutorState, 8, &SetExecutorStateBody{}},
	{"CmdPutMessage", CmdPutMessage, 9, &PutMessageBody{}},
	{"CmdClaimLease", CmdClaimLease, 10, &ClaimLeaseBody{}},
	{"CmdReleaseLease", CmdReleaseLease, 11, &ReleaseLeaseBody{}},
	{"CmdReclaimLease", CmdReclaimLease, 12, &ReleaseLeaseBody{}},
	{"CmdDeleteSession", CmdDeleteSession, 13, &DeleteSessionBody{}},
	{"CmdPublishEvent", CmdPublishEvent, 14, &PublishEventBody{}},
	{"CmdSetLeaseNonce", CmdSetLeaseNonce, 15, &SetLeaseNonceBody{}},
	{"CmdDeleteTask", CmdDeleteTask, 16, &DeleteTaskBody{}},
	{"CmdRecoverExecutors", CmdRecoverExecutors, 17, &RecoverExecutorsBody{}},
	{"CmdAppendMessage", CmdAppendMessage, 18, &AppendMessageBody{}},
	{"CmdRequestStop", CmdRequestStop, 0x80 | 19, &RequestStopBody{}},
	{"CmdUpsertPermission", CmdUpsertPermission, 0x80 | 20, &UpsertPermissionBody{}},
	{"CmdCancelPermissions", CmdCancelPermissions, 0x80 | 21, &CancelPermissionsBody{}},
	{"CmdSetSessionMeta", CmdSetSessionMeta, 0x80 | 22, &SetSessionMetaBody{}},
}

// Every CommandType constant declared in the package is a registered
// command, under the number it always had and with the body it always
// decoded into; nothing else is registered.
func TestCommandTypesAreFrozen(t *testing.T) {
	declared := commandTypeConstants(t)
	var frozen []string
	for _, c := range frozenCommands {
		frozen = append(frozen, c.name)
		if byte(c.typ) != c.wire {
			t.Errorf("%s is %#x, persisted as %#x: never renumber a command", c.name, byte(c.typ), c.wire)
		}
		body := bodyFor(c.typ)
		if body == nil {
			t.Errorf("%s (%#x) is not registered", c.name, c.wire)
			continue
		}
		if reflect.TypeOf(body) != reflect.TypeOf(c.body) {
			t.Errorf("%s decodes into %T, want %T", c.name, body, c.body)
		}
		if bodyFor(c.typ) == body {
			t.Errorf("%s: the body constructor returns the same value twice", c.name)
		}
	}
	sort.Strings(frozen)
	if !reflect.DeepEqual(declared, frozen) {
		t.Errorf("CommandType constants declared %v;\nfrozenCommands lists %v\n(add a new command to frozenCommands)", declared, frozen)
	}
	n := 0
	for _, c := range commands {
		if c != nil {
			n++
		}
	}
	if n != len(frozenCommands) {
		t.Errorf("%d command types registered, %d declared", n, len(frozenCommands))
	}
}

// commandTypeConstants lists, sorted, the constants of type CommandType
// the package's source declares (IgnoreUnknownFlag aside), wherever they
// are declared.
func commandTypeConstants(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			var typ ast.Expr // a spec without type or values repeats the previous one
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Type != nil || len(vs.Values) > 0 {
					typ = vs.Type
				}
				if id, ok := typ.(*ast.Ident); !ok || id.Name != "CommandType" {
					continue
				}
				for _, n := range vs.Names {
					if n.Name != "IgnoreUnknownFlag" {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("found no CommandType constants in the package's source")
	}
	sort.Strings(names)
	return names
}

// Registering a command type twice panics (at start, in init), and leaves
// the first registration in place.
func TestRegisteringACommandTypeTwicePanics(t *testing.T) {
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if r == nil {
				t.Errorf("%s did not panic", what)
			} else if !strings.Contains(fmt.Sprint(r), "registered") {
				t.Errorf("%s panicked with %v", what, r)
			}
		}()
		f()
	}
	var r registry
	r.register(CmdPutMessage, newBody[PutMessageBody], applyPutMessage)
	mustPanic("a second registration", func() { r.register(CmdPutMessage, newBody[CreateTaskBody], applyCreateTask) })
	if _, ok := r[CmdPutMessage].newBody().(*PutMessageBody); !ok {
		t.Error("the second registration replaced the first")
	}
	mustPanic("a registration without an apply function", func() { r.register(CmdCreateTask, newBody[CreateTaskBody], nil) })
	mustPanic("a registration without a body", func() { r.register(CmdCreateTask, nil, applyCreateTask) })

	// The package's own registry refuses a number already taken.
	mustPanic("registering CmdRequestStop again", func() { register(CmdRequestStop, newBody[RequestStopBody], applyRequestStop) })
	mustPanic("reusing CmdPutMessage's number", func() { register(CommandType(9), newBody[CreateTaskBody], applyCreateTask) })
	if _, ok := bodyFor(CmdPutMessage).(*PutMessageBody); !ok {
		t.Error("a refused registration changed CmdPutMessage")
	}
}

// An unknown command type does not decode: an error, unless it carries
// IgnoreUnknownFlag, which decodes as unknown (ok=false) so the FSM skips it.
func TestUnknownCommandTypeIsNotDecoded(t *testing.T) {
	env := []byte(`{"key":"k","now":"2026-11-29T12:00:00Z","body":{}}`)
	for _, typ := range []CommandType{0, 100, 0x7f} {
		cmd, ok, err := DecodeCommand(append([]byte{byte(typ), bodyVersion}, env...))
		if want := fmt.Sprintf("unknown command type %d", typ); err == nil || err.Error() != want || ok || !reflect.DeepEqual(cmd, Command{}) {
			t.Errorf("type %d: decoded %+v ok=%v err=%v; want error %q", typ, cmd, ok, err, want)
		}
	}
	for _, typ := range []CommandType{IgnoreUnknownFlag, IgnoreUnknownFlag | 100, 0xff} {
		cmd, ok, err := DecodeCommand(append([]byte{byte(typ), bodyVersion}, env...))
		if err != nil || ok || !reflect.DeepEqual(cmd, Command{Type: typ}) {
			t.Errorf("type %#x: decoded %+v ok=%v err=%v; want it skipped", typ, cmd, ok, err)
		}
	}
	for _, c := range frozenCommands {
		data, err := Command{Type: c.typ, Key: "k", Now: t0, Body: c.body}.Encode()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		cmd, ok, err := DecodeCommand(data)
		if err != nil || !ok || cmd.Type != c.typ || !reflect.DeepEqual(cmd.Body, c.body) || !cmd.Now.Equal(t0) {
			t.Errorf("%s: decoded %+v ok=%v err=%v", c.name, cmd, ok, err)
		}
	}
}
