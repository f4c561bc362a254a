package scrape

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/guard"
)

// A round asks the plugins of one selection once, for every scrape of that
// selection that arrives while it is under way: the two servers of an HA
// pair scraping at the same moment cost one collect per plugin.
//
// It shares results, not waits. Each plugin's answer is shared as soon as it
// arrives; each scrape waits for each answer only until its own deadline
// and then merges what has arrived, leaving the late plugins' series out. A
// merge depends on which plugins it holds, so scrapes share a merge only
// when they saw the same plugins answer; usually they all saw every plugin,
// and the round merges once.
//
// A round takes new scrapes until every plugin has answered or until no
// scrape is left in it: a scrape arriving after that starts a round of its
// own, which asks the plugins that answered again (fresh values) and joins
// the Collect still in flight of those that did not (supervise shares it).
type round struct {
	key     string // the selection's
	picked  []*supervise.Supervisor
	answers []answer
	pending atomic.Int32 // answers not yet in

	members int                // scrapes in the round; guarded by Scraper.mu
	cancel  context.CancelFunc // ends the waits once no scrape is left

	mu     sync.Mutex
	merges map[string]*sharedMerge // by the plugins that had answered (maskKey)
}

// answer is one plugin's Collect in a round. Its fields are written once,
// before ready is closed, and only read after.
type answer struct {
	ready chan struct{}
	coll  *supervise.Collection
	at    time.Time // when the Collect returned
	// counted makes the plugin's partial errors count once per answer, not
	// once per merge that holds it.
	counted sync.Once
}

// sharedMerge is one merge of a round's answers and the self-metric totals
// right after it, for every scrape that saw the same plugins answer.
type sharedMerge struct {
	once          sync.Once
	res           *guard.Result
	dropped       map[guard.DropKey]float64
	errors        map[[2]string]float64
	errorsDropped map[string]float64
}

// startRound asks every picked plugin once. The Collects run under the
// plugins' own timeouts (supervise), so the round ends by itself; cancel
// ends its waits early once no scrape is left in it. done runs once every
// plugin has answered (never for a round without plugins).
func startRound(key string, picked []*supervise.Supervisor, done func(*round)) *round {
	ctx, cancel := context.WithCancel(context.Background())
	r := &round{key: key, picked: picked, answers: make([]answer, len(picked)), cancel: cancel, merges: map[string]*sharedMerge{}}
	r.pending.Store(int32(len(picked)))
	for i, sup := range picked {
		a := &r.answers[i]
		a.ready = make(chan struct{})
		go func() {
			a.coll = sup.Collect(ctx)
			a.at = time.Now()
			close(a.ready)
			if r.pending.Add(-1) == 0 {
				done(r)
			}
		}()
	}
	return r
}

// wait returns which plugins had answered when every one had, or when ctx
// ended, whichever came first.
func (r *round) wait(ctx context.Context) []bool {
	got := make([]bool, len(r.answers))
wait:
	for i := range r.answers {
		select {
		case <-r.answers[i].ready:
		case <-ctx.Done():
			break wait
		}
	}
	for i := range r.answers {
		select {
		case <-r.answers[i].ready:
			got[i] = true
		default:
		}
	}
	return got
}

// merged returns the round's merge of the answers got holds, made by do
// for the first scrape that asks for it; scrapes asking for the same
// answers while it runs wait for it and share it.
func (r *round) merged(got []bool, do func(*sharedMerge)) *sharedMerge {
	key := maskKey(got)
	r.mu.Lock()
	m := r.merges[key]
	if m == nil {
		m = &sharedMerge{}
		r.merges[key] = m
	}
	r.mu.Unlock()
	m.once.Do(func() { do(m) })
	return m
}

func maskKey(got []bool) string {
	b := make([]byte, len(got))
	for i, ok := range got {
		b[i] = '0'
		if ok {
			b[i] = '1'
		}
	}
	return string(b)
}

// waited is how long a scrape that arrived at arrived and stopped waiting
// at left waited for plugin i: until the plugin answered, at most the
// Collect's own duration (a scrape that joined a Collect under way waited
// only for its rest, and one that arrived after the answer not at all), or
// until it left.
func (r *round) waited(i int, got bool, arrived, left time.Time) time.Duration {
	if !got {
		return left.Sub(arrived)
	}
	a := &r.answers[i]
	return max(0, min(a.coll.Duration, a.at.Sub(arrived)))
}
