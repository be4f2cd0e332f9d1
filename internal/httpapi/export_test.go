package httpapi

import (
	"net/http"
	"sort"
	"strconv"
	"sync"
)

// StatusLog records the route pattern and status of every request it is
// told about (Options.Observe).
type StatusLog struct {
	mu   sync.Mutex
	seen map[string]map[int]bool
}

// NewStatusLog returns an empty log.
func NewStatusLog() *StatusLog { return &StatusLog{seen: map[string]map[int]bool{}} }

// Record notes one answered request.
func (l *StatusLog) Record(pattern string, status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[pattern] == nil {
		l.seen[pattern] = map[int]bool{}
	}
	l.seen[pattern][status] = true
}

// Undocumented lists every recorded (route, status) pair that routeDocs
// does not list.
func (l *StatusLog) Undocumented() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	docs := routeDocs()
	var out []string
	for pattern, statuses := range l.seen {
		for status := range statuses {
			if !documents(docs[pattern], status) {
				out = append(out, pattern+" answered "+http.StatusText(status)+" ("+strconv.Itoa(status)+")")
			}
		}
	}
	sort.Strings(out)
	return out
}

func documents(d routeDoc, status int) bool {
	for _, r := range d.responses {
		if r.status == status {
			return true
		}
	}
	return false
}

// Extends reports whether next grew from prev as partials do (partial_test.go).
func Extends(prev, next any) bool { return extends(prev, next) }

// TokenChecks counts the token re-checks the server asked of the database.
func (s *Server) TokenChecks() int64 { return s.tokenChecks.Load() }
