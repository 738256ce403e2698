package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// A model is the YAML file as the config package's structs describe it.
type model struct {
	root *section
	// undocumented lists the fields that are YAML keys but have no doc
	// comment, as "config.Rule.Prefix (auth.rules[].prefix)".
	undocumented []string
	// scalarDocs maps a kind of value written as a string ("duration",
	// "size") to the doc comment of the Go type that parses it.
	scalarDocs map[string]string
	// pkgs are the module-relative directories of the packages whose
	// structs the model comes from, in the order they were read.
	pkgs []string
}

// A section is one YAML mapping of the file: the top level, or the value
// of a key such as federation, or each item of a list such as
// federation.endpoints[].
type section struct {
	// path is the YAML path: "" at the top level, list items as "[]"
	// ("federation.endpoints[]"), the values of a mapping of names as
	// ".<name>".
	path string
	// via is the key whose value the section is; nil at the top level.
	via *key
	// typeDoc is the doc comment of the struct type.
	typeDoc string
	keys    []*key
}

// A key is one YAML key of a section.
type key struct {
	in     *section
	path   string // "federation.endpoints[].url"
	name   string // "url"
	goName string // the Go field: "URL"
	field  string // struct and field, for messages: "endpoint.Config.URL"
	typ    string // how the value is written: "string", "list of strings"
	doc    string // the field's doc comment
	// sub is the section of a key whose value is a mapping or holds
	// mappings, and container says how: "" (it is one), "list" (a list
	// of them) or "map" (a mapping of names to them).
	sub       *section
	container string
}

// A pkg is one parsed Go package.
type pkg struct {
	name  string
	dir   string // module-relative, slash-separated
	types map[string]*decl
	// parsers are the types with an UnmarshalYAML method: they read
	// themselves from a YAML scalar, however their Go type looks.
	parsers map[string]bool
}

// A decl is one type declaration, with the file it is in (for its
// imports).
type decl struct {
	pkg  *pkg
	file *ast.File
	name string
	doc  string
	typ  ast.Expr
}

// loader finds the packages a struct refers to.
type loader interface {
	// load returns the package of an import path, nil when the path is
	// outside the module (the standard library).
	load(importPath string) (*pkg, error)
}

// loadModel reads the Go package in dir, and the packages of the same
// module its structs use, and builds the model rooted at its Config type.
func loadModel(dir string) (*model, error) {
	root, modPath, err := moduleOf(dir)
	if err != nil {
		return nil, err
	}
	ml := &moduleLoader{fset: token.NewFileSet(), root: root, path: modPath, pkgs: map[string]*pkg{}}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return nil, err
	}
	p, err := ml.load(modPath + "/" + filepath.ToSlash(rel))
	if err != nil {
		return nil, err
	}
	return buildModel(p, ml)
}

// moduleOf finds the module that holds dir: its root directory and its
// module path, from the nearest go.mod above dir.
func moduleOf(dir string) (root, path string, err error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			for line := range strings.Lines(string(data)) {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					return d, strings.Trim(strings.TrimSpace(rest), `"`), nil
				}
			}
			return "", "", fmt.Errorf("%s: no module line", filepath.Join(d, "go.mod"))
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", "", err
		}
		up := filepath.Dir(d)
		if up == d {
			return "", "", fmt.Errorf("no go.mod above %s", dir)
		}
		d = up
	}
}

// moduleLoader reads the packages of one module from disk.
type moduleLoader struct {
	fset       *token.FileSet
	root, path string
	pkgs       map[string]*pkg // by import path
}

func (ml *moduleLoader) load(importPath string) (*pkg, error) {
	if p, ok := ml.pkgs[importPath]; ok {
		return p, nil
	}
	rel, ok := strings.CutPrefix(importPath, ml.path+"/")
	if !ok {
		return nil, nil
	}
	dir := filepath.Join(ml.root, filepath.FromSlash(rel))
	// go/build picks the files go build would, by build constraints;
	// with a directory it does not call the go command.
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(ml.fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	p := newPkg(bp.Name, rel, files)
	ml.pkgs[importPath] = p
	return p, nil
}

// newPkg indexes the type declarations and the YAML parsers of files.
func newPkg(name, dir string, files []*ast.File) *pkg {
	p := &pkg{name: name, dir: dir, types: map[string]*decl{}, parsers: map[string]bool{}}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok {
						continue
					}
					doc := ts.Doc
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					p.types[ts.Name.Name] = &decl{pkg: p, file: f, name: ts.Name.Name, doc: doc.Text(), typ: ts.Type}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && d.Name.Name == "UnmarshalYAML" && len(d.Recv.List) == 1 {
					if id, ok := ast.Unparen(deref(d.Recv.List[0].Type)).(*ast.Ident); ok {
						p.parsers[id.Name] = true
					}
				}
			}
		}
	}
	return p
}

// builder walks the structs from Config.
type builder struct {
	loader
	m *model
	// walking are the struct types being walked, to refuse a type that
	// contains itself (its YAML would be endless).
	walking []*decl
}

