package httpapi

import (
	"net/http"
	"sort"
	"strconv"
	"sync"
)

// StatusLog records the route pattern and status of every request it is
// told about (TestSignals.Answered).
type StatusLog struct {
	mu   sync.Mutex
	seen map[string]map[int]bool
}

// NewStatusLog returns an empty log.
func NewStatusLog() *StatusLog { return &StatusLog{seen: map[string]map[int]bool{}} }

// Record notes one answered request.
func (l *StatusLog) Record(a Answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[a.Pattern] == nil {
		l.seen[a.Pattern] = map[int]bool{}
	}
	l.seen[a.Pattern][a.Status] = true
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
