package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/chatd/chatd/client"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, client.Health{Status: "ok"})
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, client.Error{Message: "The database is not reachable."})
		return nil
	}
	writeJSON(w, http.StatusOK, client.Health{Status: "ready"})
	return nil
}
