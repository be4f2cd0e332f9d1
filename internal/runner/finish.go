package runner

import (
	"context"
	"errors"
	"log/slog"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/hooks"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

const defaultHookNotice = "A stop hook asked the agent to continue before finishing."

// finishWithCandidate ends a structured turn whose request has a current
// candidate: the stop hooks vet it first. A hook that continues invalidates
// the candidate durably (a control row, the model-only context and the
// cleared candidate commit together) and the model must finalize again.
// Hooks run outside any transaction; the commit that follows is fenced, so a
// candidate that changed meanwhile cannot be published.
func (a *action) finishWithCandidate(ctx context.Context) (bool, error) {
	req := a.turn.Request
	if h := a.opts.Hooks; h.Enabled() {
		n, err := a.store.CountControls(ctx, a.requestID())
		if err != nil {
			return false, err
		}
		d, err := h.Stop(ctx, hooks.StopEvent{ChatID: a.turn.Chat.ID.String(), RequestID: req.RequestID.String(),
			Name: req.Name, Candidate: req.Candidate, Continuations: n})
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			a.log.Warn("stop hook failed", slog.String("structured_request_id", req.RequestID.String()), slog.String("error", err.Error()))
			if errors.Is(err, hooks.ErrUnavailable) {
				return a.fail(ctx, client.CodeHookFailed, "a stop hook could not vet the result", store.EndTurn)
			}
			return false, err
		}
		if d.Continue() {
			notice := d.Notice
			if notice == "" {
				notice = defaultHookNotice
			}
			// The notice is plain text: a client that knows only the
			// documented part types shows it as a message.
			return a.commit(ctx, store.Continue(store.Continuation{
				Messages: []store.NewMessage{
					{Role: client.RoleAssistant, Kind: store.KindControl, Visibility: store.VisibleUser, RequestID: a.requestID(),
						Parts: []jsonb.Part{jsonb.Text(notice)}},
					{Role: client.RoleUser, Visibility: store.VisibleModel, RequestID: a.requestID(),
						Parts: []jsonb.Part{{Type: jsonb.PartHookContext, Text: d.ModelContext}}},
				},
				Progress:     &store.Progress{RequestID: req.RequestID, SetCandidate: true},
				CountAttempt: true, // the model must finalize again
			}))
		}
	}
	return a.commit(ctx, store.FinishTurn(store.Ending{
		Outcomes: []store.Outcome{{RequestID: req.RequestID, Status: client.OutputSucceeded, Value: req.Candidate}},
	}))
}
