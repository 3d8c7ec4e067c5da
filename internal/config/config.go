package config

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/flashmend/flashmend/internal/base"
)

// EnvPrefix starts every environment variable this package reads.
const EnvPrefix = "FLASHMEND_"

// ConfigEnv names the file to read when --config is not given.
const ConfigEnv = EnvPrefix + "CONFIG"

// maxFileBytes bounds a config file: anything larger is not one.
const maxFileBytes = 1 << 20

// File is a parsed config file: sections of keys, each with the line it is
// on (for errors and for Setting.Origin).
type File struct {
	// Path is where the file was read from.
	Path     string
	sections map[string]*section
}

type section struct {
	line int
	keys map[string]entry
}

type entry struct {
	value string
	line  int
}

// Load reads and parses the file at path.
func Load(path string) (*File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, base.InvalidArgumentf("config file: %v", err)
	}
	if !st.Mode().IsRegular() {
		return nil, base.InvalidArgumentf("config file %s: not a regular file", path)
	}
	if st.Size() > maxFileBytes {
		return nil, base.InvalidArgumentf("config file %s: %d bytes, more than a config file may have (%d)", path, st.Size(), maxFileBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, base.InvalidArgumentf("config file: %v", err)
	}
	return Parse(path, data)
}

// Parse parses a config file's contents; path names it in errors.
func Parse(path string, data []byte) (*File, error) {
	f := &File{Path: path, sections: map[string]*section{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, base.InvalidArgumentf("config file %s: not YAML: %v", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return f, nil // empty, or comments only
	}
	top := resolve(doc.Content[0])
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return f, nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, f.errorf(top.Line, "the file is a %s; want a mapping of sections (node:, coordinator:, dev:, s3:, ctl:)", kindName(top))
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], resolve(top.Content[i+1])
		name := k.Value
		if prev, dup := f.sections[name]; dup {
			return nil, f.errorf(k.Line, "section %q again (first at line %d)", name, prev.line)
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			f.sections[name] = &section{line: k.Line, keys: map[string]entry{}}
			continue
		}
		if v.Kind != yaml.MappingNode {
			return nil, f.errorf(k.Line, "%q is a %s; a top-level key is a section (a command's name) holding that command's flags", name, kindName(v))
		}
		s := &section{line: k.Line, keys: map[string]entry{}}
		for j := 0; j+1 < len(v.Content); j += 2 {
			key, val := v.Content[j], resolve(v.Content[j+1])
			if prev, dup := s.keys[key.Value]; dup {
				return nil, f.errorf(key.Line, "%s.%s again (first at line %d)", name, key.Value, prev.line)
			}
			text, err := scalarText(val)
			if err != nil {
				return nil, f.errorf(key.Line, "%s.%s: %v", name, key.Value, err)
			}
			s.keys[key.Value] = entry{value: text, line: key.Line}
		}
		f.sections[name] = s
	}
	return f, nil
}

// resolve follows an alias (*anchor) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "value"
	}
	return "document"
}

// scalarText is a value as it would be written on the command line: a
// scalar's text, or a list of scalars joined by commas.
func scalarText(n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "", errors.New("no value (remove the key to take the default)")
		}
		return n.Value, nil
	case yaml.SequenceNode:
		parts := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				return "", fmt.Errorf("a list item at line %d is a %s; a list holds values only", item.Line, kindName(item))
			}
			if strings.Contains(item.Value, ",") {
				return "", fmt.Errorf("list item %q holds a comma (the list is passed to the flag comma-separated)", item.Value)
			}
			parts = append(parts, item.Value)
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("a %s; want a value or a list of values", kindName(n))
}

func (f *File) errorf(line int, format string, args ...any) error {
	return base.InvalidArgumentf("config file %s:%d: %s", f.Path, line, fmt.Sprintf(format, args...))
}

