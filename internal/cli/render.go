package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/chatd/chatd/client"
)

// The human-readable rendering of show and tail: one block per message,
// `[ID] role: text`, parts indented below.

func renderChat(ch client.Chat) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chat %s  %s  model %s  %s\n", ch.ID, ch.Status.Word(), ch.Model, oneLine(ch.Title, 80))
	if ch.LastError != nil {
		fmt.Fprintf(&b, "  last error: %s\n", describeError(ch.LastError))
	}
	for _, tc := range ch.PendingToolCalls {
		fmt.Fprintf(&b, "  waiting for tool %s(%s)  [%s]\n", tc.ToolName, oneLine(string(tc.Args), 200), tc.ToolCallID)
	}
	return b.String()
}

func renderMessage(m client.ChatMessage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%d] %s %s:", m.ID, m.CreatedAt.Local().Format(time.TimeOnly), m.Role)
	if so := m.StructuredOutput; so != nil {
		fmt.Fprintf(&b, " receipt %s %s", so.RequestID, so.Status)
		if so.Status == client.OutputSucceeded {
			fmt.Fprintf(&b, " %s\n", oneLine(string(so.Value), 2000))
		} else if so.Error != nil {
			fmt.Fprintf(&b, " (%s: %s)\n", so.Error.Code, so.Error.Message)
		} else {
			b.WriteByte('\n')
		}
		return b.String()
	}
	if m.StructuredOutputRequestID != nil {
		fmt.Fprintf(&b, " (structured request %s)", m.StructuredOutputRequestID)
	}
	b.WriteByte('\n')
	for _, p := range m.Content {
		b.WriteString(renderPart(p))
	}
	return b.String()
}

func renderPart(p client.MessagePart) string {
	switch p.Type {
	case "text":
		return indent(p.Text)
	case "reasoning":
		return indent("(thinking) " + p.Text)
	case "tool-call":
		return indent(fmt.Sprintf("→ %s(%s)  [%s]", p.ToolName, oneLine(string(p.Args), 200), p.ToolCallID))
	case "tool-result":
		mark := "←"
		if p.IsError {
			mark = "← error"
		}
		return indent(fmt.Sprintf("%s %s: %s  [%s]", mark, p.ToolName, oneLine(string(p.Result), 200), p.ToolCallID))
	}
	return indent("(" + p.Type + ")")
}

func renderQueue(q []client.QueuedMessage) string {
	var b strings.Builder
	for _, m := range q {
		text := ""
		for _, p := range m.Content {
			text += p.Text
		}
		fmt.Fprintf(&b, "queued %d: %s\n", m.ID, oneLine(text, 80))
	}
	return b.String()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

// oneLine flattens whitespace and cuts s to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
