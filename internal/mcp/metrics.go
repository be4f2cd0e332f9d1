package mcp

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/prom"
)

// mcpMetrics are the package's instruments; all are no-ops without a
// registry.
type mcpMetrics struct {
	calls     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	connects  *prometheus.CounterVec
	refreshes *prometheus.CounterVec
	refused   *prometheus.CounterVec
}

func (m *Manager) instrument(reg *prometheus.Registry) {
	m.m.calls = prom.Counter(reg, "chatd_mcp_calls_total",
		"MCP tool calls by server, tool and outcome (ok, tool_error, timeout, unavailable, error, too_large, cancelled, not_repeated).",
		"server", "tool", "outcome")
	m.m.latency = prom.Histogram(reg, "chatd_mcp_call_duration_seconds",
		"MCP tool calls, from the request to the answer or the timeout, by server and tool.",
		prom.LatencyBuckets, "server", "tool")
	m.m.connects = prom.Counter(reg, "chatd_mcp_connects_total",
		"Connections to MCP servers (a stdio server's start) by server and outcome (ok, error).", "server", "outcome")
	m.m.refreshes = prom.Counter(reg, "chatd_mcp_tool_refreshes_total",
		"Tool lists read again after a connection, by server and reason (list_changed).", "server", "reason")
	m.m.refused = prom.Counter(reg, "chatd_mcp_tools_refused_total",
		"Tools of MCP servers never offered to a model, by server and reason (name, reserved, schema, too_many).",
		"server", "reason")
	prom.Func(reg, "chatd_mcp_server_up", "1 while chatd has a live connection to the MCP server.", prometheus.GaugeValue,
		[]string{"server"}, func() []prom.Sample {
			out := make([]prom.Sample, 0, len(m.names))
			for _, n := range m.names {
				s := m.servers[n]
				s.mu.Lock()
				up := s.session != nil && !s.session.closed()
				s.mu.Unlock()
				v := 0.0
				if up {
					v = 1
				}
				out = append(out, prom.Sample{Values: []string{n}, Value: v})
			}
			return out
		})
	prom.Func(reg, "chatd_mcp_tools", "Tools of the MCP server offered to models (after allow/deny and admission).",
		prometheus.GaugeValue, []string{"server"}, func() []prom.Sample {
			out := make([]prom.Sample, 0, len(m.names))
			for _, n := range m.names {
				out = append(out, prom.Sample{Values: []string{n}, Value: float64(len(m.servers[n].listed()))})
			}
			return out
		})
}
