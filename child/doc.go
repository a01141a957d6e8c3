// Package child starts one job and supervises it until every process of it is gone:
// its own process group, signals passed on, a time-out, a stop ordered from outside
// (Watch), the leftovers of the job hunted down, and a guard process that kills the job
// should cronlock itself be killed. It relays or spools the job's output and keeps its
// tail.
//
// It knows no lock: whoever holds one tells Supervise when the job must stop (Stop on a
// Watch). It never invokes a shell: the job's argv is executed directly.
package child
