package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
)

// IdempotencyKeyHeader lets a client retry a create or a send safely: the
// first request with a key does the work and keeps its answer (in the same
// transaction); a repeat within 24 hours gets that answer again, marked
// with ReplayedHeader, and does nothing.
const (
	IdempotencyKeyHeader = "Idempotency-Key"
	ReplayedHeader       = "Idempotent-Replayed"
	maxIdempotencyKey    = 255
)

// idempotency reads the request's Idempotency-Key, if it has one, and
// fingerprints the request (method, path, body; the body is put back for
// decodeBody). If the key already has an answer, it answers r with it and
// reports replayed.
func (s *Server) idempotency(w http.ResponseWriter, r *http.Request) (key *store.Idempotency, replayed bool, err error) {
	values, ok := r.Header[http.CanonicalHeaderKey(IdempotencyKeyHeader)]
	if !ok {
		return nil, false, nil
	}
	if len(values) != 1 || !validKey(values[0]) {
		return nil, false, badField(IdempotencyKeyHeader, "must be one value of 1 to 255 visible ASCII characters")
	}
	data, err := readBody(w, r, s.maxBody)
	if err != nil {
		return nil, false, err
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	h := sha256.New()
	h.Write([]byte(r.Method + " " + r.URL.Path + "\n"))
	h.Write(data)
	key = &store.Idempotency{Key: values[0], Fingerprint: h.Sum(nil)}
	replayed, err = s.replay(w, r, key)
	return key, replayed, err
}

func validKey(k string) bool {
	if len(k) == 0 || len(k) > maxIdempotencyKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// replay answers r with the answer kept under key, if there is one.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, key *store.Idempotency) (bool, error) {
	a, err := s.store.IdempotentAnswer(r.Context(), currentUser(r).ID, key.Key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !bytes.Equal(a.Fingerprint, key.Fingerprint) {
		return false, &apiError{status: http.StatusUnprocessableEntity, message: "This Idempotency-Key was used for another request.",
			validations: []client.ValidationError{{Field: IdempotencyKeyHeader,
				Detail: "was used within the last 24 hours with another method, path or body"}}}
	}
	w.Header().Set(ReplayedHeader, "true")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
	return true, nil
}

// replayRace answers a request whose work lost the race for its key to a
// concurrent request with the same key: with that request's answer.
func (s *Server) replayRace(w http.ResponseWriter, r *http.Request, key *store.Idempotency) error {
	done, err := s.replay(w, r, key)
	if err != nil || done {
		return err
	}
	return errorf(http.StatusConflict, "A request with this Idempotency-Key was being processed; retry.")
}

// encodeJSON is writeJSON's encoding, for answers kept under a key.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return b.Bytes(), err
}
