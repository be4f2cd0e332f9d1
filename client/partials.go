package client

import (
	"encoding/json"
	"fmt"
	"iter"

	"github.com/google/uuid"
)

// Partial is one element of Partials: a structured_output_partial of the
// request decoded into T or, last, the request's receipt.
type Partial[T any] struct {
	// Event is the event as sent (Event.Value is the raw JSON); zero on
	// the receipt.
	Event StructuredOutputPartial
	// Value is Event.Value decoded into T: a preview, never a result. It
	// may lack members the schema requires (give T optional fields) and
	// may still be rejected. On the receipt it is the receipt's value,
	// when it succeeded.
	Value T
	// Restarted says a preview_reset came since the previous partial:
	// the partials before are void, the model writes the value again (a
	// repair, a new attempt).
	Restarted bool
	// Receipt is set on the last element only: the request's committed
	// outcome, the one result.
	Receipt *StructuredOutput
}

// Partials reads s for the partial values of request while the model
// writes them (the structured_output_partial events, docs/streams.md),
// decoded into T, and ends with the request's receipt. Started any time
// before the receipt, it yields the whole series: a stream that connects
// (or reconnects) while the model writes first gets the call so far.
// Other events are skipped: the stream should be opened for this
// iteration alone. A partial that does not decode into T is yielded with
// its error (and the iteration goes on if the loop does); a stream error
// ends it.
//
//	for p, err := range client.Partials[Report](c.Stream(ctx, chat, 0), req) {
//		if err != nil { … }
//		if p.Receipt != nil { … the result … }
//		else { … show p.Value … }
//	}
func Partials[T any](s *Stream, request uuid.UUID) iter.Seq2[Partial[T], error] {
	return func(yield func(Partial[T], error) bool) {
		restarted := false
		for {
			ev, err := s.Next()
			if err != nil {
				yield(Partial[T]{}, err)
				return
			}
			switch {
			case ev.PreviewReset != nil:
				restarted = true
			case ev.Partial != nil && ev.Partial.RequestID == request:
				p := Partial[T]{Event: *ev.Partial, Restarted: restarted}
				restarted = false
				var derr error
				if err := json.Unmarshal(ev.Partial.Value, &p.Value); err != nil {
					derr = fmt.Errorf("chatd: partial value of request %s does not decode: %w", request, err)
				}
				if !yield(p, derr) {
					return
				}
			case ev.Message != nil && ev.Message.StructuredOutput != nil && ev.Message.StructuredOutput.RequestID == request:
				out := ev.Message.StructuredOutput
				p := Partial[T]{Receipt: out}
				var derr error
				if out.Status == OutputSucceeded {
					if err := json.Unmarshal(out.Value, &p.Value); err != nil {
						derr = fmt.Errorf("chatd: the value of request %s does not decode: %w", request, err)
					}
				}
				yield(p, derr)
				return
			}
		}
	}
}
