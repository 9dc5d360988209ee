package luascript

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Library is the Lua library of one package: the files lua/lib/<name>.lua
// next to its scripts, each defining local functions that scripts splice in
// with include lines (see the package doc). Built once, at package
// initialisation, with MustLibrary; read-only, and safe for concurrent use.
type Library struct {
	files map[string]*libFile // by file name
}

// libFile is one file of a Library.
type libFile struct {
	src     string
	defines []string // its top-level local names
}

var (
	// includeLine is an include line; any other line starting "--@" is an
	// error, so that a misspelt include cannot pass for a comment.
	includeLine = regexp.MustCompile(`^--@include ([A-Za-z0-9_]+\.lua)$`)
	// topLocal is a top-level local definition (a line that starts with
	// "local", not indented): a function, or one or more names.
	topLocal = regexp.MustCompile(`^local (?:function ([A-Za-z_]\w*)|([A-Za-z_]\w*(?:, *[A-Za-z_]\w*)*)(?: *=|$))`)
	// scriptName is line 2 of a script's header, which names its file.
	scriptName = regexp.MustCompile(`(?m)\A.*\n-- ([A-Za-z0-9_]+\.lua):`)
)

// noLibrary is what New and NewLegacy build with: a script without
// include lines.
var noLibrary = &Library{}

// NewLibrary reads the library files, dir/*.lua in fsys; a package embeds
// them with //go:embed lua/lib/*.lua. It fails on a file whose includes do
// not resolve or form a cycle, and on a name defined by two files.
func NewLibrary(fsys fs.FS, dir string) (*Library, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.lua"))
	if err != nil {
		return nil, err
	}
	l := &Library{files: map[string]*libFile{}}
	owner := map[string]string{}
	for _, p := range names {
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		name := path.Base(p)
		f := &libFile{src: string(src), defines: topLevel(string(src))}
		for _, d := range f.defines {
			if o, ok := owner[d]; ok {
				return nil, fmt.Errorf("luascript: library files %s and %s both define %s", o, name, d)
			}
			owner[d] = name
		}
		l.files[name] = f
	}
	for _, p := range names { // in name order, so a fault reads the same every time
		name := path.Base(p)
		if _, err := l.splice(name, l.files[name].src); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// MustLibrary is NewLibrary for a package's embedded files: a fault in them
// is a fault of the build, so it panics.
func MustLibrary(fsys fs.FS, dir string) *Library {
	l, err := NewLibrary(fsys, dir)
	if err != nil {
		panic(err)
	}
	return l
}

// New builds src, as New does, with its include lines spliced from l. It
// panics when they do not resolve (see Build): scripts are embedded, and
// built at package initialisation.
func (l *Library) New(src string) *Script { return built(l.must(src)) }

// NewLegacy builds src, as NewLegacy does, with its include lines spliced
// from l. It panics as l.New does.
func (l *Library) NewLegacy(src string) *Script { return built(stripFlags(l.must(src))) }

// must is Build for embedded scripts: it panics on an error.
func (l *Library) must(src string) string {
	out, err := l.Build(src)
	if err != nil {
		panic(err)
	}
	return out
}

// Build returns src with each include line replaced by the library file it
// names, whose own include lines are replaced the same way; a file already
// spliced into this script is not spliced again. It fails on an unknown
// file, a cycle of includes, a line starting "--@" that is not an include,
// and a top-level local of the script that redefines a name of a file it
// includes.
func (l *Library) Build(src string) (string, error) {
	name := "script"
	if m := scriptName.FindStringSubmatch(src); m != nil {
		name = m[1]
	}
	return l.splice(name, src)
}

// splice is Build of src, the file name.
func (l *Library) splice(name, src string) (string, error) {
	s := splicer{l: l, done: map[string]bool{}, owner: map[string]string{}}
	if err := s.file(name, src, nil); err != nil {
		return "", fmt.Errorf("luascript: %s: %w", name, err)
	}
	for _, d := range topLevel(src) {
		if o, ok := s.owner[d]; ok && o != name {
			return "", fmt.Errorf("luascript: %s: defines %s, which it includes from %s", name, d, o)
		}
	}
	return s.out.String(), nil
}

// splicer builds one script.
type splicer struct {
	l     *Library
	out   strings.Builder
	done  map[string]bool   // files spliced so far
	owner map[string]string // name -> the spliced file that defines it
}

// file writes src, the file name, with its includes spliced; stack holds
// the files being spliced around it, outermost first.
func (s *splicer) file(name, src string, stack []string) error {
	for n, line := range strings.SplitAfter(src, "\n") {
		if !strings.HasPrefix(line, "--@") {
			if strings.HasPrefix(strings.TrimLeft(line, " \t"), "--@") {
				// Indented: inside a block, where what it defines would
				// be out of scope below; or a misspelt line.
				return fmt.Errorf("%s line %d: an include line starts the line, at the top level", name, n+1)
			}
			s.out.WriteString(line)
			continue
		}
		m := includeLine.FindStringSubmatch(strings.TrimRight(line, "\r\n"))
		if m == nil {
			return fmt.Errorf("%s line %d: %q is not an include line (--@include <name>.lua)", name, n+1, strings.TrimSpace(line))
		}
		inc := m[1]
		if inc == name || slices.Contains(stack, inc) {
			return fmt.Errorf("include cycle: %s -> %s", strings.Join(append(stack, name), " -> "), inc)
		}
		if s.done[inc] {
			continue
		}
		f, ok := s.l.files[inc]
		if !ok {
			return fmt.Errorf("%s line %d: includes %s, which the library does not hold", name, n+1, inc)
		}
		s.done[inc] = true
		for _, d := range f.defines {
			s.owner[d] = inc
		}
		if err := s.file(inc, f.src, append(stack, name)); err != nil {
			return err
		}
		if !strings.HasSuffix(f.src, "\n") {
			s.out.WriteString("\n")
		}
	}
	return nil
}

// topLevel returns the names that src defines with top-level local
// statements, in order.
func topLevel(src string) []string {
	var out []string
	for line := range strings.Lines(src) {
		m := topLocal.FindStringSubmatch(strings.TrimRight(line, "\r\n"))
		switch {
		case m == nil:
		case m[1] != "":
			out = append(out, m[1])
		default:
			for d := range strings.SplitSeq(m[2], ",") {
				out = append(out, strings.TrimSpace(d))
			}
		}
	}
	return out
}
