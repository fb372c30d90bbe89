// A Go program that reads through a nil pointer in a frameless leaf (no frame of its own, so no
// frame pointer pushed) three calls below main, for tests/test_go_core.py. Run with GOTRACEBACK=crash:
// the runtime turns the fault into a panic, then aborts so that the kernel writes a core.
package main

type job struct{ value int }

//go:noinline
func leaf(j *job) int {
	return j.value
}

//go:noinline
func third(j *job) int {
	return leaf(j) + 3
}

//go:noinline
func second(j *job) int {
	return third(j) * 2
}

//go:noinline
func first(j *job) int {
	return second(j) - 1
}

func main() {
	var j *job
	println(first(j))
}
