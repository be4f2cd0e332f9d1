package runner

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"charm.land/fantasy"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/store"
)

const summaryInstruction = "Summarize the conversation above for your own later use: the user's goals, " +
	"decisions made, facts learned (file contents, tool results that matter), and work still open. " +
	"Be complete but concise. Do not address the user."

// maybeCompact summarises history before the current turn when a client
// asked for it or when the prompt would fill more than the configured
// fraction of the model's context window. The originals are marked
// compressed and a model-only summary takes their place, in one fenced
// commit. Receipts and controls are never part of the prompt, so they are
// neither summarised nor replayed, and the ledger (budgets, candidate,
// terminal requests) is untouched. compacted reports that a commit happened
// (the caller then decides again from the new history).
func (a *action) maybeCompact(ctx context.Context, model *provider.Model, system string) (done, compacted bool, err error) {
	chat := a.turn.Chat
	requested := chat.CompactionRequestedAt != nil
	over := false
	if cw := model.Config.ContextWindow; cw > 0 {
		over = float64(estimateTokens(system, a.msgs)) > a.opts.CompactionThreshold*float64(cw)
	}
	if !requested && !over {
		return false, false, nil
	}
	boundary := -1
	for i := len(a.msgs) - 1; i >= 0; i-- {
		if m := a.msgs[i].row; m.UserInput() {
			boundary = i
			break
		}
	}
	if boundary <= 0 {
		if requested { // nothing before the current turn: the request is done
			done, err := a.commit(ctx, store.Continue(store.Continuation{ClearCompaction: true, CountAttempt: true}))
			return done, true, err
		}
		return false, false, nil
	}
	prompt := buildPrompt(system, a.msgs[:boundary])
	prompt = append(prompt, fantasy.NewUserMessage(summaryInstruction))
	call := fantasy.Call{Prompt: prompt, ProviderOptions: model.Options}
	if n := model.Config.MaxOutputTokens; n > 0 {
		call.MaxOutputTokens = &n
	}
	start := time.Now()
	resp, err := model.LM.Generate(ctx, call)
	a.observeCall("summary", time.Since(start), err, err != nil && ctx.Err() != nil)
	if err != nil {
		a.log.Warn("compaction failed", slog.String("error", a.models.Redact(err.Error())))
		if requested {
			// Give up on this request rather than retrying forever; the
			// turn goes on with the full history.
			done, err := a.commit(ctx, store.Continue(store.Continuation{ClearCompaction: true, CountAttempt: true}))
			return done, true, err
		}
		return false, false, nil
	}
	summary := strings.TrimSpace(resp.Content.Text())
	if summary == "" {
		summary = "(The earlier conversation could not be summarised.)"
	}
	a.log.Info("compacted history", slog.Int("messages", boundary), slog.Bool("requested", requested))
	done, err = a.commit(ctx, store.Continue(store.Continuation{
		CompressBefore:  a.msgs[boundary].row.ID,
		ClearCompaction: requested,
		Messages: []store.NewMessage{{Role: client.RoleUser, Visibility: store.VisibleModel,
			Parts: []jsonb.Part{{Type: jsonb.PartSummary, Text: "Summary of the earlier conversation:\n" + summary}}}},
		CountAttempt: true, // the step the compaction delayed comes next
	}))
	return done, true, err
}

// estimateTokens is a rough prompt size: about four bytes per token.
func estimateTokens(system string, msgs []parsed) int {
	n := len(system)
	for _, m := range msgs {
		n += len(m.row.Content)
	}
	return n / 4
}
