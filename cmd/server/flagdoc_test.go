package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// flagReferencePath is the flag reference generated from the flag
// definitions; CHATD_FLAG_DOC=write (make generate) rewrites it.
const flagReferencePath = "../../docs/flags.md"

// TestFlagReference: docs/flags.md is what the flag definitions generate,
// so that a flag added, renamed or re-described without regenerating it
// fails here (and in make check-generated).
func TestFlagReference(t *testing.T) {
	t.Parallel()
	got, err := flagReference()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CHATD_FLAG_DOC") == "write" {
		if err := os.WriteFile(flagReferencePath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(flagReferencePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/flags.md is stale: run `make generate` (CHATD_FLAG_DOC=write go test -run '^TestFlagReference$' ./cmd/server/)\n%s",
			firstDiff(string(want), string(got)))
	}
}

// TestFlagReferenceRefusesUndocumented: a flag defined on the FlagSet
// directly, without an environment twin and a help text, or deprecated
// without the date after which it goes, stops the generator.
func TestFlagReferenceRefusesUndocumented(t *testing.T) {
	t.Parallel()
	f := newFlags("server", "chatd server", io.Discard)
	f.String("listen", "CHATD_LISTEN", "", "HTTP listen address")
	f.FlagSet.Int("secret-knob", 1, "")
	var b bytes.Buffer
	if err := writeFlagTable(&b, f); err == nil || !strings.Contains(err.Error(), "--secret-knob") {
		t.Fatalf("writeFlagTable = %v, want an error naming --secret-knob", err)
	}
	f = newFlags("server", "chatd server", io.Discard)
	f.String("listen", "CHATD_LISTEN", "", "")
	if err := writeFlagTable(&b, f); err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("writeFlagTable = %v, want an error naming --listen", err)
	}
	f = newFlags("server", "chatd server", io.Discard)
	f.Int("old-knob", "CHATD_OLD_KNOB", 0, "deprecated: the old name of --knob")
	if err := writeFlagTable(&b, f); err == nil || !strings.Contains(err.Error(), "--old-knob is deprecated") {
		t.Fatalf("writeFlagTable = %v, want an error saying --old-knob's removal is undated", err)
	}
}

// TestServerHelpIsTheReference: `chatd server --help` prints every flag of
// the reference with its help text and environment variable.
func TestServerHelpIsTheReference(t *testing.T) {
	t.Parallel()
	var help bytes.Buffer
	if err := cmdServer(t.Context(), []string{"--help"}, &help); exitCode(err) != 0 {
		t.Fatalf("server --help: %v", err)
	}
	f, _ := serverFlags(io.Discard)
	for _, d := range f.docs {
		if !strings.Contains(help.String(), "-"+d.name) || !strings.Contains(help.String(), d.help+" (env "+d.env+")") {
			t.Errorf("--help lacks --%s: %q (env %s)", d.name, d.help, d.env)
		}
	}
}