// Sections returns the file's section names, sorted.
func (f *File) Sections() []string {
	var names []string
	for name := range f.sections {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Check refuses a section that is not in known and a key that is not a
// settable flag of its section's flag set; skip names flags that are never
// read from a file or the environment (--config itself, --help).
func (f *File) Check(known map[string]*pflag.FlagSet, skip ...string) error {
	for _, name := range f.Sections() {
		s := f.sections[name]
		fs, ok := known[name]
		if !ok {
			return f.errorf(s.line, "unknown section %q (sections: %s)", name, strings.Join(sortedKeys(known), ", "))
		}
		keys := make([]string, 0, len(s.keys))
		for k := range s.keys {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return s.keys[keys[i]].line < s.keys[keys[j]].line })
		for _, k := range keys {
			if fs.Lookup(k) == nil || contains(skip, k) {
				return f.errorf(s.keys[k].line, "%s.%s: unknown key: 'flashmend %s' has no flag --%s%s", name, k, name, k, suggest(fs, k, skip))
			}
		}
	}
	return nil
}

// suggest names the flag closest to k, when one is close.
func suggest(fs *pflag.FlagSet, k string, skip []string) string {
	best, bestD := "", 3
	fs.VisitAll(func(fl *pflag.Flag) {
		if contains(skip, fl.Name) {
			return
		}
		if d := distance(k, fl.Name); d < bestD {
			best, bestD = fl.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func sortedKeys(m map[string]*pflag.FlagSet) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// EnvName is the environment variable that sets flag of section:
// FLASHMEND_NODE_LISTEN for node's --listen.
func EnvName(section, flag string) string {
	return EnvPrefix + envWord(section) + "_" + envWord(flag)
}

func envWord(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}

// Setting is one flag's value after Apply and where it came from.
type Setting struct {
	Flag  string
	Value string
	// Origin is "command line", "$NAME", "FILE:LINE" or "default".
	Origin string
}

// Options are Apply's inputs besides the flags.
type Options struct {
	// Section names the command (the file's section, the environment's
	// FLASHMEND_<SECTION>_ prefix).
	Section string
	// File is the parsed config file; nil: none.
	File *File
	// Environ is the environment as os.Environ returns it.
	Environ []string
	// Aliases are further environment variables for a flag, read after
	// FLASHMEND_<SECTION>_<FLAG> (e.g. FLASHMEND_ENDPOINT for --endpoint).
	Aliases map[string][]string
	// Skip names flags never read from the file or the environment.
	Skip []string
}

// Apply sets every flag of fs that the command line did not set: from the
// environment, else from the file (marking it changed, as the command
// line would), else it keeps its default (see the package doc for the
// order). It returns every flag's value and origin,
// sorted by flag name, or the first error: an unknown
// FLASHMEND_<SECTION>_* variable, or a value the flag refuses.
func Apply(fs *pflag.FlagSet, opts Options) ([]Setting, error) {
	skip := append([]string{"help"}, opts.Skip...)
	env := map[string]string{}
	prefix := EnvPrefix + envWord(opts.Section) + "_"
	var unknown []string
	for _, kv := range opts.Environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		env[k] = v
		if strings.HasPrefix(k, prefix) {
			unknown = append(unknown, k)
		}
	}
	known := map[string]bool{}
	fs.VisitAll(func(fl *pflag.Flag) {
		if !contains(skip, fl.Name) {
			known[EnvName(opts.Section, fl.Name)] = true
		}
	})
	sort.Strings(unknown)
	for _, k := range unknown {
		if !known[k] {
			return nil, base.InvalidArgumentf("environment variable %s: 'flashmend %s' has no flag --%s (its variables are %s<FLAG>, e.g. %s)",
				k, opts.Section, strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, prefix), "_", "-")), prefix, exampleEnv(fs, opts.Section, skip))
		}
	}
	var sec *section
	if opts.File != nil {
		sec = opts.File.sections[opts.Section]
	}
	var settings []Setting
	var firstErr error
	fs.VisitAll(func(fl *pflag.Flag) {
		if firstErr != nil || contains(skip, fl.Name) {
			return
		}
		if fl.Changed {
			settings = append(settings, Setting{Flag: fl.Name, Value: fl.Value.String(), Origin: "command line"})
			return
		}
		names := append([]string{EnvName(opts.Section, fl.Name)}, opts.Aliases[fl.Name]...)
		for _, name := range names {
			if v, ok := env[name]; ok && v != "" {
				if err := fl.Value.Set(v); err != nil {
					firstErr = base.InvalidArgumentf("environment variable %s: %s", name, badValue(fl, v, err))
					return
				}
				fl.Changed = true
				settings = append(settings, Setting{Flag: fl.Name, Value: fl.Value.String(), Origin: "$" + name})
				return
			}
		}
		if sec != nil {
			if e, ok := sec.keys[fl.Name]; ok {
				if err := fl.Value.Set(e.value); err != nil {
					firstErr = opts.File.errorf(e.line, "%s.%s: %s", opts.Section, fl.Name, badValue(fl, e.value, err))
					return
				}
				fl.Changed = true
				settings = append(settings, Setting{Flag: fl.Name, Value: fl.Value.String(), Origin: opts.File.Path + ":" + strconv.Itoa(e.line)})
				return
			}
		}
		settings = append(settings, Setting{Flag: fl.Name, Value: fl.Value.String(), Origin: "default"})
	})
	if firstErr != nil {
		return nil, firstErr
	}
	return settings, nil
}

// badValue says why flag fl refused v.
func badValue(fl *pflag.Flag, v string, err error) string {
	return fmt.Sprintf("invalid value %q for --%s (%s): %v", v, fl.Name, typeHint(fl.Value.Type()), err)
}

func typeHint(t string) string {
	switch t {
	case "bool":
		return "true or false"
	case "duration":
		return "a duration such as 500ms, 10s or 2m"
	case "int", "int64", "uint64", "int32", "uint", "uint32":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "string":
		return "text"
	}
	return t
}

// exampleEnv names one settable flag's variable, for error messages.
func exampleEnv(fs *pflag.FlagSet, section string, skip []string) string {
	ex := ""
	fs.VisitAll(func(fl *pflag.Flag) {
		if ex == "" && !contains(skip, fl.Name) {
			ex = EnvName(section, fl.Name)
		}
	})
	return ex
}
