package target

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/stalefuzz/stalefuzz/proxy/suggest"
)

// Error is one problem in a target file.
type Error struct {
	// File is the name the file was read under.
	File string
	// Line is the 1-based line of the offending key or value; 0 for the
	// file as a whole.
	Line int
	// Field is the dotted path of the field ("controllers[0].command");
	// empty for the file as a whole.
	Field string
	// Err is what is wrong, with a suggestion where there is one.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Load reads the target file at path. Relative paths in it are resolved
// against its directory. Every problem found is returned, joined, each an
// *Error.
func Load(path string) (*Target, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Err: fmt.Errorf("unable to read target file: %w", err)}
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, &Error{File: path, Err: fmt.Errorf("unable to resolve the target file's directory: %w", err)}
	}
	return Parse(path, dir, b)
}

// Parse parses a target file's contents; name is what errors call the file
// and dir is its Dir.
func Parse(name, dir string, data []byte) (*Target, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, syntaxError(name, err)
	}
	if len(root.Content) == 0 {
		return nil, &Error{File: name, Err: errors.New("empty: a target needs at least name, controllers and workload")}
	}
	t := &Target{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(t); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, syntaxError(name, err)
		}
		var errs []error
		for _, msg := range te.Errors {
			errs = append(errs, typeError(name, msg))
		}
		return nil, errors.Join(errs...)
	}
	t.Dir = dir
	if err := t.addEnvPatches(os.Getenv(PatchesEnv)); err != nil {
		return nil, &Error{File: name, Err: err}
	}
	if err := t.validate(&positions{file: name, root: root.Content[0]}); err != nil {
		return nil, err
	}
	return t, nil
}

var (
	unknownFieldRE = regexp.MustCompile(`^line (\d+): field (\S+) not found in type target\.(\w+)$`)
	lineRE         = regexp.MustCompile(`^line (\d+): (.*)$`)
)

// typeError turns one of yaml.v3's decoding messages into an *Error: an
// unknown field gets the closest known field as a suggestion.
func typeError(file, msg string) error {
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		fields := fieldsOf(m[3])
		err := fmt.Errorf("field %q not known in %s (fields: %s)", m[2], m[3], strings.Join(fields, ", "))
		if s := closest(m[2], fields); s != "" {
			err = fmt.Errorf("field %q not known in %s: did you mean %q?", m[2], m[3], s)
		}
		return &Error{File: file, Line: line, Field: m[2], Err: err}
	}
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Err: errors.New(strings.ReplaceAll(m[2], "target.", ""))}
	}
	return &Error{File: file, Err: errors.New(msg)}
}

// types are the package's YAML types by name, for typeError's suggestions.
var yamlTypes = map[string]reflect.Type{}

func init() {
	for _, v := range []any{Target{}, Controller{}, Kubeconfig{}, Knob{}, Step{}, Apply{}, Object{}, Patch{}, Wait{}, Faults{}, Oracles{}, Kind{}, Count{}, Builtins{}, Kubelet{}, EndState{}} {
		t := reflect.TypeOf(v)
		yamlTypes[t.Name()] = t
	}
}

// fieldsOf lists the YAML keys of the named type, inline structs' included.
func fieldsOf(typeName string) []string {
	var out []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("yaml")
			key, opts, _ := strings.Cut(tag, ",")
			switch {
			case key == "-":
			case opts == "inline":
				walk(f.Type)
			case key != "":
				out = append(out, key)
			}
		}
	}
	if t, ok := yamlTypes[typeName]; ok {
		walk(t)
	}
	return out
}

// closest is the field of fields nearest key, if it is near enough to be a
// typo (an edit distance of at most a third of its length, at least 2).
func closest(key string, fields []string) string {
	return suggest.Closest(key, fields, max(2, len(key)/3))
}

// syntaxError attributes a yaml.v3 syntax error ("yaml: line 3: did not
// find expected key") to its line.
func syntaxError(file string, err error) *Error {
	msg, ok := strings.CutPrefix(err.Error(), "yaml: line ")
	if ok {
		if num, rest, ok := strings.Cut(msg, ": "); ok {
			if n, aerr := strconv.Atoi(num); aerr == nil {
				return &Error{File: file, Line: n, Err: fmt.Errorf("not valid YAML: %s", rest)}
			}
		}
	}
	return &Error{File: file, Err: fmt.Errorf("not valid YAML: %w", err)}
}

// positions finds the line of a field in the parsed file, for the errors of
// validate.
type positions struct {
	file string
	root *yaml.Node
}

// at returns an *Error at the line of the field whose path is given as keys
// and indexes ("controllers", 0, "command"): the deepest part of the path
// the file has.
func (p *positions) at(err error, path ...any) *Error {
	n, line := p.root, 0 // a Target built in Go has no file: no root, no line
	if n != nil {
		line = n.Line
	}
	var field strings.Builder
	for _, part := range path {
		switch k := part.(type) {
		case string:
			if field.Len() > 0 {
				field.WriteByte('.')
			}
			field.WriteString(k)
			if n != nil && n.Kind == yaml.MappingNode {
				var next *yaml.Node
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						line, next = n.Content[i].Line, n.Content[i+1]
					}
				}
				n = next
			} else {
				n = nil
			}
		case int:
			fmt.Fprintf(&field, "[%d]", k)
			if n != nil && n.Kind == yaml.SequenceNode && k < len(n.Content) {
				n = n.Content[k]
				line = n.Line
			} else {
				n = nil
			}
		}
	}
	return &Error{File: p.file, Line: line, Field: field.String(), Err: err}
}

// PatchesEnv names the environment variable whose patches Parse adds to a
// target file's controllers: one entry a line, NAME=FILE (a patch to
// controller NAME's own module) or NAME:MODULE=FILE (to a module it
// requires), FILE absolute or relative to the working directory, each
// appended to controller NAME's Patches. A command's --patch sets it, so
// that the processes it starts build and run the same patched binary.
const PatchesEnv = "STALEFUZZ_PATCHES"

// ParsePatchEntry parses one entry of PatchesEnv's format (a --patch
// value): the controller's name and the patch, its file made absolute.
func ParsePatchEntry(e string) (name string, p SourcePatch, err error) {
	lhs, file, ok := strings.Cut(e, "=")
	name, mod, _ := strings.Cut(lhs, ":")
	if !ok || name == "" || file == "" {
		return "", SourcePatch{}, fmt.Errorf("patch %q: want NAME=FILE, or NAME:MODULE=FILE for a module the controller requires", e)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", SourcePatch{}, fmt.Errorf("patch %q: %w", e, err)
	}
	return name, SourcePatch{File: abs, Module: mod}, nil
}

// addEnvPatches appends the patches of env (PatchesEnv's format) to the
// controllers they name.
func (t *Target) addEnvPatches(env string) error {
	for _, e := range strings.Split(env, "\n") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		name, p, err := ParsePatchEntry(e)
		if err != nil {
			return fmt.Errorf("%s: %w", PatchesEnv, err)
		}
		i := slices.IndexFunc(t.Controllers, func(c Controller) bool { return c.Name == name })
		if i < 0 {
			var names []string
			for _, c := range t.Controllers {
				names = append(names, c.Name)
			}
			return fmt.Errorf("%s: patch %s for controller %q: the target has no such controller (it has: %s)", PatchesEnv, p.File, name, strings.Join(names, ", "))
		}
		t.Controllers[i].Patches = append(t.Controllers[i].Patches, p)
	}
	return nil
}
