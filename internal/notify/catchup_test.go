package notify_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/notify"
)

// process is a hub and its relay, as one chatd process has.
type process struct {
	hub   *notify.Hub
	relay *notify.Relay
}

func start(t *testing.T, n int) []process {
	t.Helper()
	ctx := t.Context()
	pool := dbtest.New(t)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	ps := make([]process, n)
	for i := range ps {
		hub := notify.New(pool, nil)
		relay := notify.NewRelay(pool, hub, nil)
		wg.Go(func() { hub.Run(ctx) }) // ctx ends before the cleanups run
		wg.Go(func() { relay.Run(ctx) })
		<-hub.Ready()
		ps[i] = process{hub, relay}
	}
	return ps
}

// fragment n of a step: text, long every 7th (split in payload pieces).
func fragment(n int64) notify.Delta {
	t := strings.Repeat("x", int(n%5)) + "|"
	if n%7 == 0 {
		t = strings.Repeat("日本", 700) + "|"
	}
	return notify.Delta{HistoryVersion: 2, Attempt: 1, Seq: n, Kind: notify.KindText, Text: t}
}

// TestCatchUpAcrossProcesses: a stream on process B joins a step that
// process A's relay has been buffering (and not publishing: nobody
// followed the chat). B's catch-up request is answered over the
// notification channel; with the live fragments that follow, B's
// subscriber gets every fragment, with its text, whatever the order in
// which the catch-up and the live fragments arrive. A's own streams get
// the buffer at once; A's commit drops it.
func TestCatchUpAcrossProcesses(t *testing.T) {
	t.Parallel()
	ps := start(t, 2)
	a, b := ps[0], ps[1]
	chat := uuid.New()
	const before, total = 20, 80
	for n := int64(1); n <= before; n++ {
		a.relay.Delta(chat, fragment(n))
	}
	sub := b.hub.SubscribeDeltas(chat)
	defer sub.Close()
	if cu := b.hub.CatchUp(chat); cu != nil {
		t.Fatal("B answered a catch-up of a step it does not run")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := int64(before + 1); n <= total; n++ {
			a.relay.Delta(chat, fragment(n))
			if n%10 == 0 {
				a.relay.Flush()
			}
		}
		a.relay.Flush()
	}()
	got := map[int64]string{}
	catchUps := 0
	timeout := time.After(30 * time.Second)
	for len(got) < total || catchUps == 0 {
		select {
		case ds := <-sub.C():
			for _, d := range ds.Live {
				got[d.Seq] = d.Text
			}
			if cu := ds.CatchUp; cu != nil {
				catchUps++
				if cu.Base != 0 || cu.Last < before || cu.HistoryVersion != 2 {
					t.Fatalf("catch-up %+v", cu)
				}
				for _, p := range cu.Parts {
					for seq := p.First(); seq <= p.Seq; seq++ {
						f := p
						if seq > p.First() {
							f = f.After(seq - 1)
						}
						if seq < f.Seq {
							f = f.Upto(seq)
						}
						got[seq] = f.Text
					}
				}
			}
		case <-timeout:
			t.Fatalf("%d of %d fragments, %d catch-ups in 30 s", len(got), total, catchUps)
		}
		if sub.Lost() {
			t.Fatal("batches lost")
		}
	}
	<-done
	for n := int64(1); n <= total; n++ {
		if got[n] != fragment(n).Text {
			t.Fatalf("fragment %d: %q", n, got[n])
		}
	}
	cu := a.hub.CatchUp(chat)
	if cu == nil || cu.Last != total || len(cu.Parts) != 1 || cu.Parts[0].First() != 1 {
		t.Fatalf("A's own catch-up %+v", cu)
	}
	a.hub.TellChanged(chat, uuid.New(), 9)
	if cu := a.hub.CatchUp(chat); cu != nil {
		t.Fatal("the buffer outlived the worker's commit")
	}
}