// buildModel builds the model rooted at p's Config type.
func buildModel(p *pkg, l loader) (*model, error) {
	d := p.types["Config"]
	if d == nil {
		return nil, fmt.Errorf("package %s has no Config type", p.name)
	}
	st, ok := d.typ.(*ast.StructType)
	if !ok {
		return nil, fmt.Errorf("%s.Config is not a struct", p.name)
	}
	b := &builder{loader: l, m: &model{scalarDocs: map[string]string{}, pkgs: []string{p.dir}}}
	root, err := b.section("", nil, st, d)
	if err != nil {
		return nil, err
	}
	b.m.root = root
	return b.m, nil
}

// A shape is how a Go type is written in YAML.
type shape struct {
	scalar string // "string", "integer", "duration", ...; "" otherwise
	// container is "list" or "map" (of names) when the value holds
	// elem's.
	container string
	elem      *shape
	// st is the struct of a mapping of keys; where is the declaration it
	// appears in (its package and imports).
	st    *ast.StructType
	where *decl
}

// String says how the value is written, for the reference.
func (s *shape) String() string {
	switch {
	case s.container == "list":
		return "list of " + s.elem.plural()
	case s.container == "map":
		return "mapping of names to " + s.elem.plural()
	case s.st != nil:
		return "mapping"
	}
	return s.scalar
}

func (s *shape) plural() string {
	first, rest, ok := strings.Cut(s.String(), " ")
	if !ok {
		return first + "s"
	}
	return first + "s " + rest
}

// holdsMappings reports whether values of s contain mappings of keys.
func (s *shape) holdsMappings() bool {
	return s.st != nil || s.elem != nil && s.elem.holdsMappings()
}

// section builds the section at path whose keys are st's fields; st is
// declared in where.
func (b *builder) section(path string, via *key, st *ast.StructType, where *decl) (*section, error) {
	s := &section{path: path, via: via}
	if where.typ == st { // a named struct type, not a struct literal
		s.typeDoc = where.doc
	}
	if err := b.fields(s, st, where); err != nil {
		return nil, err
	}
	return s, nil
}

// fields adds the YAML keys of st's fields to s: those the config's
// decoder reads (exported, not tagged "-"), and those of structs
// embedded with ",inline".
func (b *builder) fields(s *section, st *ast.StructType, where *decl) error {
	if where.typ == st {
		if slices.Contains(b.walking, where) {
			return fmt.Errorf("%s.%s contains itself", where.pkg.name, where.name)
		}
		b.walking = append(b.walking, where)
		defer func() { b.walking = b.walking[:len(b.walking)-1] }()
	}
	for _, f := range st.Fields.List {
		name, opts := yamlTag(f)
		if name == "-" {
			continue
		}
		ids := f.Names
		if len(ids) == 0 { // embedded
			id := embeddedName(f.Type)
			if id == nil || !id.IsExported() {
				continue
			}
			if slices.Contains(strings.Split(opts, ","), "inline") {
				sh, err := b.shape(f.Type, where)
				if err != nil {
					return err
				}
				if sh.st == nil || sh.container != "" {
					return fmt.Errorf("%s.%s: inline field %s is not a struct", where.pkg.name, where.name, id.Name)
				}
				if err := b.fields(s, sh.st, sh.where); err != nil {
					return err
				}
				continue
			}
			ids = []*ast.Ident{id}
		}
		for _, id := range ids {
			if !id.IsExported() {
				continue
			}
			if err := b.key(s, f, id.Name, name, where); err != nil {
				return err
			}
		}
	}
	return nil
}

// key adds the key of field goName (one of f's names) to s.
func (b *builder) key(s *section, f *ast.Field, goName, name string, where *decl) error {
	if name == "" {
		name = strings.ToLower(goName) // as the decoder does
	}
	k := &key{
		in:     s,
		path:   join(s.path, name),
		name:   name,
		goName: goName,
		field:  where.pkg.name + "." + where.name + "." + goName,
		doc:    f.Doc.Text(),
	}
	for _, o := range s.keys {
		if o.name == name {
			return fmt.Errorf("%s and %s are both the key %s", o.field, k.field, k.path)
		}
	}
	if strings.TrimSpace(k.doc) == "" {
		b.m.undocumented = append(b.m.undocumented, k.field+" ("+k.path+")")
	}
	sh, err := b.shape(f.Type, where)
	if err != nil {
		return fmt.Errorf("%s: %w", k.field, err)
	}
	k.typ = sh.String()
	inner, path := sh, k.path
	switch {
	case sh.container == "list" && sh.elem.st != nil:
		inner, path, k.container = sh.elem, path+"[]", "list"
	case sh.container == "map" && sh.elem.st != nil:
		inner, path, k.container = sh.elem, path+".<name>", "map"
	case sh.container != "" && sh.holdsMappings():
		return fmt.Errorf("%s: %s: only a list or mapping of mappings is described, not %s", k.field, k.path, k.typ)
	}
	if inner.st != nil {
		if k.sub, err = b.section(path, k, inner.st, inner.where); err != nil {
			return err
		}
	}
	s.keys = append(s.keys, k)
	return nil
}

