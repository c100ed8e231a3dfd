package parallel

import (
	"runtime"
	"sync"
)

// For calls fn(i) for every i in [0, n), spread over GOMAXPROCS goroutines in runs of consecutive indexes, and
// returns when all are done. fn must be safe to call concurrently; callers keep their output in order by
// writing to the i-th element of a slice.
func For(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	// Small runs handed out in turn balance work that is uneven across the list.
	const run = 64
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				start := next
				next += run
				mu.Unlock()
				if start >= n {
					return
				}
				for i := start; i < min(start+run, n); i++ {
					fn(i)
				}
			}
		}()
	}
	wg.Wait()
}
