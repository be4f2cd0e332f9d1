// Package tools holds the server-executed tools an agent may use: read-only
// access to a configured workspace directory. Paths are resolved inside an
// os.Root, so neither ".." nor a symbolic link can reach outside it.
//
// Tool calls are executed at least once: a worker that dies after running a
// tool and before committing its result runs it again. These tools only
// read, so repeating them is harmless.
package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"unicode/utf8"
)

// Tool is one server-executed tool.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments.
	InputSchema map[string]any
	// Run executes the tool. An error is reported to the model as a failed
	// tool result; it does not fail the turn.
	Run func(args json.RawMessage) (string, error)
}

// Limits of the workspace tools.
const (
	MaxReadBytes   = 64 << 10
	MaxListEntries = 500
)

// Workspace returns read_file and list_files confined to dir.
func Workspace(dir string) ([]Tool, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	w := &workspace{root: root}
	return []Tool{
		{
			Name: "read_file",
			Description: fmt.Sprintf("Read a UTF-8 text file of the workspace. path is relative to the workspace root. "+
				"Returns at most %d bytes starting at offset.", MaxReadBytes),
			InputSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"path":   map[string]any{"type": "string", "description": "file path relative to the workspace root"},
					"offset": map[string]any{"type": "integer", "minimum": 0, "description": "byte offset to start from"},
				},
				"required":             []string{"path"},
				"additionalProperties": false,
			},
			Run: w.readFile,
		},
		{
			Name:        "list_files",
			Description: "List the entries of a workspace directory (default: the root). Directories end with '/'.",
			InputSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"path": map[string]any{"type": "string", "description": "directory relative to the workspace root"},
				},
				"additionalProperties": false,
			},
			Run: w.listFiles,
		},
	}, nil
}

type workspace struct{ root *os.Root }

// clean makes a model-supplied path relative; the Root refuses escapes.
func clean(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

func decode(args json.RawMessage, dst any) error {
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}

func (w *workspace) readFile(args json.RawMessage) (string, error) {
	var in struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset"`
	}
	if err := decode(args, &in); err != nil {
		return "", err
	}
	if in.Path == "" || in.Offset < 0 {
		return "", errors.New("path is required and offset must not be negative")
	}
	f, err := w.root.Open(clean(in.Path))
	if err != nil {
		return "", explain(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", explain(err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("%s is a directory; use list_files", in.Path)
	}
	if _, err := f.Seek(in.Offset, io.SeekStart); err != nil {
		return "", explain(err)
	}
	buf := make([]byte, MaxReadBytes)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", explain(err)
	}
	buf = buf[:n]
	if !utf8.Valid(buf) {
		// A cut at the limit may split a character; anything else is binary.
		ok := false
		for k := 1; n == MaxReadBytes && k < utf8.UTFMax; k++ {
			if utf8.Valid(buf[:n-k]) {
				buf, ok = buf[:n-k], true
				break
			}
		}
		if !ok {
			return "", fmt.Errorf("%s is not a UTF-8 text file", in.Path)
		}
	}
	out := string(buf)
	if rest := st.Size() - in.Offset - int64(len(buf)); rest > 0 {
		out += fmt.Sprintf("\n[%d more bytes; call read_file with offset %d]", rest, in.Offset+int64(len(buf)))
	}
	return out, nil
}

func (w *workspace) listFiles(args json.RawMessage) (string, error) {
	var in struct {
		Path string `json:"path"`
	}
	if len(args) > 0 {
		if err := decode(args, &in); err != nil {
			return "", err
		}
	}
	entries, err := fs.ReadDir(w.root.FS(), clean(in.Path))
	if err != nil {
		return "", explain(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		names = append(names, n)
	}
	sort.Strings(names)
	more := ""
	if len(names) > MaxListEntries {
		more = fmt.Sprintf("\n[%d more entries]", len(names)-MaxListEntries)
		names = names[:MaxListEntries]
	}
	return strings.Join(names, "\n") + more, nil
}

// explain turns file errors into messages without host paths.
func explain(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s does not exist", pe.Path)
		case errors.Is(err, fs.ErrPermission):
			return fmt.Errorf("%s cannot be read", pe.Path)
		}
		if strings.Contains(pe.Err.Error(), "escapes") {
			return fmt.Errorf("%s is outside the workspace", pe.Path)
		}
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return errors.New("the file cannot be read")
}