// shape resolves a field's type expression, in the package and file of
// where.
func (b *builder) shape(e ast.Expr, where *decl) (*shape, error) {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return b.shape(e.X, where)
	case *ast.StarExpr:
		// A pointer is an optional value, written as the value.
		return b.shape(e.X, where)
	case *ast.Ident:
		if d := where.pkg.types[e.Name]; d != nil {
			return b.named(d)
		}
		if s := basic(e.Name); s != "" {
			return &shape{scalar: s}, nil
		}
		return nil, fmt.Errorf("type %s: no rule for how it is written in YAML", e.Name)
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			break
		}
		path := importPath(where.file, x.Name)
		if path == "" {
			return nil, fmt.Errorf("%s.%s: package %s is not imported", x.Name, e.Sel.Name, x.Name)
		}
		if s := stdScalar(path + "." + e.Sel.Name); s != "" {
			return &shape{scalar: s}, nil
		}
		p, err := b.load(path)
		if err != nil {
			return nil, err
		}
		if p == nil {
			return nil, fmt.Errorf("type %s.%s: no rule for how it is written in YAML", path, e.Sel.Name)
		}
		d := p.types[e.Sel.Name]
		if d == nil {
			return nil, fmt.Errorf("type %s.%s not found", path, e.Sel.Name)
		}
		if !slices.Contains(b.m.pkgs, p.dir) {
			b.m.pkgs = append(b.m.pkgs, p.dir)
		}
		return b.named(d)
	case *ast.ArrayType:
		if e.Len != nil {
			break
		}
		el, err := b.shape(e.Elt, where)
		if err != nil {
			return nil, err
		}
		return &shape{container: "list", elem: el}, nil
	case *ast.MapType:
		k, err := b.shape(e.Key, where)
		if err != nil {
			return nil, err
		}
		if k.scalar != "string" {
			return nil, fmt.Errorf("a mapping with %s keys: want string keys", k)
		}
		el, err := b.shape(e.Value, where)
		if err != nil {
			return nil, err
		}
		return &shape{container: "map", elem: el}, nil
	case *ast.StructType:
		return &shape{st: e, where: where}, nil
	}
	return nil, fmt.Errorf("type %T: no rule for how it is written in YAML", e)
}

// named resolves a declared type: one that parses itself from YAML is
// the scalar scalarKind names, any other is its underlying type.
func (b *builder) named(d *decl) (*shape, error) {
	if d.pkg.parsers[d.name] {
		s := scalarKind(d.pkg.name + "." + d.name)
		if s == "" {
			return nil, fmt.Errorf("%s.%s has its own UnmarshalYAML: say in scalarKind how it is written", d.pkg.name, d.name)
		}
		if b.m.scalarDocs[s] == "" {
			b.m.scalarDocs[s] = d.doc
		}
		return &shape{scalar: s}, nil
	}
	return b.shape(d.typ, d)
}

// scalarKind names how a type with its own UnmarshalYAML is written. A
// new such type must be added here: how it parses is its code, not its
// Go type.
func scalarKind(typ string) string {
	switch typ {
	case "config.Duration":
		return "duration"
	case "config.Size":
		return "size"
	}
	return ""
}

// stdScalar names how a standard library type is written: yaml.v3
// parses a time.Duration with time.ParseDuration, as config.Duration.
func stdScalar(typ string) string {
	if typ == "time.Duration" {
		return "duration"
	}
	return ""
}

// basic names how a predeclared type is written.
func basic(name string) string {
	switch name {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "integer"
	case "float32", "float64":
		return "number"
	}
	return ""
}

// importPath returns the path file imports as name.
func importPath(f *ast.File, name string) string {
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			continue
		}
		n := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			n = im.Name.Name
		}
		if n == name {
			return p
		}
	}
	return ""
}

// yamlTag returns the name and options of f's yaml tag.
func yamlTag(f *ast.Field) (name, opts string) {
	if f.Tag == nil {
		return "", ""
	}
	t, err := strconv.Unquote(f.Tag.Value)
	if err != nil {
		return "", ""
	}
	name, opts, _ = strings.Cut(reflect.StructTag(t).Get("yaml"), ",")
	return name, opts
}

// embeddedName is the field name of an embedded type: T, *T, p.T, *p.T.
func embeddedName(e ast.Expr) *ast.Ident {
	switch e := deref(e).(type) {
	case *ast.Ident:
		return e
	case *ast.SelectorExpr:
		return e.Sel
	}
	return nil
}

func deref(e ast.Expr) ast.Expr {
	if s, ok := e.(*ast.StarExpr); ok {
		return s.X
	}
	return e
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// walk calls fn for every key of s and of the sections under it, in
// order: a key, then the keys of its section.
func (s *section) walk(fn func(*key)) {
	for _, k := range s.keys {
		fn(k)
		if k.sub != nil {
			k.sub.walk(fn)
		}
	}
}