// flagReference renders docs/flags.md from the commands' flag definitions.
func flagReference() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`# Flags

<!-- Generated from the flag definitions in cmd/server by TestFlagReference
(make generate); do not edit. ` + "`chatd <command> --help`" + ` prints the same texts. -->

Every flag of the ` + "`chatd`" + ` operator commands. Each has an environment twin;
the flag wins when both are set. A malformed environment value
(` + "`CHATD_LEASE=30`" + `) stops the command with an error naming the variable, as
a malformed flag does. The chat commands (` + "`chatd chat`, `chatd result`" + `)
are in [cli.md](cli.md); ` + "`mockllm`" + `'s flags in [mockllm.md](mockllm.md).
`)
	server, _ := serverFlags(io.Discard)
	migrate, _, _ := migrateFlags(io.Discard)
	check, _ := checkFlags(io.Discard)
	sections := []flagSection{
		{"chatd server", "Runs the HTTP API and the workers ([operations.md](operations.md)).", server},
		{"chatd migrate up|down|status", "Manages the database schema ([operations.md](operations.md#migrate)).", migrate},
	}
	for _, verb := range []string{"create", "list", "revoke", "users"} {
		f, _ := tokenFlags(verb, io.Discard)
		addToolDatabaseFlags(f, io.Discard)
		sections = append(sections, flagSection{"chatd token " + verb, tokenIntro[verb], f})
	}
	sections = append(sections, flagSection{"chatd check", "Reports invariant violations ([check.md](check.md)).", check})
	user := userFlags(io.Discard)
	addToolDatabaseFlags(user, io.Discard)
	exp, _, _ := exportFlags(io.Discard)
	addToolDatabaseFlags(exp, io.Discard)
	imp, _ := importFlags(io.Discard)
	addToolDatabaseFlags(imp, io.Discard)
	sections = append(sections,
		flagSection{"chatd user erase", "Deletes the user `NAME` and everything of theirs, and prints what went as JSON " +
			"([operations.md](operations.md#erasing-a-user)).", user},
		flagSection{"chatd export", "Writes a user's chats as JSON Lines ([operations.md](operations.md#export-and-import)).", exp},
		flagSection{"chatd import", "Reads an export (`FILE`, or `-` for standard input) into the database " +
			"([operations.md](operations.md#export-and-import)).", imp})
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## `%s`\n\n%s\n\n", s.title, s.intro)
		if err := writeFlagTable(&b, s.f); err != nil {
			return nil, fmt.Errorf("%s: %w", s.title, err)
		}
	}
	return b.Bytes(), nil
}

// flagSection is one command's part of the reference.
type flagSection struct {
	title, intro string
	f            *flags
}

var tokenIntro = map[string]string{
	"create": "Creates the user if needed and prints only a new API token, with its scopes and the act-as capability ([operations.md](operations.md#identity)).",
	"list":   "Lists tokens: id, user, scopes, act-as, created, last used, expiry.",
	"users":  "Lists users: id, name, and the issuer and subject of an identity provider's user.",
	"revoke": "Revokes the token `TOKEN_ID`: refused within 5 s everywhere; its open streams end within 5 s too.",
}

var (
	docLink  = regexp.MustCompile(`docs/([a-z-]+\.md)(#[a-z0-9-]+)?`)
	flagWord = regexp.MustCompile(`(^|[\s(])(--[a-z][a-z-]*)`)
)

// writeFlagTable writes f's flags as a table, in the order defined; a flag
// without an environment twin or a help text is an error.
// removalDate is how a deprecated flag's help says when it goes.
var removalDate = regexp.MustCompile(`removed in the first release after \d{4}-\d{2}-\d{2}`)

func writeFlagTable(w io.Writer, f *flags) error {
	documented := map[string]bool{}
	for _, d := range f.docs {
		documented[d.name] = true
	}
	var err error
	f.VisitAll(func(fl *flag.Flag) {
		if !documented[fl.Name] {
			err = fmt.Errorf("--%s has no environment twin and no entry in the reference: define it with flags.String, Int, Duration or Bool", fl.Name)
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "| flag | env | default | meaning |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, d := range f.docs {
		if strings.TrimSpace(d.help) == "" {
			return fmt.Errorf("--%s has no help text", d.name)
		}
		if strings.HasPrefix(d.help, "deprecated") && !removalDate.MatchString(d.help) {
			return fmt.Errorf("--%s is deprecated without saying when it goes (%q)", d.name, removalDate)
		}
		def := "empty"
		if v := f.Lookup(d.name).DefValue; v != "" {
			def = "`" + v + "`"
		}
		help := strings.ReplaceAll(d.help, "|", `\|`)
		help = flagWord.ReplaceAllString(help, "$1`$2`")
		help = docLink.ReplaceAllString(help, "[$1$2]($1$2)")
		fmt.Fprintf(w, "| `--%s` | `%s` | %s | %s |\n", d.name, d.env, def, help)
	}
	return nil
}

// firstDiff shows the first line where want and got differ.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  docs/flags.md: %s\n  generated:     %s", i+1, wl, gl)
		}
	}
	return ""
}
