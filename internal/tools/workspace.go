// Package tools holds the server-executed tools an agent may use: read-only
// access to a configured workspace directory. Paths are resolved inside an
// os.Root, so neither ".." nor a symbolic link can reach outside it.
//
// Tool calls are executed at least once: a worker that dies after running a
// tool and before committing its result runs it again. These tools only
// read, so repeating them is harmless.
package tools

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Tool is one server-executed tool.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments.
	InputSchema map[string]any
	// Run executes the tool. An error is reported to the model as a failed
	// tool result; it does not fail the turn. The runner gives every call a
	// deadline (ctx) and stops waiting for a call that outlives it; a tool
	// should return soon after ctx ends.
	Run func(ctx context.Context, args json.RawMessage) (string, error)
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

func (w *workspace) readFile(_ context.Context, args json.RawMessage) (string, error) {
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
	// Non-blocking: opening a FIFO for reading would otherwise wait for a
	// writer forever. Only regular files are read at all.
	f, err := w.root.OpenFile(clean(in.Path), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", explain(err, in.Path)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", explain(err, in.Path)
	}
	if st.IsDir() {
		return "", fmt.Errorf("%s is a directory; use list_files", in.Path)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", in.Path)
	}
	if _, err := f.Seek(in.Offset, io.SeekStart); err != nil {
		return "", explain(err, in.Path)
	}
	buf := make([]byte, MaxReadBytes)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", explain(err, in.Path)
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

func (w *workspace) listFiles(_ context.Context, args json.RawMessage) (string, error) {
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
		return "", explain(err, cmp.Or(in.Path, "."))
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

// explain turns a file error into a message that names the path as the
// model gave it: the error's own path can be the host path of the file (a
// seek or read error names the opened file), which must not leak.
func explain(err error, name string) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", name)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s cannot be read", name)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if strings.Contains(pe.Err.Error(), "escapes") {
			return fmt.Errorf("%s is outside the workspace", name)
		}
		return fmt.Errorf("%s: %v", name, pe.Err)
	}
	return fmt.Errorf("%s cannot be read", name)
}
